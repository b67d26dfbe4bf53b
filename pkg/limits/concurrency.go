package limits

import (
	"context"
	"fmt"
	"sort"
)

// A concurrency limit counts requests in flight, not hits per period:
// Requests is the number of slots, Period the lease. A hit of cost c > 0
// takes c slots if that many are free, each held until the hit's instant
// plus the lease; a negative hit (Envoy's is_negative_hits, sent from
// apply_on_stream_done when the request ends) gives |c| slots back; a slot
// that is not given back frees itself when its lease ends, so that a lost
// release leaks a slot for at most the lease.
//
// A release names no slot: it frees the oldest live ones. One that arrives
// after its own slot expired therefore frees another request's slot early,
// which is the caveat the README states.
//
// The state is State.Log, one entry per instant slots expire at: At is
// that instant (µs), Cost how many slots expire then; entries are in order
// of At, and Count is the sum of their costs. It never holds more
// than MaxSlots slots' entries, so a decision is at most that many steps.

// SlotsHeld returns the live entries of a concurrency state at now (their
// At after now), oldest first, and the slots they hold: what explain shows.
func SlotsHeld(s State, now int64) ([]LogEntry, int64) {
	if !s.Live {
		return nil, 0
	}
	held := s.Count
	drop := 0
	for drop < len(s.Log) && s.Log[drop].At <= now {
		held -= s.Log[drop].Cost
		drop++
	}
	return s.Log[drop:], held
}

// concurrency decides a hit on a concurrency limit. A peek changes
// nothing, nor does a refused hit unless the limit counts refused hits:
// then a refused hit takes its slots all the same (up to 2N held), so that
// the release Envoy sends when a refused request ends gives back a slot it
// took rather than another request's.
func concurrency(l Limit, s State, cost, now, _ int64) Decision {
	n, lease := l.Requests, l.PeriodMicros()
	slots, held := SlotsHeld(s, now)
	need := max(cost, 1)
	d := Decision{}
	switch {
	case cost < 0:
		slots, held = releaseSlots(slots, held, -cost)
		d.Result.Allowed = true
		d.Changed = true
	case cost > n:
		// Can never fit: refused, key untouched.
	case held+need <= n:
		d.Result.Allowed = true
		if cost > 0 {
			slots = acquireSlots(slots, LogEntry{At: now + lease, Cost: cost})
			held += cost
			d.Changed = true
		}
	}
	if charged(l, d.Result.Allowed, cost) {
		if take := min(cost, 2*n-held); take > 0 {
			slots = acquireSlots(slots, LogEntry{At: now + lease, Cost: take})
			held += take
			d.Changed = true
		}
	}
	d.Result.Remaining = max(0, n-held)
	if len(slots) > 0 {
		d.Result.ResetAfter = micros(slots[len(slots)-1].At - now)
	}
	if !d.Result.Allowed && cost <= n {
		// The oldest slots expire first: wait until enough of them have.
		if at := letsIn(slots, held, need, n); at >= 0 {
			d.Result.RetryAfter = micros(at - now)
		}
	}
	if d.Changed {
		d.State = State{Live: len(slots) > 0, Count: held, Log: slots}
		if len(slots) > 0 {
			d.ExpireAt = slots[len(slots)-1].At
		}
	}
	return d
}

// acquireSlots returns a new array of slots with e in its place by At (at
// the end, unless a clock stepped back): the caller's state is left as it
// was, since a store may keep it after a refusal elsewhere in a joint run.
func acquireSlots(slots []LogEntry, e LogEntry) []LogEntry {
	at := sort.Search(len(slots), func(i int) bool { return slots[i].At > e.At })
	if at > 0 && slots[at-1].At == e.At {
		// Slots of one instant share their entry.
		out := append([]LogEntry(nil), slots...)
		out[at-1].Cost += e.Cost
		return out
	}
	out := make([]LogEntry, 0, len(slots)+1)
	out = append(out, slots[:at]...)
	out = append(out, e)
	return append(out, slots[at:]...)
}

// releaseSlots gives back up to r slots, the oldest first, in a new array.
func releaseSlots(slots []LogEntry, held, r int64) ([]LogEntry, int64) {
	drop := 0
	for drop < len(slots) && r >= slots[drop].Cost {
		r -= slots[drop].Cost
		held -= slots[drop].Cost
		drop++
	}
	out := append([]LogEntry(nil), slots[drop:]...)
	if len(out) > 0 && r > 0 {
		out[0].Cost -= r
		held -= r
	}
	return out, held
}

// SlotReader is a Store that can list the slots a concurrency key holds:
// what explain shows. Every store implements it, and every layer of a
// store stack passes it on to the store it wraps.
type SlotReader interface {
	// Slots returns the live slots of h's key for its limit, oldest
	// first, each as the instant it expires (µs since the epoch) and how
	// many slots expire then, and the instant (µs) the store read them at.
	Slots(ctx context.Context, h Hit) (slots []LogEntry, now int64, err error)
}

// Slots reads h's slots from s, which must be a SlotReader.
func Slots(ctx context.Context, s Store, h Hit) ([]LogEntry, int64, error) {
	r, ok := s.(SlotReader)
	if !ok {
		return nil, 0, fmt.Errorf("store %T cannot list slots", s)
	}
	return r.Slots(ctx, h)
}
