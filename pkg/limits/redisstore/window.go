package redisstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// A window hit (fixed_window or sliding_window) is decided with Redis's
// native commands: each window is a counter of its own, an unsigned 63-bit
// BITFIELD field under the hit's key followed by windowSep and the window's
// index floor(now/T), and
//
//   - a hit that consumes adds its cost with BITFIELD … OVERFLOW SAT
//     INCRBY, sends PEXPIRE … NX to the instant the window stops mattering
//     (its end for a fixed window, the end of the next one for a sliding
//     window: sent until this instance has seen it set, see expirySeen)
//     and, for a sliding window, GET of the previous window's counter
//     (until its count is final, see prevCounts), all in the pipeline of
//     the call;
//   - the service then decides with limits.DecideWithin on the counts as
//     they were before the hit (the reply less the cost), which is what
//     the embedded store decides with too;
//   - a hit whose run is refused, unless its limit counts refused hits,
//     takes its cost back (undo) with the same saturating INCRBY, in a
//     second round trip that Decide sends aside and does not wait for
//     (sendBack), so that the answer costs one round trip.
//
// BITFIELD is atomic, so no two hits ever see the same count, whatever the
// number of instances: the counts of the allowed hits never add up past N.
// Between a refused hit's charge and its undo, its cost is counted: a
// concurrent hit, or the caller's next one, may then be refused where it
// would have fitted, never allowed where it would not. A peek reads the counters (GET).
//
// The counter is a BITFIELD field, not an INCRBY string, so that nothing
// that takes units back can take it below zero: OVERFLOW SAT stops a
// refund, or an undo that comes after the counter expired and was
// recreated, at zero, where DECRBY would leave a credit (an overshoot).
// A count_refused charge adds with a pair of SAT increments, (cost + M −
// 2N) then (2N − M), M the field's largest value, which stops the count at
// 2N, one period's worth of debt, where the embedded store stops counting.
// An undo or a refund may create the key (the counter expired meanwhile):
// it sends PEXPIRE … NX too, so that no counter lives without a TTL.
//
// The instant comes from Redis's clock as the store estimates it
// (redisClock), since a native command cannot read TIME itself: a hit
// within the estimate's uncertainty of a window boundary may be counted in
// the window on either side of it, and is then decided there.

// windowSep separates a window counter's hit key from the window's index.
// Keys end in a length-prefixed string, so nothing the service builds ends
// with it by accident. It was '@' while counters were INCRBY strings: a new
// separator keeps the BITFIELD counters of an upgraded instance and the
// strings of one not yet upgraded apart, each instance reading only its own.
const windowSep = '#'

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

// windowHit is one window hit: its commands, queued in the call's
// pipeline, and what deciding and undoing it need once they have run.
type windowHit struct {
	i     int // its index in the call's hits and results
	limit limits.Limit
	cost  int64
	now   int64
	w     int64
	cur   string // the key of window w

	// Exactly one of op and get reads the current window's count.
	op  *redis.IntSliceCmd // BITFIELD cur: a charge, or a refund
	get *redis.StringCmd   // GET cur: a peek, a hit that can never fit, a refund later
	// refund is a refund's commands, held back until its run is allowed
	// (refundLater).
	refund []redis.Cmder
	// prev reads the previous window's count (sliding window), unless
	// prevs had it final: then prevN holds it. keep is where the count
	// read goes once it is final (prevCounts), nil while it may change.
	prev  *redis.StringCmd
	prevN int64
	keep  *prevCounts
	prevK string
	// expire is the PEXPIRE … NX sent with a charge or a refund, nil where
	// the store had seen the counter's expiry set (expirySeen); seen is the
	// counter's entry there, ttl the PEXPIRE's milliseconds. Its error
	// fails the hit: a counter must not live without a TTL unnoticed.
	expire *redis.IntCmd
	seen   uint64
	// expiries are the counters seen with their TTL set (Store.expiries).
	expiries *expirySeen
	ttl      int64
	// before and prevBefore are the counts the hit found, once decided.
	before, prevBefore int64
}

