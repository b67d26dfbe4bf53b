package memory

import (
	"context"
	"math"
	"strings"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

var _ limits.HoldReader = (*Store)(nil)

// Holds (limits.Hold) are exact here: a key's holds live beside its entry,
// in its shard's holds map by entry index (entry.held marks the entries
// that have some, so that a key without holds pays nothing for them).
// Their lapses are applied under the shard's lock before any decision
// reads the key, and by the janitor for keys nobody decides: an entry
// with holds is due (its expireAt, the heap's order) at the earlier of
// its state's expiry and its next lapse, and load and sweep call due.
// Each hold weighs as much as a key against MaxKeys (holdWeight), so the
// bound stays one of memory; evicting a key forgets its holds with its
// state, and their settles are then plain hits.

// holdWeight is what one hold counts against MaxKeys, in keys: a hold
// (its id, its reservation and its map slot) takes a little over half a
// key's memory (BenchmarkMemoryPerHold: about 150 bytes with a UUID for
// id, where BenchmarkMemoryPerKey's key takes 250); counting it as a
// whole key keeps the bound one of memory with room to spare.
const holdWeight = 1

// keyHolds are one key's live holds.
type keyHolds struct {
	ids map[string]limits.Reservation
	// cost is the sum of ids' costs.
	cost int64
	// next is an instant no hold of ids lapses before: the earliest
	// Until when it was last worked out (a settle leaves it early, and
	// the due that finds nothing lapsed then works it out again).
	next int64
	// stateExpire is the state's own expiry (0: none live), which the
	// entry's expireAt no longer says while the key has holds.
	stateExpire int64
	// limit is the limit of the key's latest hit with a hold: what the
	// janitor gives lapsed costs back with, when no hit brings one.
	limit limits.Limit
}

// due brings entry i, which has holds, up to now: its state forgotten if
// it expired, its lapsed holds given back. It reports whether the entry is
// still there (it is removed once it holds neither state nor holds).
func (sh *shard) due(i int32, now int64) bool {
	e, kh := &sh.entries[i], sh.holds[i]
	if now >= kh.stateExpire {
		e.state, kh.stateExpire = limits.State{}, 0
	}
	if now >= kh.next {
		kh.next = math.MaxInt64
		for id, r := range kh.ids {
			if !r.Lapsed(now) {
				kh.next = min(kh.next, r.Until)
				continue
			}
			sh.keepState(kh, e, limits.GiveBack(kh.limit, e.state, r, now), now)
			delete(kh.ids, id)
			kh.cost -= r.Cost
		}
	}
	return sh.refresh(i, now)
}

// keepState keeps decision d's state in entry e, whose holds are kh.
func (sh *shard) keepState(kh *keyHolds, e *entry, d limits.Decision, now int64) {
	if !d.Changed {
		return
	}
	e.state, kh.stateExpire = limits.State{}, 0
	if d.State.Live && d.ExpireAt > now {
		e.state, kh.stateExpire = d.State, d.ExpireAt
	}
}

// refresh sets entry i's expireAt and weight from its state and holds
// after they changed, and reports whether it is still there: an entry left
// with no holds is a plain one again, removed if its state is not live.
func (sh *shard) refresh(i int32, now int64) bool {
	e, kh := &sh.entries[i], sh.holds[i]
	if len(kh.ids) == 0 {
		delete(sh.holds, i)
		e.held = false
		if !e.state.Live || kh.stateExpire <= now {
			sh.remove(i)
			return false
		}
		sh.setExpiry(i, kh.stateExpire)
	} else {
		at := kh.next
		if e.state.Live {
			at = min(at, kh.stateExpire)
		}
		sh.setExpiry(i, at)
	}
	sh.setWeight(i, weight(e.state)+holdWeight*len(kh.ids))
	return true
}

func (sh *shard) setExpiry(i int32, at int64) {
	if e := &sh.entries[i]; e.expireAt != at {
		e.expireAt = at
		sh.heapFix(e.heapAt)
	}
}

// setWeight sets entry i's weight to w.
func (sh *shard) setWeight(i int32, w int) {
	e := &sh.entries[i]
	sh.used += w - int(e.weight)
	if e.list >= protected {
		sh.protectedUsed += w - int(e.weight)
	}
	e.weight = int32(w)
}

// applyHeld is apply for entry i, which has holds: the entry stays while
// they do, whatever its state.
func (sh *shard) applyHeld(i int32, d limits.Decision, lvl int32, now int64) {
	e, kh := &sh.entries[i], sh.holds[i]
	sh.keepState(kh, e, d, now)
	if d.Changed && sh.refresh(i, now) {
		sh.promote(i, lvl)
		sh.makeRoom(0, i, now)
		return
	}
	sh.promote(i, lvl)
}

// holdStep is what a hit with an id does to its key's holds once its
// decision is kept.
type holdStep struct {
	outcome limits.HoldOutcome
	// add holds r under the id (a reserve); drop ends the id's hold.
	add, drop bool
	r         limits.Reservation
}

// plan decides hit h, which has an id, on state s of entry i (0: none) at
// now: the decision, and what it does to the key's holds if kept.
func (sh *shard) plan(h *limits.Hit, s limits.State, i int32, now int64) (limits.Decision, holdStep) {
	r, held := sh.reservation(i, h.Hold.ID)
	switch {
	case h.Reserves() && held:
		return limits.Decision{Result: limits.Repeated(h.Limit, s, now)}, holdStep{outcome: limits.HoldRepeated}
	case h.Reserves():
		d := limits.DecideWithin(limits.ReserveLimit(h.Limit, h.Hold.Lease), s, h.Cost, now, h.MaxDelayMicros())
		if !d.Result.Allowed {
			return d, holdStep{outcome: limits.HoldRefused}
		}
		return d, holdStep{outcome: limits.HoldReserved, add: true, r: limits.NewReservation(h.Limit, h.Cost, now, h.Hold.Lease)}
	case h.Settles() && held:
		return limits.Settle(h.Limit, s, r, h.Cost, now), holdStep{outcome: limits.HoldSettled, drop: true}
	case h.Settles():
		return limits.Unheld(h.Limit, s, h.Cost, now, h.MaxDelayMicros()), holdStep{outcome: limits.HoldUnheld}
	}
	// A peek or a refund with an id: as without one.
	return limits.DecideWithin(h.Limit, s, h.Cost, now, h.MaxDelayMicros()), holdStep{}
}

// reservation is the live hold of id under entry i.
func (sh *shard) reservation(i int32, id string) (limits.Reservation, bool) {
	if i == 0 || !sh.entries[i].held {
		return limits.Reservation{}, false
	}
	r, ok := sh.holds[i].ids[id]
	return r, ok
}

// commit makes step's change to key's holds, once its decision is kept
// (and the entry stored, if the decision made one).
func (sh *shard) commit(key string, h *limits.Hit, st holdStep, now int64) {
	if !st.add && !st.drop {
		return
	}
	i, ok := sh.index[key]
	if !ok {
		if !st.add {
			return
		}
		// A reserve whose state is not kept (a cost that leaves nothing to
		// count) still holds its id: a state-less entry.
		i = sh.insertEmpty(key, now)
	}
	kh := sh.holdsOf(i)
	kh.limit = h.Limit
	if r, ok := kh.ids[h.Hold.ID]; ok && st.drop {
		delete(kh.ids, h.Hold.ID)
		kh.cost -= r.Cost
	}
	if st.add {
		kh.ids[strings.Clone(h.Hold.ID)] = st.r
		kh.cost += st.r.Cost
		kh.next = min(kh.next, st.r.Until)
	}
	if sh.refresh(i, now) && st.add {
		sh.makeRoom(0, i, now)
	}
}

// holdsOf returns entry i's holds, making it an entry with holds if it
// has none yet.
func (sh *shard) holdsOf(i int32) *keyHolds {
	e := &sh.entries[i]
	if e.held {
		return sh.holds[i]
	}
	if sh.holds == nil {
		sh.holds = map[int32]*keyHolds{}
	}
	kh := &keyHolds{ids: map[string]limits.Reservation{}, next: math.MaxInt64}
	if e.state.Live {
		kh.stateExpire = e.expireAt
	}
	sh.holds[i], e.held = kh, true
	return kh
}

// insertEmpty adds key with no state, for a hold to live under.
func (sh *shard) insertEmpty(key string, now int64) int32 {
	sh.insert(key, limits.State{}, math.MaxInt64, 0, now)
	return sh.index[key]
}

// decideHold decides a hit with a Hold: an error if the Hold fails
// limits.CheckHold, as any hit without an id, with its hold otherwise.
func (s *Store) decideHold(h *limits.Hit, now int64) limits.Result {
	if err := limits.CheckHold(h.Hold); err != nil {
		return limits.Result{Err: err}
	}
	sh := &s.shards[s.shardIndex(h)]
	if h.Hold.ID == "" {
		return sh.decide(h, now)
	}
	return sh.decideHold(h, now)
}

// decideInRun decides hit h of a joint run on its key's state at now; the
// run keeps the decision or not.
func (sh *shard) decideInRun(h *limits.Hit, now int64) (limits.Decision, holdStep) {
	state, i := sh.load(h.Key, now)
	if h.Hold.ID != "" {
		return sh.plan(h, state, i, now)
	}
	return limits.DecideWithin(h.Limit, state, h.Cost, now, h.MaxDelayMicros()), holdStep{}
}

// decideHold is decide for a hit with an id.
func (sh *shard) decideHold(h *limits.Hit, now int64) limits.Result {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	state, i := sh.load(h.Key, now)
	d, st := sh.plan(h, state, i, now)
	sh.apply(h.Key, i, d, level(h.Limit, &d.Result), now)
	sh.commit(h.Key, h, st, now)
	d.Result.Hold = st.outcome
	return d.Result
}

// Held returns the cost and number of the live holds of h's key.
func (s *Store) Held(_ context.Context, h limits.Hit) (cost, holds int64, err error) {
	now := s.now()
	sh := &s.shards[s.shardIndex(&h)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if _, i := sh.load(h.Key, now); i != 0 && sh.entries[i].held {
		kh := sh.holds[i]
		return kh.cost, int64(len(kh.ids)), nil
	}
	return 0, 0, nil
}
