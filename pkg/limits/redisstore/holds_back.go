package redisstore

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// What a hold sends after the answer (holds.go): the give-back of held
// costs, the records of refused reserves deleted, lapsed ones taken. A
// record's GETDEL decides who gives its cost back: the one caller whose
// GETDEL returned it, so that a cost is given back once, however many
// calls find it lapsed.

// sweep queues in back the GETDEL of every lapsed hold the pipeline
// found (but the hit's own id, which its own commands take), and after
// it the give-back of those whose record it took.
func (hh *holdHit) sweep(ctx context.Context, back *work) error {
	ids, err := hh.lapsed.Result()
	if err != nil || len(ids) == 0 {
		return err
	}
	recs := make([]*redis.StringCmd, len(ids))
	for j, id := range ids {
		if id == hh.id && hh.role != holdOnly {
			continue
		}
		recs[j] = redis.NewStringCmd(ctx, "getdel", holdKey(hh.key, id))
		back.Cmds = append(back.Cmds, recs[j], redis.NewIntCmd(ctx, "zrem", hh.setKey, id))
	}
	back.Then = append(back.Then, func(ctx context.Context) {
		wk := &work{}
		for j, rec := range recs {
			if rec == nil {
				continue
			}
			old, found, err := recordOf(rec)
			switch {
			case err != nil || !found || old.pending:
				// A pending one's reserve was refused, or lost its
				// confirmation: nothing known to give back (stricter).
			case old.until <= hh.now:
				hh.giveBack(ctx, wk, ids[j], old)
			default: // reserved again since the scan: put back
				hh.put(ctx, wk, ids[j], old)
			}
		}
		hh.s.sendThen(ctx, wk)
	})
	return nil
}

// sendThen sends wk, work after the answer that follows other such work.
func (s *Store) sendThen(ctx context.Context, wk *work) {
	if len(wk.Cmds) > 0 {
		s.pipes.Send(ctx, wk)
	}
}

// takeOver queues in back, for a reserve that found its id's record
// lapsed, the GETDEL of that record (whose cost the caller gives back if
// its GETDEL returned it), then the reserve's own record if its run is
// allowed.
func (hh *holdHit) takeOver(ctx context.Context, back *work, old holdRecord, allowed bool) {
	rec := redis.NewStringCmd(ctx, "getdel", hh.recKey)
	back.Cmds = append(back.Cmds, rec)
	back.Then = append(back.Then, func(ctx context.Context) {
		wk := &work{}
		if got, found, err := recordOf(rec); err == nil && found && got == old && !old.pending {
			hh.giveBack(ctx, wk, hh.id, old)
		}
		if allowed && !hh.undone {
			hh.put(ctx, wk, hh.id, hh.mine)
		}
		hh.s.sendThen(ctx, wk)
	})
}

// confirmed asks for the confirmation of an admitted reserve's record,
// sent if its run is allowed (refundLater), and checks it after: a
// record gone (a settle took it while pending, as a plain hit) leaves
// the reserve's cost for the reserve to give back.
func (hh *holdHit) confirmed(back *work) {
	hh.confirmWanted = true
	back.Then = append(back.Then, func(ctx context.Context) {
		if hh.undone {
			return
		}
		got, found, err := recordOf(hh.confirm)
		if err != nil || found && got.pending && got.cost == hh.mine.cost && got.at == hh.mine.at {
			return
		}
		wk := &work{}
		hh.giveBack(ctx, wk, hh.id, hh.mine)
		hh.s.sendThen(ctx, wk)
	})
}

// unrecord queues in back the GETDEL of the record a refused reserve
// wrote (pending: no settle gave its cost back). A record of another
// reserve of the id found in its place (the id reserved again
// meanwhile) is put back.
func (hh *holdHit) unrecord(ctx context.Context, back *work) {
	rec := redis.NewStringCmd(ctx, "getdel", hh.recKey)
	back.Cmds = append(back.Cmds, rec, redis.NewIntCmd(ctx, "zrem", hh.setKey, hh.id))
	back.Then = append(back.Then, func(ctx context.Context) {
		got, found, err := recordOf(rec)
		if err != nil || !found || got.pending {
			return
		}
		wk := &work{}
		hh.put(ctx, wk, hh.id, got)
		hh.s.sendThen(ctx, wk)
	})
}

// put queues in wk the record of id's hold rec, and its entry among the
// key's holds.
func (hh *holdHit) put(ctx context.Context, wk *work, id string, rec holdRecord) {
	ttl := holdTTL(hh.limit, rec.at, rec.until-rec.at)
	wk.Cmds = append(wk.Cmds,
		redis.NewStatusCmd(ctx, "set", holdKey(hh.key, id), rec.String(), "px", ttl, "nx"),
		redis.NewIntCmd(ctx, "zadd", hh.setKey, rec.until, id),
		redis.NewIntCmd(ctx, "pexpire", hh.setKey, ttl))
}

