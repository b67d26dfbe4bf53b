package storetest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// holdCommonCases run on every algorithm, concurrency included.
func holdCommonCases() []holdCase {
	return []holdCase{{"a hold that fails CheckHold is an error and keeps nothing", badHoldCase, nil}}
}

// badHoldCase: a hit whose Hold fails limits.CheckHold gets an Err, keeps
// nothing, and leaves the other hits of its call decided.
func badHoldCase(h *holds) {
	bad := []limits.Hold{
		{ID: strings.Repeat("x", limits.MaxHoldID+1), Lease: h.lease},
		{ID: "r1"},
		{ID: "r1", Lease: -time.Second},
		{ID: "r1", Settle: true, Lease: limits.MaxLease + time.Second},
	}
	for _, hold := range bad {
		hits := []limits.Hit{h.hit(op{cost: 1}), h.hit(op{key: "b", cost: 1})}
		hits[0].Hold = hold
		rs := h.raw(h.store, hits)
		if rs[0].Err == nil || rs[0].Err == errGarbage {
			h.t.Fatalf("hold %+v: %s, want an error", hold, holdFormat(rs[0]))
		}
		if rs[1].Err != nil || !rs[1].Allowed {
			h.t.Fatalf("hold %+v: the next hit of the call: %s, want it decided", hold, holdFormat(rs[1]))
		}
	}
	h.alike("bad holds keep nothing")
	h.held("after bad holds", 0, 0)
}

// holdConcurrencyCases are a concurrency limit's: 10 slots of a minute's
// lease.
func holdConcurrencyCases() []holdCase {
	return []holdCase{
		{"reserve takes slots under the id, settle frees exactly those", slotsCase, nil},
		{"refused reserves and their settles free no slot", slotsRegression(false), nil},
		{"refused reserves and their settles free no slot, count_refused", slotsRegression(true), nil},
		{"a lapsed hold frees its slots", slotsLapseCase, nil},
		{"a refused joint run holds no slot", slotsJointCase, nil},
	}
}

// slotsJointCase: a reserve run of a concurrency limit and a fixed window
// of 1 (b) holds its slots only if b allows; a run of settles frees them.
func slotsJointCase(h *holds) {
	h.do(op{key: "b", fixed: true, n: 1, cost: 1})
	for _, c := range []struct {
		partner string
		want    limits.HoldOutcome
		left    int64
	}{{"b", limits.HoldRefused, 10}, {"b2", limits.HoldReserved, 8}} {
		id := fmt.Sprint("r-", c.partner)
		rs := h.call(op{id: id, cost: 2, joint: true}, op{key: c.partner, fixed: true, n: 1, id: id, cost: 1})
		if rs[0].Hold != c.want || rs[1].Hold != c.want {
			h.t.Fatalf("run with %s: %s; %s, want both %s", c.partner, holdFormat(rs[0]), holdFormat(rs[1]), c.want)
		}
		if r := h.peek("a"); r.Remaining != c.left {
			h.t.Fatalf("after the run with %s: %s, want %d slots free", c.partner, holdFormat(r), c.left)
		}
	}
	if r := h.settle("r-b", 1); r.Hold != limits.HoldUnheld || r.Remaining != 8 {
		h.t.Fatalf("settle of the refused run's id: %s, want unheld, nothing freed", holdFormat(r))
	}
	rs := h.call(op{id: "r-b2", settle: true, joint: true}, op{key: "b2", fixed: true, n: 1, id: "r-b2", settle: true})
	if rs[0].Hold != limits.HoldSettled || rs[1].Hold != limits.HoldSettled || rs[0].Remaining != 10 || rs[1].Remaining != 1 {
		h.t.Fatalf("run of settles: %s; %s, want both settled, all free", holdFormat(rs[0]), holdFormat(rs[1]))
	}
}

// slotsCase: a reserve's slots are held under its id; its settle frees
// them and no other, whatever its cost; a settle with no hold frees
// nothing; a release without an id frees the oldest, as before holds.
func slotsCase(h *holds) {
	h.want("reserve of 3", h.reserve("r1", 3), outcome(ok(7, time.Minute), limits.HoldReserved))
	h.want("repeated reserve", h.reserve("r1", 3), outcome(ok(7, time.Minute), limits.HoldRepeated))
	h.wait(time.Second)
	h.want("plain hit of 2", h.do(op{cost: 2}), ok(5, time.Minute))
	h.held("after the reserve", 3, 1)
	h.wait(time.Second)
	// The plain hit's 2 slots are left, until start + 61 s.
	left := ok(8, 59*time.Second)
	h.want("settle of r1", h.settle("r1", 3), outcome(left, limits.HoldSettled))
	h.held("after the settle", 0, 0)
	h.want("second settle of r1", h.settle("r1", -1), outcome(left, limits.HoldUnheld))
	h.want("settle of an id never reserved", h.settle("x", 1), outcome(left, limits.HoldUnheld))
	h.want("peek", h.peek("a"), left)
	h.want("release without an id", h.do(op{cost: -1}), ok(9, 59*time.Second))
}

