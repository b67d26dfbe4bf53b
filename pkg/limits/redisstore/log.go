package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// A sliding log hit on its own is decided with native commands on a sorted
// set that holds one member per unit of cost the log counts, scored by the
// instant of its hit in microseconds: a hit of cost c that consumes is c
// members, each named uniquely by the instance that adds it (logMembers).
// So the total inside the window is a count, and a hit is
//
//   - ZREMRANGEBYSCORE of what has left the window (at or before now − T),
//     ZADD of its members, ZCARD and PEXPIRE (to now + T) in the call's
//     pipeline; it fits if the count, its own members included, is at most
//     N; the same pipeline reads the newest members and those around the
//     one whose leaving would let it in (aroundOwn), so that a refused
//     hit's answer is read there too; one whose run is refused removes its
//     members again (ZREM, exact whatever happened meanwhile: undo), after
//     the answer;
//   - a peek reads the count and those two members (ZCOUNT, ZRANGE … REV
//     LIMIT);
//   - a refund pops the newest members (ZPOPMAX), never more than there
//     are.
//
// Between a refused hit's ZADD and its ZREM, its members are counted: a
// concurrent hit may be refused where it would have fitted, never allowed
// where it would not, as for a window (window.go). With count_refused a
// refused hit keeps as many of its members as one period's worth of debt
// (2N) leaves room for. The results are those of limits.Decide on the
// log the set holds (decideLog checks them against it in the tests).

// logMembers names the members a store adds: a prefix random per store (48
// bits, so that no two instances share one), and a counter.
type logMembers struct {
	prefix string
	next   atomic.Uint64
}

func newLogMembers() *logMembers {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return &logMembers{prefix: base64.RawURLEncoding.EncodeToString(b[:]) + ":"}
}

// take returns c new member names.
func (m *logMembers) take(c int64) []string {
	last := m.next.Add(uint64(c))
	out := make([]string, c)
	for j := range out {
		out[j] = m.prefix + strconv.FormatUint(last-uint64(c)+uint64(j)+1, 36)
	}
	return out
}

// zsetHit is what a hit on a sorted set of members (a sliding log's
// allowed hits, a concurrency limit's slots) reads and keeps.
type zsetHit struct {
	i     int // its index in the call's hits and results
	limit limits.Limit
	cost  int64
	now   int64 // µs
	key   string
	// own are the members the hit added (a charge, an acquire), before the
	// count it found.
	own    []string
	before int64
	// refund is a refund's (a release's) commands, held back until its run
	// is allowed (refundLater), which pop popped members: the count read
	// before them is less that.
	refund []redis.Cmder
	popped int64
	// count is ZCARD after the charge (own members included), or ZCOUNT of
	// the live members (a peek, a refund, a hit that can never fit).
	count *redis.IntCmd
	// newest is the newest member that stays, and rank the one whose
	// leaving lets the hit in: a peek's, a refund's. A charge reads instead
	// the members around them in the set its own members are in (top,
	// ranked: aroundOwn).
	newest, rank *redis.ZSliceCmd
	top, ranked  *redis.ZSliceCmd
	// writes are the hit's commands of the first round trip besides its
	// reads: their errors fail it (decide).
	writes writes
}

func (z *zsetHit) refundLater() []redis.Cmder { return z.refund }

// counted is the count the hit read, or the error that fails it: the
// count's own (unless a count arrived: a reply wins over the error
// go-redis sets on every command of a pipeline that failed part way), or
// that of a write Redis refused, whose charge the count then lacks.
func (z *zsetHit) counted() (int64, error) {
	count, err := z.count.Result()
	if err != nil && count == 0 {
		return 0, err
	}
	if err := z.writes.err(); err != nil {
		return 0, err
	}
	return count, nil
}

// logHit is one sliding log hit on its own.
type logHit struct{ zsetHit }

// newLogHit queues in wk the commands of hit h at now.
func newLogHit(ctx context.Context, i int, h *limits.Hit, now int64, members *logMembers, wk *work, refundLater bool) *logHit {
	l := algorithmOnly(h.Limit)
	lh := &logHit{zsetHit{i: i, limit: l, cost: h.Cost, now: now, key: h.Key}}
	n, t := l.Requests, l.PeriodMicros()
	cutoff := now - t
	switch {
	case h.Cost < 0 && refundLater:
		// Read as the refund will leave the log: the newest member after
		// those it pops.
		lh.popped = min(-h.Cost, 2*n)
		lh.refund = []redis.Cmder{redis.NewZSliceCmd(ctx, "zpopmax", h.Key, lh.popped)}
		lh.read(ctx, wk, cutoff, lh.popped, -1)
	case h.Cost < 0:
		wk.Cmds = append(wk.Cmds, lh.writes.keep(redis.NewZSliceCmd(ctx, "zpopmax", h.Key, min(-h.Cost, 2*n))))
		lh.read(ctx, wk, cutoff, 0, 0)
	case h.Cost == 0:
		lh.read(ctx, wk, cutoff, 0, n-1)
	case h.Cost > n && !l.CountRefused:
		lh.read(ctx, wk, cutoff, 0, -1)
	default:
		lh.charge(ctx, wk, members.take(min(h.Cost, 2*n)), false)
	}
	return lh
}

