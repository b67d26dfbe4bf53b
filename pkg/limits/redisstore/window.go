package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// A window hit (fixed_window or sliding_window) on its own is decided with
// Redis's native commands, not a script: each window is a counter of its
// own, under the hit's key followed by windowSep and the window's index
// floor(now/T), and
//
//   - a hit that consumes is INCRBY of its cost on the current window,
//     PEXPIRE … NX to the instant the window stops mattering (its end for a
//     fixed window, the end of the next one for a sliding window: sent
//     until this instance has seen it set, see expirySeen) and, for
//     a sliding window, GET of the previous window's counter (until its
//     count is final, see prevCounts), all in the pipeline of the call;
//   - the service then decides with limits.DecideWithin on the counts as
//     they were before the hit (INCRBY's reply less the cost), which is what
//     the embedded store decides with too;
//   - a refused hit, unless its limit counts refused hits, gives its cost
//     back (lua/give_back.lua) in a second round trip before Decide returns.
//
// INCRBY is atomic, so no two hits ever see the same count, whatever the
// number of instances: the counts of the allowed hits never add up past N.
// Between a refused hit's INCRBY and its give-back, its cost is counted:
// a concurrent hit may then be refused where it would have fitted, never
// allowed where it would not. A peek reads the counters (GET); a refund
// takes its units back with give_back.lua, never below zero. count_refused
// never gives anything back (envoyproxy/ratelimit's INCRBY), and a count
// above its limit's 2N is read as 2N, which is where the embedded store
// stops counting (one period's worth of debt).
//
// The instant comes from Redis's clock as the store estimates it
// (redisClock), since a native command cannot read TIME itself: a hit
// within the estimate's uncertainty of a window boundary may be counted in
// the window on either side of it, and is then decided there.

// windowSep separates a window counter's hit key from the window's index.
// Keys end in a length-prefixed string, so nothing the service builds ends
// with it by accident; lua/prelude.lua's window_key appends the same.
const windowSep = '@'

// windowKey is the key of window w of a hit key. It allocates the key
// alone: it is built on the stack first.
func windowKey(key string, w int64) string {
	var buf [128]byte
	b := append(buf[:0], key...)
	b = append(b, windowSep)
	return string(strconv.AppendInt(b, w, 10))
}

// isWindow reports whether a counts in windows.
func isWindow(a limits.Algorithm) bool {
	return a == limits.FixedWindow || a == limits.SlidingWindow
}

// noCap is give_back.lua's cap for a limit whose counts are read as they
// are.
const noCap = -1

// windowHit is one window hit on its own: its commands, queued in the
// call's pipeline, and what deciding it needs once they have run.
type windowHit struct {
	i     int // its index in the call's hits and results
	limit limits.Limit
	cost  int64
	now   int64
	w     int64
	cur   string // the key of window w

	// Exactly one of incr, get and refund reads the current window's count.
	incr   *redis.IntCmd    // INCRBY cur cost: a hit that consumes
	get    *redis.StringCmd // GET cur: a peek, or a hit that can never fit
	refund *scriptCall      // give_back.lua: a refund
	// prev reads the previous window's count (sliding window), unless
	// prevs had it final: then prevN holds it. keep is where the count
	// read goes once it is final (prevCounts), nil while it may change.
	prev  *redis.StringCmd
	prevN int64
	keep  *prevCounts
	prevK string
	// expire is the PEXPIRE … NX sent with incr, nil where the store had
	// seen the counter's expiry set (expirySeen); seen is the counter's
	// entry there, ttl the PEXPIRE's milliseconds.
	expire *redis.IntCmd
	seen   uint64
	ttl    int64
}

// newWindowHit queues in wk the commands of hit h, decided at now; seen
// tells which counters need no PEXPIRE, and prevs which previous windows'
// counts are final.
func newWindowHit(ctx context.Context, i int, h *limits.Hit, now int64, seen *expirySeen, prevs *prevCounts, wk *work) *windowHit {
	l := h.Limit
	t := l.PeriodMicros()
	wh := &windowHit{i: i, limit: l, cost: h.Cost, now: now, w: floorDiv(now, t)}
	wh.cur = windowKey(h.Key, wh.w)
	end := (wh.w + 1) * t // when the count stops mattering
	if l.Algorithm == limits.SlidingWindow {
		end += t
	}
	switch {
	case h.Cost < 0:
		wh.refund = wk.script(&giveBackScript, []string{wh.cur}, -h.Cost, countCap(l))
	case h.Cost == 0 || h.Cost > l.Requests && !l.CountRefused:
		wh.get = redis.NewStringCmd(ctx, "get", wh.cur)
		wk.cmds = append(wk.cmds, wh.get)
	default:
		wh.incr = redis.NewIntCmd(ctx, "incrby", wh.cur, h.Cost)
		wk.cmds = append(wk.cmds, wh.incr)
		wh.seen, wh.ttl = seen.hash(wh.cur), ttlMillis(end-now)
		if !seen.has(wh.seen) {
			wh.expire = wh.expireCmd(ctx)
			wk.cmds = append(wk.cmds, wh.expire)
		}
	}
	if l.Algorithm == limits.SlidingWindow {
		pk := windowKey(h.Key, wh.w-1)
		final := prevs.final(wh.w*t, now)
		if final {
			if n, ok := prevs.get(pk); ok {
				wh.prevN = n
				return wh
			}
			wh.keep, wh.prevK = prevs, pk
		}
		wh.prev = redis.NewStringCmd(ctx, "get", pk)
		wk.cmds = append(wk.cmds, wh.prev)
	}
	return wh
}

