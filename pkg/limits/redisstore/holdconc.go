package redisstore

import (
	"context"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/envoy-rls/envoy-rls/internal/redispipe"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// A hold on a concurrency limit (holds.go) takes its slots as members
// named by its id, so that its settle frees exactly those: a release
// without an id pops the oldest slots, whoever holds them, and a settle
// of a refused reserve must free none.

// slotsAtOnce is how many of a hold's slots its settle removes in the
// pipeline; a hold of more has the others removed after the answer
// (counted until then: stricter).
const slotsAtOnce = 4

// holdSlots names the slots from..to-1 of hold id. The '@' keeps them
// apart from the members logMembers names.
func holdMembers(id string, from, to int64) []string {
	out := make([]string, 0, to-from)
	for j := from; j < to; j++ {
		out = append(out, "@"+strconv.FormatInt(j, 36)+":"+id)
	}
	return out
}

// newHoldSlots queues in wk the acquire of hold h's slots at now, held
// until the earlier of now + the period and the lease's end. A refused
// reserve keeps none of them, count_refused or not.
func newHoldSlots(ctx context.Context, i int, h *limits.Hit, now int64, pipes *redispipe.Pipes, wk *work) *concHit {
	l := algorithmOnly(h.Limit)
	l.CountRefused = false
	ch := &concHit{zsetHit: zsetHit{i: i, limit: l, cost: h.Cost, now: now, key: h.Key}, pipes: pipes, named: true}
	if h.Cost > l.Requests {
		ch.read(ctx, wk, ch.now, 0, -1)
		return ch
	}
	expired := redis.NewIntCmd(ctx, "zremrangebyscore", h.Key, "-inf", now)
	until := now + min(l.PeriodMicros(), h.Hold.Lease.Microseconds())
	ch.acquire(ctx, wk, expired, holdMembers(h.Hold.ID, 0, h.Cost), until, true)
	return ch
}

// newHoldLog queues in wk the charge of reserve h, decided with
// limits.ReserveLimit, on a sliding log: its members named by the id, so
// that its settle or lapse takes them out, and no newer ones.
func newHoldLog(ctx context.Context, i int, h *limits.Hit, now int64, wk *work) *logHit {
	l := algorithmOnly(h.Limit)
	lh := &logHit{zsetHit{i: i, limit: l, cost: h.Cost, now: now, key: h.Key}}
	if h.Cost > l.Requests {
		lh.read(ctx, wk, now-l.PeriodMicros(), 0, -1)
		return lh
	}
	lh.charge(ctx, wk, holdMembers(h.Hold.ID, 0, h.Cost), true)
	return lh
}

// slotsRelease is a settle on a concurrency limit: the ZREM of the
// first slots the id may hold, and the count of live slots after it.
type slotsRelease struct {
	n, now int64
	zrem   *redis.IntCmd
	count  *redis.IntCmd
	newest *redis.ZSliceCmd
}

// newSlotsRelease queues in wk the release of the slots of h's id.
func newSlotsRelease(ctx context.Context, h *limits.Hit, now int64, wk *work) *slotsRelease {
	sr := &slotsRelease{n: h.Limit.Requests, now: now}
	sr.zrem = zremCmd(ctx, h.Key, holdMembers(h.Hold.ID, 0, min(h.Limit.Requests, slotsAtOnce)))
	sr.count = redis.NewIntCmd(ctx, "zcount", h.Key, "("+strconv.FormatInt(now, 10), "+inf")
	sr.newest = newestCmd(ctx, h.Key, "("+strconv.FormatInt(now, 10), 0)
	wk.Cmds = append(wk.Cmds, sr.zrem, sr.count, sr.newest)
	return sr
}

// decide answers a settle on a concurrency limit: allowed, charging
// nothing.
func (sr *slotsRelease) decide(context.Context, *work) (limits.Result, int64, error) {
	if err := sr.zrem.Err(); err != nil {
		return limits.Result{}, 0, err
	}
	count, err := sr.count.Result()
	if err != nil {
		return limits.Result{}, 0, err
	}
	newest, _, err := scores(sr.newest, nil)
	if err != nil {
		return limits.Result{}, 0, err
	}
	return concResult(limits.Limit{Requests: sr.n}, -1, sr.now, count, newest, -1), 0, nil
}

// heldUntil sets on r, the answer of a reserve whose members are named
// by its id (isNamed), when all is free again, from the newest member the
// pipeline read: an allowed acquire's slots may expire before the
// period's end (a hold's lease), and a repeat's members are the first
// reserve's, not the instant's (decideSlots and decideLog take the hit's
// own as the newest).
func (hh *holdHit) heldUntil(r limits.Result) limits.Result {
	var z *zsetHit
	switch in := hh.inner().(type) {
	case *concHit:
		z = &in.zsetHit
	case *logHit:
		z = &in.zsetHit
	}
	if z == nil || z.top == nil || !r.Allowed {
		return r
	}
	if top := z.top.Val(); len(top) > 0 {
		end := int64(top[0].Score)
		if !hh.slots {
			end += hh.limit.PeriodMicros()
		}
		r.ResetAfter = micros(end - hh.now)
	}
	return r
}

func (*slotsRelease) undo(context.Context, *work, undoing) {}
func (*slotsRelease) refundLater() []redis.Cmder           { return nil }

// freeRest queues in back the removal of a settled hold's slots beyond
// those its pipeline removed.
func (hh *holdHit) freeRest(ctx context.Context, back *work, cost int64) {
	if from := min(hh.limit.Requests, slotsAtOnce); cost > from {
		back.Cmds = append(back.Cmds, zremCmd(ctx, hh.key, holdMembers(hh.id, from, cost)))
	}
}

var _ limits.HoldReader = (*Store)(nil)

// Held reads the live holds of h's key (limits.HoldReader): the ids whose
// lease has not ended, then their records, in a second round trip. A
// record gone meanwhile (settled) is not counted.
func (s *Store) Held(ctx context.Context, h limits.Hit) (cost, holds int64, err error) {
	now, err := s.asked(ctx)
	if err != nil {
		return 0, 0, err
	}
	ids := redis.NewStringSliceCmd(ctx, "zrange", holdsKey(h.Key), "("+strconv.FormatInt(now, 10), "+inf", "byscore")
	wk := &work{Cmds: []redis.Cmder{ids}, Decisions: 1}
	s.send(ctx, wk)
	if err := firstErr(wk.Err, ids.Err()); err != nil {
		return 0, 0, storeError("holds", err)
	}
	if len(ids.Val()) == 0 {
		return 0, 0, nil
	}
	wk = &work{Decisions: 1}
	for _, id := range ids.Val() {
		wk.Cmds = append(wk.Cmds, redis.NewStringCmd(ctx, "get", holdKey(h.Key, id)))
	}
	s.send(ctx, wk)
	if wk.Err != nil {
		return 0, 0, storeError("holds", wk.Err)
	}
	for _, c := range wk.Cmds {
		rec, found, err := recordOf(c.(*redis.StringCmd))
		if err != nil {
			return 0, 0, storeError("holds", err)
		}
		if found && rec.until > now {
			cost, holds = cost+rec.cost, holds+1
		}
	}
	return cost, holds, nil
}

// holdKeys lists the keys of the holds of the hits of domains with holds
// (Hold.Lease set): each key's records, from its index, and the index;
// none, and no round trip, for hits without.
func (s *Store) holdKeys(ctx context.Context, hits []limits.Hit) ([]string, error) {
	wk := &work{Decisions: 1}
	var of []string // the hit key of each command
	for _, h := range hits {
		if h.Hold.Lease > 0 {
			wk.Cmds = append(wk.Cmds, redis.NewStringSliceCmd(ctx, "zrange", holdsKey(h.Key), 0, -1))
			of = append(of, h.Key)
		}
	}
	if len(wk.Cmds) == 0 {
		return nil, nil
	}
	s.send(ctx, wk)
	if wk.Err != nil {
		return nil, storeError("reset", wk.Err)
	}
	var keys []string
	for j, c := range wk.Cmds {
		ids, err := c.(*redis.StringSliceCmd).Result()
		if err != nil {
			return nil, storeError("reset", err)
		}
		key := of[j]
		keys = append(keys, holdsKey(key))
		for _, id := range ids {
			keys = append(keys, holdKey(key, id))
		}
	}
	return keys, nil
}