// newWindowHit queues in wk the commands of hit h, decided at now; seen
// tells which counters need no PEXPIRE, and prevs which previous windows'
// counts are final.
func newWindowHit(ctx context.Context, i int, h *limits.Hit, now int64, seen *expirySeen, prevs *prevCounts, wk *work, refundLater bool) *windowHit {
	l := algorithmOnly(h.Limit)
	// The window's index and bounds: floor(now/T) and its multiples of T,
	// or a calendar's (limits.WindowFrame), as the embedded store's.
	f := limits.WindowFrame(l, now)
	wh := &windowHit{i: i, limit: l, cost: h.Cost, now: now, w: f.W}
	wh.cur = windowKey(h.Key, wh.w)
	end := f.End // when the count stops mattering
	if l.Algorithm == limits.SlidingWindow {
		end = f.Next
	}
	wh.expiries, wh.seen, wh.ttl = seen, seen.hash(wh.cur), ttlMillis(end-now)
	key := any(wh.cur)
	switch {
	case h.Cost < 0 && refundLater:
		wh.refund = []redis.Cmder{redis.NewIntSliceCmd(ctx, "bitfield", key, "overflow", "sat", "incrby", "u63", 0, h.Cost), wh.expireCmd(ctx)}
		wh.get = redis.NewStringCmd(ctx, "get", key)
		wk.Cmds = append(wk.Cmds, wh.get)
	case h.Cost < 0:
		wh.op = redis.NewIntSliceCmd(ctx, "bitfield", key, "overflow", "sat", "incrby", "u63", 0, h.Cost)
		wh.expire = wh.expireCmd(ctx)
		wk.Cmds = append(wk.Cmds, wh.op, wh.expire)
	case h.Cost == 0 || h.Cost > l.Requests && !l.CountRefused:
		wh.get = redis.NewStringCmd(ctx, "get", key)
		wk.Cmds = append(wk.Cmds, wh.get)
	default:
		if l.CountRefused {
			c := min(h.Cost, 2*l.Requests)
			wh.op = redis.NewIntSliceCmd(ctx, "bitfield", key, "overflow", "sat",
				"incrby", "u63", 0, c+maxU63-2*l.Requests, "incrby", "u63", 0, 2*l.Requests-maxU63)
		} else {
			wh.op = redis.NewIntSliceCmd(ctx, "bitfield", key, "overflow", "sat", "incrby", "u63", 0, h.Cost)
		}
		wk.Cmds = append(wk.Cmds, wh.op)
		if !seen.has(wh.seen) {
			wh.expire = wh.expireCmd(ctx)
			wk.Cmds = append(wk.Cmds, wh.expire)
		}
	}
	if l.Algorithm == limits.SlidingWindow {
		pk := windowKey(h.Key, wh.w-1)
		final := prevs.final(f.Start, now)
		if final {
			if n, ok := prevs.get(pk); ok {
				wh.prevN = n
				return wh
			}
			wh.keep, wh.prevK = prevs, pk
		}
		wh.prev = redis.NewStringCmd(ctx, "get", pk)
		wk.Cmds = append(wk.Cmds, wh.prev)
	}
	return wh
}

// expireCmd is the hit's PEXPIRE … NX.
func (wh *windowHit) expireCmd(ctx context.Context) *redis.IntCmd {
	return redis.NewIntCmd(ctx, "pexpire", wh.cur, wh.ttl, "nx")
}

// checkExpiry records in wh.expiries a counter whose PEXPIRE ran, and
// queues in back the PEXPIRE of one that this charge created (it found no
// count) without sending one: the counter is new to Redis although
// wh.expiries had its expiry (see expirySeen). A counter at zero that an
// undo left behind looks new too; its PEXPIRE … NX then changes nothing.
func (wh *windowHit) checkExpiry(ctx context.Context, back *work) {
	switch {
	case !wh.charges():
	case wh.expire != nil:
		if wh.expire.Err() == nil {
			wh.expiries.add(wh.seen)
		}
	case wh.before == 0:
		back.Cmds = append(back.Cmds, wh.expireCmd(ctx))
	}
}

// charges reports whether the hit adds its cost to the counter.
func (wh *windowHit) charges() bool { return wh.op != nil && wh.cost > 0 }

// decide decides the hit from its commands' replies, and queues in back
// the PEXPIRE that a counter it created lacks.
func (wh *windowHit) decide(ctx context.Context, back *work) (limits.Result, int64, error) {
	res, err := wh.decideWindow(ctx, back)
	return res, 0, err
}