// zaddLen is the length of the ZADD of members own, … NX if nx: a plain
// charge's list no longer than before holds existed.
func zaddLen(own []string, nx bool) int {
	if nx {
		return 3 + 2*len(own)
	}
	return 2 + 2*len(own)
}

// charge queues the commands of a charge whose members are own: the
// ZREMRANGEBYSCORE of what has left the window, then addOwn's.
func (lh *logHit) charge(ctx context.Context, wk *work, own []string, nx bool) {
	t := lh.limit.PeriodMicros()
	cutoff := lh.now - t
	prune := redis.NewIntCmd(ctx, "zremrangebyscore", lh.key, "-inf", cutoff)
	lh.addOwn(ctx, wk, prune, own, lh.now, logTTL(t), nx, "("+strconv.FormatInt(cutoff, 10))
}

// addOwn queues, after prune (a log's members that have left the window,
// a concurrency limit's lapsed slots), the ZADD of own scored score (… NX
// for a hold's, which names its members by its id, so that a repeated
// reserve adds none: holds.go, holdconc.go), the count, the key's TTL of
// ttl ms, and the reads a refusal's answer needs, of the members scored
// after after (aroundOwn).
func (z *zsetHit) addOwn(ctx context.Context, wk *work, prune redis.Cmder, own []string, score, ttl int64, nx bool, after string) {
	z.own = own
	zadd := make([]any, 0, zaddLen(own, nx))
	zadd = append(zadd, "zadd", z.key)
	if nx {
		zadd = append(zadd, "nx")
	}
	for _, m := range own {
		zadd = append(zadd, score, m)
	}
	z.count = redis.NewIntCmd(ctx, "zcard", z.key)
	wk.Cmds = append(wk.Cmds, z.writes.keep(prune), z.writes.keep(redis.NewIntCmd(ctx, zadd...)), z.count,
		z.writes.keep(redis.NewIntCmd(ctx, "pexpire", z.key, ttl)))
	z.aroundOwn(ctx, wk, after)
}

// logTTL is a sliding log key's TTL in milliseconds for a period of t µs:
// the period, and a second at least, so that the key of a short period
// does not expire in real time between a refused hit's two round trips;
// members that have left the window count for nothing.
func logTTL(t int64) int64 { return max(1000, ttlMillis(t)) }

// read queues the count of the members scored after cutoff (a log's
// window; a concurrency limit's slots not lapsed by now), the newest
// member (the newest-th newest: past those a refund held back will pop)
// and, for rank ≥ 0, the rank-th newest.
func (z *zsetHit) read(ctx context.Context, wk *work, cutoff, newest, rank int64) {
	after := "(" + strconv.FormatInt(cutoff, 10)
	z.count = redis.NewIntCmd(ctx, "zcount", z.key, after, "+inf")
	z.newest = newestCmd(ctx, z.key, after, newest)
	wk.Cmds = append(wk.Cmds, z.count, z.newest)
	if rank >= 0 {
		z.rank = newestCmd(ctx, z.key, after, rank)
		wk.Cmds = append(wk.Cmds, z.rank)
	}
}

// newestCmd reads the rank-th newest member of key scored after after.
func newestCmd(ctx context.Context, key, after string, rank int64) *redis.ZSliceCmd {
	return rangeCmd(ctx, key, after, rank, 1)
}

// rangeCmd reads count members of key scored after after, from the
// rank-th newest on.
func rangeCmd(ctx context.Context, key, after string, rank, count int64) *redis.ZSliceCmd {
	return redis.NewZSliceCmd(ctx, "zrange", key, "+inf", after, "byscore", "rev", "limit", rank, count, "withscores")
}

// aroundOwn queues, after a charge's ZADD, the reads a refusal's answer
// needs: the newest members, and for a cost that can fit those from the
// one whose leaving would let the hit in, each as many as the hit added
// and one. The set a refused hit leaves is this one less some of its own
// members, all scored at one instant: so what that set's k-th newest
// scores is what this one's k-th scores, or its (k+d)-th for d members
// taken out (afterOwn), and the answer needs no second round trip.
func (z *zsetHit) aroundOwn(ctx context.Context, wk *work, after string) {
	span := int64(len(z.own)) + 1
	z.top = rangeCmd(ctx, z.key, after, 0, span)
	wk.Cmds = append(wk.Cmds, z.top)
	if z.cost <= z.limit.Requests {
		z.ranked = rangeCmd(ctx, z.key, after, z.limit.Requests-z.cost, span)
		wk.Cmds = append(wk.Cmds, z.ranked)
	}
}