// slotsRegression is the defect of issue #34: 10 slots held by running
// requests, 30 reserves refused, then the settles of those 30 (Envoy sends
// one when every request ends, refused or not): the 10 slots stay held
// and an 11th reserve is refused.
func slotsRegression(countRefused bool) func(h *holds) {
	return func(h *holds) {
		run := func(id string, cost int64, settle bool) limits.Result {
			return h.do(op{id: id, cost: cost, settle: settle, countRefused: countRefused})
		}
		for i := range 10 {
			if r := run(fmt.Sprint("r", i), 1, false); !r.Allowed || r.Hold != limits.HoldReserved {
				h.t.Fatalf("reserve %d: %s, want reserved", i, holdFormat(r))
			}
		}
		for i := range 30 {
			if r := run(fmt.Sprint("x", i), 1, false); r.Allowed || r.Hold != limits.HoldRefused {
				h.t.Fatalf("reserve x%d: %s, want refused", i, holdFormat(r))
			}
		}
		h.wait(time.Second)
		for i := range 30 {
			if r := run(fmt.Sprint("x", i), 1, true); !r.Allowed || r.Hold != limits.HoldUnheld || r.Remaining != 0 {
				h.t.Fatalf("settle of x%d: %s, want unheld, no slot freed", i, holdFormat(r))
			}
		}
		h.held("after the refused settles", 10, 10)
		if r := run("r10", 1, false); r.Allowed || r.Hold != limits.HoldRefused {
			h.t.Fatalf("an 11th reserve: %s, want refused", holdFormat(r))
		}
		if r := run("r0", 1, true); !r.Allowed || r.Hold != limits.HoldSettled || r.Remaining != 1 {
			h.t.Fatalf("settle of r0: %s, want settled, one slot free", holdFormat(r))
		}
		if r := run("r10", 1, false); !r.Allowed || r.Hold != limits.HoldReserved {
			h.t.Fatalf("reserve after a settle: %s, want reserved", holdFormat(r))
		}
		h.held("at the end", 10, 10)
	}
}

// slotsLapseCase: a hold's slots expire at the earlier of the limit's
// lease (a minute) and the hold's (10 s).
func slotsLapseCase(h *holds) {
	h.lease = 10 * time.Second
	h.want("reserve of 2", h.reserve("r1", 2), outcome(ok(8, 10*time.Second), limits.HoldReserved))
	h.wait(10*time.Second - time.Microsecond)
	h.want("before the lease's end", h.peek("a"), ok(8, time.Microsecond))
	h.held("before the lease's end", 2, 1)
	h.wait(time.Microsecond)
	h.peek("a")
	h.want("at the lease's end", h.peek("a"), ok(10, 0))
	h.held("at the lease's end", 0, 0)
	h.want("settle after the lapse", h.settle("r1", 1), outcome(ok(10, 0), limits.HoldUnheld))
}

// Pair returns two stores on one backend (two instances of the service
// sharing one Redis) that read their time from clock; for a store that
// has no backend to share, the same store twice.
type Pair func(t *testing.T, clock func() int64) (a, b limits.Store)

// HoldsAcross checks that a hold made through one store is seen through
// the other: repeated there, read by Held, settled there, and then no
// longer held through the first. A store's test runs it with two
// instances on one backend (Redis), or with one store twice.
func HoldsAcross(t *testing.T, newPair Pair) {
	t.Helper()
	for _, a := range []limits.Algorithm{limits.FixedWindow, limits.SlidingLog, limits.TokenBucket, limits.Concurrency} {
		t.Run(a.String(), func(t *testing.T) {
			var other limits.Store
			h := newHolds(t, func(t *testing.T, clock func() int64) limits.Store {
				first, second := newPair(t, clock)
				other = second
				return first
			}, a)
			h.other = other
			holdsAcross(h)
		})
	}
}

// holdsAcross is HoldsAcross for one algorithm: 10 per minute (slots).
func holdsAcross(h *holds) {
	if r := h.reserve("r1", 3); r.Hold != limits.HoldReserved {
		h.t.Fatalf("reserve on the first store: %s", holdFormat(r))
	}
	if r := h.do(op{id: "r1", cost: 3, other: true}); r.Hold != limits.HoldRepeated || !r.Allowed {
		h.t.Fatalf("the same reserve on the second store: %s, want repeated", holdFormat(r))
	}
	h.heldIn(h.other, "read through the second store", 3, 1)
	h.wait(time.Second)
	if r := h.do(op{id: "r1", cost: 1, settle: true, other: true}); r.Hold != limits.HoldSettled {
		h.t.Fatalf("settle on the second store: %s, want settled", holdFormat(r))
	}
	if r := h.settle("r1", 1); r.Hold != limits.HoldUnheld {
		h.t.Fatalf("settle again on the first store: %s, want unheld", holdFormat(r))
	}
	h.held("after the settles", 0, 0)
	want := int64(8) // 1 settled, 1 plain
	if h.alg == limits.Concurrency {
		want = 10 // the settle freed the slots, the second freed none
	}
	if r := h.peek("a"); r.Remaining != want {
		h.t.Fatalf("after the settles: %s, want remaining %d", holdFormat(r), want)
	}
}