// giveBack queues in wk the give-back of hold rec's cost: a refund into
// the window of its instant for a window (none once that window no
// longer counts), at the hit's instant otherwise (none for a log whose
// window rec's charge has left). A concurrency hold's slots are freed by
// their names instead, and expire on their own.
func (hh *holdHit) giveBack(ctx context.Context, wk *work, id string, rec holdRecord) {
	l := algorithmOnly(hh.limit)
	switch {
	case hh.slots || l.Blocks() || rec.cost <= 0:
	case l.Algorithm == limits.SlidingLog:
		// Its members of rec's instant, named by the id: what of them is
		// still in the log.
		wk.Cmds = append(wk.Cmds, zremCmd(ctx, hh.key, holdMembers(id, 0, min(rec.cost, 2*l.Requests))))
	case isWindow(l.Algorithm):
		if windowEnd(l, rec.at) > hh.now {
			hh.s.queueHit(ctx, wk, hh.key, l, -rec.cost, rec.at)
		}
	default:
		if give, _, ok := hh.bucketGive(rec); ok {
			if give > 0 {
				bh := hh.inner().(*bucketHit)
				wk.Cmds = append(wk.Cmds,
					redis.NewIntSliceCmd(ctx, "bitfield", hh.key, "overflow", "sat", "incrby", "u63", 0, -give, "incrby", "u63", "#1", 0),
					redis.NewIntCmd(ctx, "pexpire", hh.key, max(bh.ttl, ttlMillis(limits.Interval(l)*l.Capacity()/1000)), "nx"))
			}
			return
		}
		hh.s.queueHit(ctx, wk, hh.key, l, -rec.cost, hh.now)
	}
}

// queueHit queues in wk the commands of a hit of cost on key under l at
// instant at, whose replies nobody reads: a refund, or for a positive
// cost a count_refused charge (kept whether it fits or not). A window
// counter it creates gets its TTL whatever the store has seen.
func (s *Store) queueHit(ctx context.Context, wk *work, key string, l limits.Limit, cost, at int64) {
	h := limits.Hit{Key: key, Limit: l, Cost: cost}
	if cost > 0 {
		h.Limit.CountRefused = true
	}
	p := s.newPending(ctx, 0, &h, at, coldPrevs, wk, false)
	if wh, ok := p.(*windowHit); ok && wh.expire == nil && wh.op != nil {
		wk.Cmds = append(wk.Cmds, wh.expireCmd(ctx))
	}
}

// inner is the kind's hit under the hold, its lock taken off.
func (hh *holdHit) inner() pending {
	if lk, ok := hh.pending.(*lockedHit); ok {
		return lk.pending
	}
	return hh.pending
}

// bucketGive is, for a bucket hit, what giving back rec's cost takes off
// its TAT (ns): the part of it still ahead of the hit's instant in the
// state the hit found, so that given back after the hit's own charge it
// leaves what a refund before it would have (GCRA's clamp is not undone
// by a subtraction); ok false for another kind.
func (hh *holdHit) bucketGive(rec holdRecord) (give, tat int64, ok bool) {
	bh, ok := hh.inner().(*bucketHit)
	if !ok {
		return 0, 0, false
	}
	state, now, _, err := bh.state()
	if err != nil {
		return 0, 0, false
	}
	tat = max(state.TAT, now*1000)
	return min(rec.cost*limits.Interval(bh.limit), max(0, tat-now*1000)), tat, true
}

// stateRead is the state the kind's hit found before its own charge, as
// package limits keeps it: a window's counts, a bucket's TAT; ok false
// for a kind whose state the hit did not read whole (a log's members, a
// concurrency limit's slots).
func (hh *holdHit) stateRead() (limits.State, bool) {
	switch in := hh.inner().(type) {
	case *windowHit:
		return limits.State{Live: in.before > 0 || in.prevBefore > 0, Window: in.w, Count: in.before, Prev: in.prevBefore}, true
	case *bucketHit:
		state, now, _, err := in.state()
		if err != nil {
			return limits.State{}, false
		}
		tat := max(state.TAT, now*1000)
		return limits.State{Live: tat > hh.now*1000, TAT: tat}, true
	}
	return limits.State{}, false
}

// settledAnswer is the answer of a settle of rec, limits.Settle's on the
// state the hit found; ok false where the store cannot tell it exactly
// (stateRead).
func (hh *holdHit) settledAnswer(rec holdRecord) (limits.Result, bool) {
	st, ok := hh.stateRead()
	if !ok {
		return limits.Result{}, false
	}
	res := limits.Reservation{Cost: rec.cost, At: rec.at, Until: rec.until}
	return limits.Settle(hh.limit, st, res, hh.cost, hh.now).Result, true
}