// expireCmd is the hit's PEXPIRE … NX.
func (wh *windowHit) expireCmd(ctx context.Context) *redis.IntCmd {
	return redis.NewIntCmd(ctx, "pexpire", wh.cur, wh.ttl, "nx")
}

// checkExpiry records in seen a counter whose PEXPIRE ran, and queues in
// back the PEXPIRE of one that this hit created (INCRBY's reply is its own
// cost) without sending one: the counter is new to Redis although seen had
// its expiry (see expirySeen).
func (wh *windowHit) checkExpiry(ctx context.Context, seen *expirySeen, back *work) {
	switch {
	case wh.incr == nil:
	case wh.expire != nil:
		if wh.expire.Err() == nil {
			seen.add(wh.seen)
		}
	case wh.incr.Val() == wh.cost:
		back.cmds = append(back.cmds, wh.expireCmd(ctx))
	}
}

// countCap is what a count of l is read as at most: 2N where refused hits
// count (one period's worth of debt, as the embedded store keeps), no
// bound otherwise, where only the cost of refusals not yet given back can
// take it past N.
func countCap(l limits.Limit) int64 {
	if l.CountRefused {
		return 2 * l.Requests
	}
	return noCap
}

// decide decides the hit from its commands' replies, and reports whether
// its cost must be given back (a refused hit that INCRBY counted).
func (wh *windowHit) decide() (res limits.Result, giveBack bool, err error) {
	var cur, prev int64
	switch {
	case wh.incr != nil:
		// A reply that arrived wins over the error go-redis sets on every
		// command of a pipeline that failed part way (see run.results): the
		// INCRBY ran. It is never 0: it counts this hit's cost.
		r := wh.incr.Val()
		if r == 0 {
			err = wh.incr.Err()
		}
		cur = r - wh.cost
	case wh.get != nil:
		cur, err = countOf(wh.get)
	default:
		cur, err = wh.refund.count()
	}
	switch {
	case err != nil:
	case wh.prev != nil:
		prev, err = countOf(wh.prev)
		if err == nil && wh.keep != nil {
			wh.keep.put(wh.prevK, prev)
		}
	default:
		prev = wh.prevN
	}
	if err != nil {
		return limits.Result{}, false, err
	}
	if c := countCap(wh.limit); c != noCap {
		cur, prev = min(cur, c), min(prev, c)
	}
	cur, prev = max(cur, 0), max(prev, 0)
	state := limits.State{Live: cur > 0 || prev > 0, Window: wh.w, Count: cur, Prev: prev}
	d := limits.DecideWithin(wh.limit, state, wh.cost, wh.now, 0)
	return d.Result, wh.incr != nil && !d.Result.Allowed && !wh.limit.CountRefused, nil
}

// errMalformed marks a key that holds a value this build did not write.
var errMalformed = errors.New("malformed state")

// countOf reads a counter's GET: zero for an absent key.
// A value that arrived wins over the command's error, as for INCRBY; a
// counter is never empty.
func countOf(cmd *redis.StringCmd) (int64, error) {
	v, err := cmd.Val(), cmd.Err()
	switch {
	case v != "":
	case errors.Is(err, redis.Nil):
		return 0, nil
	case err != nil:
		return 0, err
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w under key %s", errMalformed, cmd.Args()[1])
	}
	return n, nil
}

// ttlMillis is lua/prelude.lua's ttl_ms: a TTL of us microseconds (> 0) in
// milliseconds, rounded up, and at least 2 (see there why not 1).
func ttlMillis(us int64) int64 { return max(2, (us+999)/1000) }

// floorDiv is floor(a/b) for b > 0, also for negative a.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}
