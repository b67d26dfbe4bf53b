package redisstore

import (
	"context"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/envoy-rls/envoy-rls/internal/redispipe"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// A concurrency hit on its own is decided with native commands on a sorted
// set that holds one member per slot held, scored by the instant its lease
// ends in microseconds, named uniquely as a sliding log's members are
// (logMembers). The slots held are the members scored after now, so a hit
// is
//
//   - an acquire of c slots: ZREMRANGEBYSCORE of the expired (at or before
//     now), ZADD of its c members at now + lease, ZCARD and PEXPIRE (the
//     lease, a second at least) in the call's pipeline; it fits if the
//     count, its own members included, is at most N; the same pipeline
//     reads the members around the newest and the one whose expiry would
//     let it in (aroundOwn, log.go), which a refusal's answer needs; one
//     whose run is refused removes its members again (ZREM, exact whatever
//     happened meanwhile), after the answer;
//   - a peek, or an acquire that can never fit, reads the count and those
//     two members (ZCOUNT, ZRANGE … REV LIMIT);
//   - a release of c slots removes the expired, pops the c oldest members
//     (ZPOPMIN: a release names no slot) and reads the count and the
//     newest member that stays.
//
// The key's TTL is the lease from the newest acquire, so it lives until
// the newest slot's expiry. Between a refused acquire's ZADD and its ZREM
// its members are counted: a concurrent acquire may be refused where it
// would have fitted, never allowed where it would not, so that no instant
// ever sees more than N slots held by allowed hits. With count_refused a
// refused acquire keeps as many of its members as 2N held leaves room for,
// so that the release of a refused request gives back a slot it took.
// The results are those
// of limits.Decide on the slots the set holds (the equivalence tests check
// it).

// concHit is one concurrency hit on its own: its slots are members whose
// scores are their expiries.
type concHit struct {
	zsetHit
	// pipes send the release an undo must make again (regive); the
	// pipes, not a method value of the store, which would allocate a
	// closure for every hit.
	pipes *redispipe.Pipes
	// named is set on a hold's acquire, whose slots its id names
	// (holdconc.go): a settle of the id may remove them before the undo,
	// and no release is then to be made again (regive).
	named bool
}

// newConcHit queues in wk the commands of hit h at now.
func newConcHit(ctx context.Context, i int, h *limits.Hit, now int64, members *logMembers, pipes *redispipe.Pipes, wk *work, refundLater bool) *concHit {
	l := h.Limit
	ch := &concHit{zsetHit: zsetHit{i: i, limit: l, cost: h.Cost, now: now, key: h.Key}, pipes: pipes}
	n, lease := l.Requests, l.PeriodMicros()
	expired := redis.NewIntCmd(ctx, "zremrangebyscore", h.Key, "-inf", now)
	switch {
	case h.Cost < 0 && refundLater:
		ch.popped = -h.Cost
		ch.refund = []redis.Cmder{expired, redis.NewZSliceCmd(ctx, "zpopmin", h.Key, ch.popped)}
		ch.read(ctx, wk, ch.now, 0, -1)
	case h.Cost < 0:
		ch.count = redis.NewIntCmd(ctx, "zcard", h.Key)
		ch.newest = newestCmd(ctx, h.Key, "("+strconv.FormatInt(now, 10), 0)
		wk.Cmds = append(wk.Cmds, ch.writes.keep(expired), ch.writes.keep(redis.NewZSliceCmd(ctx, "zpopmin", h.Key, -h.Cost)), ch.count, ch.newest)
	case h.Cost == 0:
		ch.read(ctx, wk, ch.now, 0, n-1)
	case h.Cost > n && !l.CountRefused:
		ch.read(ctx, wk, ch.now, 0, -1)
	default:
		ch.acquire(ctx, wk, expired, members.take(min(h.Cost, 2*n)), now+lease, false)
	}
	return ch
}

// acquire queues the commands of an acquire whose slots are own, held
// until until: expired (the lapsed slots' removal), then addOwn's.
func (ch *concHit) acquire(ctx context.Context, wk *work, expired *redis.IntCmd, own []string, until int64, nx bool) {
	ch.addOwn(ctx, wk, expired, own, until, logTTL(ch.limit.PeriodMicros()), nx, "("+strconv.FormatInt(ch.now, 10))
}

// decide decides the hit from its commands' replies; a concurrency hit
// never asks to go again.
func (ch *concHit) decide(context.Context, *work) (limits.Result, int64, error) {
	res, err := ch.decideSlots()
	return res, 0, err
}

// decideSlots is decide.
func (ch *concHit) decideSlots() (limits.Result, error) {
	count, err := ch.counted()
	if err != nil {
		return limits.Result{}, err
	}
	n := ch.limit.Requests
	if ch.own == nil {
		newest, rank, err := scores(ch.newest, ch.rank)
		if err != nil {
			return limits.Result{}, err
		}
		return concResult(ch.limit, ch.cost, ch.now, max(0, count-ch.popped), newest, rank), nil
	}
	ch.before = count - int64(len(ch.own))
	if ch.cost <= n && ch.before+ch.cost <= n {
		// Allowed: the hit's members are the newest.
		return limits.Result{Allowed: true, Remaining: max(0, n-count), ResetAfter: micros(ch.limit.PeriodMicros())}, nil
	}
	keep := ch.kept()
	newest, rank, err := ch.refusedAround(ch.now+ch.limit.PeriodMicros(), keep)
	if err != nil {
		return limits.Result{}, err
	}
	r := concResult(ch.limit, ch.cost, ch.now, ch.before+keep, newest, rank)
	r.Allowed = false
	return r, nil
}

// undo queues in back the removal of the members the acquire must not
// keep (dropped), its run refused. Once back has run, the releases the
// removal found done already are made again (regive).
func (ch *concHit) undo(ctx context.Context, back *work, u undoing) {
	if drop := ch.dropped(u); len(drop) > 0 {
		zrem := zremCmd(ctx, ch.key, drop)
		back.Cmds = append(back.Cmds, zrem)
		if !ch.named {
			back.Then = append(back.Then, func(ctx context.Context) { ch.regive(ctx, zrem, int64(len(drop))) })
		}
	}
}

// concResult is limits.Decide's answer for a concurrency limit whose live
// slots number held after the hit, the newest expiring at newest and the
// one whose expiry would let the hit in at rank (-1: none). It answers the
// hits that added nothing: a release (already applied), a peek, a refused
// acquire, whose members are gone.
func concResult(l limits.Limit, cost, now, held, newest, rank int64) limits.Result {
	n := l.Requests
	var r limits.Result
	r.Allowed = cost < 0 || cost <= n && held+max(cost, 1) <= n
	r.Remaining = max(0, n-held)
	if newest >= 0 && held > 0 {
		r.ResetAfter = micros(newest - now)
	}
	if !r.Allowed && cost <= n && rank >= 0 {
		r.RetryAfter = micros(rank - now)
	}
	return r
}

// regive makes again the releases that took members of this hit before
// its undo could (a release pops the oldest members, and a refused
// acquire's may be older than a slot held, its instant earlier): the ZREM
// of dropped members removed fewer, so as many slots held were not given
// back. It pops that many oldest live members, in one more round trip
// after the answer; until then the slots count as held (stricter, never
// looser), and if that round trip fails they stay held until their lease
// ends.
func (ch *concHit) regive(ctx context.Context, zrem *redis.IntCmd, dropped int64) {
	if zrem.Err() != nil || zrem.Val() >= dropped {
		return
	}
	lost := dropped - zrem.Val()
	wk := &work{Cmds: []redis.Cmder{
		redis.NewIntCmd(ctx, "zremrangebyscore", ch.key, "-inf", ch.now),
		redis.NewZSliceCmd(ctx, "zpopmin", ch.key, lost),
	}}
	ch.pipes.Send(ctx, wk)
}

var _ limits.SlotReader = (*Store)(nil)

// Slots lists the live slots of h's concurrency key: its members scored
// after the store's instant, grouped by their expiry.
func (s *Store) Slots(ctx context.Context, h limits.Hit) ([]limits.LogEntry, int64, error) {
	now, err := s.asked(ctx)
	if err != nil {
		return nil, 0, err
	}
	cmd := redis.NewZSliceCmd(ctx, "zrange", h.Key, "("+strconv.FormatInt(now, 10), "+inf", "byscore", "withscores")
	wk := &work{Cmds: []redis.Cmder{cmd}, Decisions: 1}
	s.send(ctx, wk)
	if err := firstErr(wk.Err, cmd.Err()); err != nil {
		return nil, 0, storeError("concurrency", err)
	}
	var slots []limits.LogEntry
	for _, z := range cmd.Val() {
		at := int64(z.Score)
		if n := len(slots); n > 0 && slots[n-1].At == at {
			slots[n-1].Cost++
			continue
		}
		slots = append(slots, limits.LogEntry{At: at, Cost: 1})
	}
	return slots, now, nil
}
