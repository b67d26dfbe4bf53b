package storetest

import (
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// holdCases are the cases of the algorithms that count (holdAlgorithms).
func holdCases() []holdCase {
	return []holdCase{
		{"reserve admitted, repeated, refused", reserveCase, nil},
		{"settle replaces the held cost", settleCase, nil},
		{"settle above the estimate is charged whether it fits", settleOverCase, nil},
		{"settle in the next window gives back into the reservation's", settleNextWindowCase, nil},
		{"settle after the reservation's window has passed", settleLongAfterCase, nil},
		{"settle without a hold is a plain hit", unheldCase, nil},
		{"a lapsed hold gives its cost back", lapseCase, nil},
		{"a settle after the lapse is a plain hit", settleAfterLapseCase, nil},
		{"joint run holds all or none", jointHoldCase, nil},
		{"a lockout's lock stays through a settle", lockoutHoldCase, counting},
	}
}

// lockoutHoldCase: 2 per minute, locked an hour from a refusal. A reserve
// refused by the lock holds nothing; a settle gives back and charges the
// algorithm's state, and leaves the lock as it is.
func lockoutHoldCase(h *holds) {
	locked := lockedFor(time.Hour)
	if r := h.do(op{id: "r1", cost: 2, lock: time.Hour}); !r.Allowed || r.Hold != limits.HoldReserved {
		h.t.Fatalf("reserve of the whole limit: %s", holdFormat(r))
	}
	h.want("plain hit", h.do(op{cost: 1, lock: time.Hour}), locked)
	h.want("reserve while locked", h.do(op{id: "r2", cost: 1, lock: time.Hour}), outcome(locked, limits.HoldRefused))
	h.held("while locked", 2, 1)
	if r := h.do(op{id: "r1", cost: 1, settle: true, lock: time.Hour}); !r.Allowed || r.Remaining != 1 || r.Locked || r.Hold != limits.HoldSettled {
		h.t.Fatalf("settle of 1 for 2 while locked: %s, want allowed, 1 left, settled", holdFormat(r))
	}
	h.want("peek after the settle", h.do(op{lock: time.Hour}), locked)
	h.held("after the settle", 0, 0)
}

// reserveCase: a reserve is decided as a plain hit and held; its repeat
// charges nothing and is allowed, answering what a peek reads; a reserve
// that does not fit holds nothing, so its settle is a plain hit.
func reserveCase(h *holds) {
	ref := h.do(op{key: "ref", cost: 6})
	h.want("reserve of 6", h.reserve("r1", 6), outcome(ref, limits.HoldReserved))
	h.alike("a reserve counts its cost")
	h.held("after the reserve", 6, 1)
	for range 2 {
		// A leaky bucket is full after 6 (a peek refused): the repeat is
		// allowed all the same.
		h.want("repeated reserve", h.reserve("r1", 6), repeated(h.peek("ref")))
		h.alike("a repeated reserve charges nothing")
	}
	h.held("after the repeats", 6, 1)
	ref = h.do(op{key: "ref", cost: 5})
	if ref.Allowed {
		h.t.Fatalf("the case needs a refusal: %s", holdFormat(ref))
	}
	h.want("reserve of 5 that does not fit", h.reserve("r2", 5), outcome(ref, limits.HoldRefused))
	h.alike("a refused reserve charges nothing")
	h.held("after the refusal", 6, 1)
	ref = h.do(op{key: "ref", cost: 1})
	h.want("settle of the refused id", h.settle("r2", 1), outcome(ref, limits.HoldUnheld))
	h.alike("a refused reserve's settle is a plain hit")
	h.wait(time.Second)
	h.want("reserve of r1, a second later", h.reserve("r1", 6), repeated(h.peek("ref")))
	h.alike("a repeated reserve charges nothing, later too")
}

// settleCase: a settle gives the held cost back and charges its own, in
// one window: the count changes by cost − held.
func settleCase(h *holds) {
	h.want("reserve of 6", h.reserve("r1", 6), outcome(h.refReserve(6), limits.HoldReserved))
	h.both("plain hit of 3", 3)
	h.wait(5 * time.Second)
	h.want("settle of 2", h.settle("r1", 2), outcome(h.refSettle(6, 2), limits.HoldSettled))
	h.alike("a settle replaces the held cost")
	h.held("after the settle", 0, 0)
	if h.alg == limits.FixedWindow {
		// 6 + 3, then 2 for 6: 5 counted.
		if r := h.peek("a"); r.Remaining != 5 {
			h.t.Fatalf("fixed window after a settle: remaining %d, want 5", r.Remaining)
		}
	}
	h.want("second settle of r1", h.settle("r1", 2), outcome(h.do(op{key: "ref", cost: 2}), limits.HoldUnheld))
	h.alike("a second settle is a plain hit")
}

// settleOverCase: an actual cost above the estimate is charged at the
// settle, whether it fits or not (as a count_refused hit, down to a
// period's worth of debt), and the answer says whether it fitted.
func settleOverCase(h *holds) {
	h.want("reserve of 4", h.reserve("r1", 4), outcome(h.refReserve(4), limits.HoldReserved))
	h.both("plain hit of 6", 6)
	h.wait(5 * time.Second)
	ref := h.refSettle(4, 8)
	if ref.Allowed {
		h.t.Fatalf("the case needs a charge that does not fit: %s", holdFormat(ref))
	}
	h.want("settle of 8", h.settle("r1", 8), outcome(ref, limits.HoldSettled))
	h.alike("a settle above the estimate is charged")
}

// settleNextWindowCase: reserved 20 s into a minute, settled 10 s into the
// next: a window gives the held cost back to the reservation's window, not
// to the settle's.
func settleNextWindowCase(h *holds) {
	h.want("reserve of 6", h.reserve("r1", 6), outcome(h.refReserve(6), limits.HoldReserved))
	h.both("plain hit of 3", 3)
	h.wait(50 * time.Second)
	h.both("plain hit of 1", 1)
	h.want("settle of 2", h.settle("r1", 2), outcome(h.refSettle(6, 2), limits.HoldSettled))
	h.alike("the settle's window counts the settle, the reservation's loses the hold")
	if h.alg == limits.FixedWindow {
		if r := h.peek("a"); r.Remaining != 7 {
			h.t.Fatalf("fixed window: remaining %d, want 7 (1 + 2 in this window)", r.Remaining)
		}
	}
	h.wait(time.Minute)
	h.alike("a minute later")
}

// settleLongAfterCase: settled two minutes after the reservation, whose
// window (log entry) has gone: nothing is given back there, and the hits
// since the reservation keep their count.
func settleLongAfterCase(h *holds) {
	h.want("reserve of 6", h.reserve("r1", 6), outcome(h.refReserve(6), limits.HoldReserved))
	h.wait(90 * time.Second)
	h.both("plain hit of 3", 3)
	h.wait(30 * time.Second)
	h.want("settle of 2", h.settle("r1", 2), outcome(h.refSettle(6, 2), limits.HoldSettled))
	h.alike("a settle after the reservation's window")
	if h.alg == limits.SlidingLog {
		// The hold's entry has left the log: giving back the newest
		// entries instead would leave 8.
		if r := h.peek("a"); r.Remaining != 5 {
			h.t.Fatalf("sliding log: remaining %d after hits of 3 and 2 in the last minute, want 5", r.Remaining)
		}
	}
}

// unheldCase: a settle of an id never reserved is a plain hit, all or
// nothing.
func unheldCase(h *holds) {
	h.want("settle of 3", h.settle("x", 3), outcome(h.do(op{key: "ref", cost: 3}), limits.HoldUnheld))
	h.alike("an unheld settle charges its cost")
	ref := h.do(op{key: "ref", cost: 20})
	h.want("settle of 20", h.settle("y", 20), outcome(ref, limits.HoldUnheld))
	h.alike("an unheld settle that does not fit charges nothing")
	h.want("settle of 0", h.settle("z", 0), outcome(h.peek("ref"), limits.HoldUnheld))
	h.held("after unheld settles", 0, 0)
}

// lapseCase: a hold of a 10 s lease, not settled, gives its cost back at
// the lease's end and is no longer held.
func lapseCase(h *holds) {
	h.lease = 10 * time.Second
	h.want("reserve of 6", h.reserve("r1", 6), outcome(h.refReserve(6), limits.HoldReserved))
	h.both("plain hit of 2", 2)
	h.wait(10*time.Second - time.Microsecond)
	h.held("before the lease's end", 6, 1)
	if !h.atReservation() {
		h.alike("before the lease's end")
	}
	h.wait(time.Microsecond)
	h.refGiveBack(6)
	h.alikeAfterLapse("at the lease's end")
	h.held("at the lease's end", 0, 0)
	h.want("settle after the lapse", h.settle("r1", 2), outcome(h.do(op{key: "ref", cost: 2}), limits.HoldUnheld))
	h.alike("a settle after the lapse is a plain hit")
}

// settleAfterLapseCase: the first call after the lapse is the id's settle,
// a plain hit; the lapsed cost is given back all the same.
func settleAfterLapseCase(h *holds) {
	h.lease = 10 * time.Second
	h.want("reserve of 6", h.reserve("r1", 6), outcome(h.refReserve(6), limits.HoldReserved))
	h.wait(20 * time.Second)
	h.refGiveBack(6)
	r := h.settle("r1", 3)
	if !r.Allowed || r.Hold != limits.HoldUnheld {
		h.t.Fatalf("settle after the lapse: %s, want allowed, unheld", holdFormat(r))
	}
	h.do(op{key: "ref", cost: 3})
	h.alikeAfterLapse("a settle after the lapse")
	h.held("after the settle", 0, 0)
}

// jointHoldCase: a reserve run of a and b (a fixed window of 2): when b
// refuses, the run holds nothing anywhere; when both allow, both hold, and
// a run of settles settles both.
func jointHoldCase(h *holds) {
	b := op{key: "b", fixed: true, n: 2}
	plainB := b
	plainB.cost = 1
	h.call(plainB)
	bRes := b
	bRes.id, bRes.cost = "r1", 2
	rs := h.call(op{id: "r1", cost: 2, joint: true}, bRes)
	if rs[0].Hold != limits.HoldRefused || rs[1].Hold != limits.HoldRefused || rs[1].Allowed {
		h.t.Fatalf("refused run: %s; %s, want both held nothing", holdFormat(rs[0]), holdFormat(rs[1]))
	}
	h.alike("a refused run holds nothing")
	h.held("after the refused run", 0, 0)
	h.want("settle of r1", h.settle("r1", 0), outcome(h.peek("ref"), limits.HoldUnheld))
	bRes.id, bRes.cost = "r2", 1
	rs = h.call(op{id: "r2", cost: 1, joint: true}, bRes)
	if rs[0].Hold != limits.HoldReserved || rs[1].Hold != limits.HoldReserved {
		h.t.Fatalf("allowed run: %s; %s, want both held", holdFormat(rs[0]), holdFormat(rs[1]))
	}
	h.refReserve(1)
	h.held("after the allowed run", 1, 1)
	bRes.settle, bRes.cost = true, 0
	rs = h.call(op{id: "r2", settle: true, joint: true}, bRes)
	if rs[0].Hold != limits.HoldSettled || rs[1].Hold != limits.HoldSettled {
		h.t.Fatalf("settle run: %s; %s, want both settled", holdFormat(rs[0]), holdFormat(rs[1]))
	}
	h.refSettle(1, 0)
	h.alike("a settled run")
	if r := h.do(b); r.Remaining != 1 {
		h.t.Fatalf("b after its hold's settle: %s, want remaining 1", holdFormat(r))
	}
}