// decideWindow is decide, which a window never asks to go again.
func (wh *windowHit) decideWindow(ctx context.Context, back *work) (limits.Result, error) {
	cur, err := wh.current()
	var prev int64
	switch {
	case err != nil:
	case wh.expire != nil && wh.expire.Err() != nil:
		err = wh.expire.Err()
	case wh.prev != nil:
		prev, err = counterOf(wh.prev)
		if err == nil && wh.keep != nil {
			wh.keep.put(wh.prevK, prev)
		}
	default:
		prev = wh.prevN
	}
	if err != nil {
		wh.expiries.forget()
		return limits.Result{}, err
	}
	if cur > maxCount {
		// Not a counter: BITFIELD reads any string as bits.
		return limits.Result{}, fmt.Errorf("%w under key %s", errMalformed, wh.cur)
	}
	wh.before = cur
	wh.checkExpiry(ctx, back)
	if l := wh.limit; l.CountRefused {
		cur, prev = min(cur, 2*l.Requests), min(prev, 2*l.Requests)
	}
	wh.prevBefore = prev
	state := limits.State{Live: cur > 0 || prev > 0, Window: wh.w, Count: cur, Prev: prev}
	return limits.DecideWithin(wh.limit, state, wh.cost, wh.now, 0).Result, nil
}

// maxCount is more than any counter holds: N (up to 2^32) and the costs of
// refused hits not yet undone (each at most N) of 2^16 concurrent calls. A
// counter above it is a key that some other writer filled.
const maxCount = 1 << 48

// current is the current window's count as the hit found it, from its
// BITFIELD's reply or its GET.
func (wh *windowHit) current() (int64, error) {
	if wh.get != nil {
		return counterOf(wh.get)
	}
	// A reply that arrived wins over the error go-redis sets on every
	// command of a pipeline that failed part way (see replyWins): the
	// BITFIELD ran.
	v := wh.op.Val()
	switch {
	case len(v) == 0 && wh.op.Err() != nil:
		return 0, wh.op.Err()
	case len(v) == 0:
		return 0, fmt.Errorf("%w: BITFIELD %v", errReply, v)
	case wh.cost < 0:
		// A refund: what it found, as far as the decision can tell (what
		// it left is never below zero, nor is the decision's).
		return v[0] - wh.cost, nil
	case !wh.limit.CountRefused:
		return v[0] - wh.cost, nil
	case v[0] == maxU63:
		// The count stopped at 2N: the hit found at least 2N less its
		// cost, and decides as if it found 2N.
		return 2 * wh.limit.Requests, nil
	}
	return v[0] - (min(wh.cost, 2*wh.limit.Requests) + maxU63 - 2*wh.limit.Requests), nil
}

// undo queues in back what takes the hit's charge back, its run refused:
// its cost, unless its limit counts refused hits. Saturating, so never
// below zero, and with PEXPIRE … NX for a counter that expired meanwhile.
func (wh *windowHit) undo(ctx context.Context, back *work, _ undoing) {
	if wh.charges() && !wh.limit.CountRefused {
		back.Cmds = append(back.Cmds,
			redis.NewIntSliceCmd(ctx, "bitfield", wh.cur, "overflow", "sat", "incrby", "u63", 0, -wh.cost),
			wh.expireCmd(ctx))
	}
}

// errMalformed marks a key that holds a value this build did not write.
var errMalformed = errors.New("malformed state")

// counterOf reads a counter's GET: zero for an absent key. A value that
// arrived wins over the command's error; a counter is 8 bytes, the u63 in
// their high bits.
func counterOf(cmd *redis.StringCmd) (int64, error) {
	v, err := cmd.Val(), cmd.Err()
	switch {
	case v != "":
	case errors.Is(err, redis.Nil):
		return 0, nil
	case err != nil:
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("%w under key %s", errMalformed, cmd.Args()[1])
	}
	return int64(binary.BigEndian.Uint64([]byte(v)) >> 1), nil
}

// ttlMillis is a TTL of us microseconds (> 0) in milliseconds, rounded up,
// and at least 2: a key may outlive its state by less than 2 ms, never the
// other way round. Not 1 ms: PEXPIRE deletes a key at once when its expiry
// is already due by Redis's clock as the command checks it, which a 1 ms
// TTL is whenever a millisecond ends between the command's two clock
// reads. A stale state decides as an absent key, so a key kept longer
// changes nothing.
func ttlMillis(us int64) int64 { return max(2, (us+999)/1000) }

// floorDiv is floor(a/b) for b > 0, also for negative a.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}