// afterOwn is the score (an instant, µs) of the k-th newest member of the
// set a charge leaves once d of its own members, scored at own, are taken
// out, from cmd, which read the set with them from its k-th newest on
// (aroundOwn): the k-th's score if it is later than own (the members taken
// out come after it), else the (k+d)-th's; -1 if there is none (or cmd is
// nil).
func afterOwn(cmd *redis.ZSliceCmd, own int64, d int64) (int64, error) {
	if cmd == nil {
		return -1, nil
	}
	z, err := cmd.Result()
	switch {
	case len(z) > 0 && int64(z[0].Score) > own:
		return int64(z[0].Score), nil
	case int64(len(z)) > d:
		return int64(z[d].Score), nil
	case err != nil:
		return 0, err
	}
	return -1, nil
}

// refusedAround is the newest member and the one whose leaving lets the hit
// in (-1: none) of the set a refused charge leaves, keeping keep of its own
// members scored at own (afterOwn).
func (z *zsetHit) refusedAround(own, keep int64) (newest, rank int64, err error) {
	d := int64(len(z.own)) - keep
	if newest, err = afterOwn(z.top, own, d); err != nil {
		return 0, 0, err
	}
	rank, err = afterOwn(z.ranked, own, d)
	return newest, rank, err
}

// decide decides the hit from its commands' replies; a log never asks to
// go again.
func (lh *logHit) decide(context.Context, *work) (limits.Result, int64, error) {
	res, err := lh.decideLog()
	return res, 0, err
}

// decideLog is decide.
func (lh *logHit) decideLog() (limits.Result, error) {
	count, err := lh.counted()
	if err != nil {
		return limits.Result{}, err
	}
	n, t := lh.limit.Requests, lh.limit.PeriodMicros()
	if lh.own == nil {
		newest, rank, err := scores(lh.newest, lh.rank)
		if err != nil {
			return limits.Result{}, err
		}
		return logResult(lh.limit, lh.cost, lh.now, max(0, count-lh.popped), newest, rank), nil
	}
	lh.before = count - int64(len(lh.own))
	if lh.cost <= n && lh.before+lh.cost <= n {
		// Allowed: the hit's members are the newest.
		return limits.Result{Allowed: true, Remaining: max(0, n-count), ResetAfter: micros(t)}, nil
	}
	keep := lh.kept()
	newest, rank, err := lh.refusedAround(lh.now, keep)
	if err != nil {
		return limits.Result{}, err
	}
	r := logResult(lh.limit, lh.cost, lh.now, lh.before+keep, newest, rank)
	r.Allowed = false
	return r, nil
}

// kept is how many of a refused charge's members stay: count_refused's, up
// to 2N (a log's), or as many as 2N held leaves room for (a concurrency
// limit's), none otherwise.
func (z *zsetHit) kept() int64 {
	if !z.limit.CountRefused {
		return 0
	}
	return min(int64(len(z.own)), max(0, 2*z.limit.Requests-z.before))
}

// dropped is what an undo of the charge removes, its run refused: every
// member it added, but for a limit that counts refused hits, which keeps
// an allowed hit's and kept's share of a refused one's.
func (z *zsetHit) dropped(u undoing) []string {
	switch {
	case z.own == nil || u.allowed && z.limit.CountRefused:
		return nil
	case u.allowed:
		return z.own
	}
	return z.own[z.kept():]
}

// undo queues in back the removal of the members the charge must not
// keep (dropped), its run refused; decide has already read its answer.
func (lh *logHit) undo(ctx context.Context, back *work, u undoing) {
	if drop := lh.dropped(u); len(drop) > 0 {
		back.Cmds = append(back.Cmds, zremCmd(ctx, lh.key, drop))
	}
}

// zremCmd removes members from key.
func zremCmd(ctx context.Context, key string, members []string) *redis.IntCmd {
	zrem := make([]any, 0, 2+len(members))
	zrem = append(zrem, "zrem", key)
	for _, m := range members {
		zrem = append(zrem, m)
	}
	return redis.NewIntCmd(ctx, zrem...)
}

// scores reads the instants of the newest member and of the ranked one
// (-1 where there is none, or none was asked): afterOwn's first member,
// with none of the hit's own to skip.
func scores(newest, rank *redis.ZSliceCmd) (int64, int64, error) {
	a, err := afterOwn(newest, 0, 0)
	if err != nil {
		return 0, 0, err
	}
	b, err := afterOwn(rank, 0, 0)
	return a, b, err
}

// logResult is limits.Decide's answer for a sliding log whose window holds
// total units after the hit, the newest at instant newest and the one whose
// leaving would let the hit in at rank (-1: none): the answer of the log
// the set holds, whose unit members stand for its entries.
func logResult(l limits.Limit, cost, now, total, newest, rank int64) limits.Result {
	n, t := l.Requests, l.PeriodMicros()
	need := max(cost, 1)
	var r limits.Result
	r.Allowed = cost < 0 || cost <= n && total+need <= n
	if cost > 0 && r.Allowed {
		total += cost
	}
	r.Remaining = max(0, n-total)
	if newest >= 0 {
		r.ResetAfter = micros(newest + t - now)
	}
	if !r.Allowed && cost <= n && rank >= 0 {
		r.RetryAfter = micros(rank + t - now)
	}
	return r
}

func micros(us int64) time.Duration { return time.Duration(us) * time.Microsecond }
