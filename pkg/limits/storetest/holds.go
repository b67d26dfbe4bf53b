package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// The hold cases check what a store does with a Hit's Hold (limits.Hold,
// docs/semantics.md "Holds"). A hold's give-back depends on the kind:
// a window limit gives the held cost back into the window of the
// reservation's instant, a sliding log takes it out of the reservation's
// own entry (what of it is still in the log: giving back newer entries
// would count less than was charged), and a bucket gives it back at the
// settle's instant. So each case runs its hits with holds on key "a" and
// the same traffic without holds on key "ref", as the rule for the kind
// says it must count (holdRef), and compares the two keys' answers: a
// store is right when a key with holds reads exactly as the plain hits
// that the rules make of them.
//
// Every case's hits carry the domain's Lease, as the service sends them.
// A lapsed hold may still count on the first call on its key that sees it
// lapsed (the Redis store gives it back after that call's answer); the
// cases read such a key twice and check the second answer.

// holdAlgorithms are the kinds whose cases are holdCases'; concurrency has
// its own (holdConcurrencyCases).
var holdAlgorithms = []limits.Algorithm{limits.FixedWindow, limits.SlidingWindow, limits.TokenBucket, limits.SlidingLog, limits.LeakyBucket}

// holdLease is the lease of the cases' holds.
const holdLease = 10 * time.Minute

// holdCase is one case of holds, run for one algorithm.
type holdCase struct {
	name string
	run  func(h *holds)
	// algs, when set, are the algorithms the case is for (a lockout is
	// not for a leaky bucket); nil: every one it is run with.
	algs []limits.Algorithm
}

// runHolds runs every hold case, for each algorithm.
func runHolds(t *testing.T, newStore Factory) {
	t.Run("holds", func(t *testing.T) {
		for _, a := range holdAlgorithms {
			t.Run(a.String(), func(t *testing.T) {
				for _, c := range append(holdCases(), holdCommonCases()...) {
					if c.algs == nil || contains(c.algs, a) {
						t.Run(c.name, func(t *testing.T) { c.run(newHolds(t, newStore, a)) })
					}
				}
			})
		}
		t.Run(limits.Concurrency.String(), func(t *testing.T) {
			for _, c := range append(holdConcurrencyCases(), holdCommonCases()...) {
				t.Run(c.name, func(t *testing.T) { c.run(newHolds(t, newStore, limits.Concurrency)) })
			}
		})
	})
}

// holds runs one hold case against one new store.
type holds struct {
	*harness
	alg   limits.Algorithm
	lease time.Duration
	// other is a second store on the same backend (HoldsAcross), which
	// an op with other set goes to.
	other limits.Store
}

func newHolds(t *testing.T, newStore Factory, a limits.Algorithm) *holds {
	return &holds{harness: newHarness(t, newStore), alg: a, lease: holdLease}
}

// op is one hit of a hold case: cost on key (default "a"), reserving
// under id, or settling it with settle.
type op struct {
	key    string
	id     string
	cost   int64
	settle bool
	// joint ties the hit to the next op of the call.
	joint bool
	// countRefused makes the hit's limit count refused hits: what a
	// settle's charge is on the reference key.
	countRefused bool
	// fixed makes the hit's limit a fixed window of n (a joint partner).
	fixed bool
	n     int64
	// lock makes the hit's limit a lockout of lock, of 2 per minute.
	lock time.Duration
	// other sends the hit to the case's other store (HoldsAcross).
	other bool
}

// limit is the cases' limit of algorithm a: 10 per minute (10 slots of a
// minute's lease), a leaky bucket with a queue of 5.
func (h *holds) limit(o op) limits.Limit {
	l := limits.Limit{Algorithm: h.alg, Requests: 10, Period: time.Minute, CountRefused: o.countRefused}
	if h.alg == limits.LeakyBucket {
		l.Burst = 5
	}
	if o.fixed {
		l = limits.Limit{Algorithm: limits.FixedWindow, Requests: o.n, Period: time.Minute}
	}
	if o.lock > 0 {
		l.Requests, l.BlockFor = 2, o.lock
	}
	return l
}

func (h *holds) hit(o op) limits.Hit {
	key := o.key
	if key == "" {
		key = "a"
	}
	return limits.Hit{
		Key: h.prefix + "{case}:" + key, Limit: h.limit(o), Cost: o.cost, Joint: o.joint,
		Hold: limits.Hold{ID: o.id, Settle: o.settle, Lease: h.lease},
	}
}

// call decides ops in one Decide call; a store error fails the case.
func (h *holds) call(ops ...op) []limits.Result {
	h.t.Helper()
	hits := make([]limits.Hit, len(ops))
	for i, o := range ops {
		hits[i] = h.hit(o)
	}
	store := h.store
	if len(ops) > 0 && ops[0].other {
		store = h.other
	}
	results := h.raw(store, hits)
	for i, r := range results {
		if r.Err != nil {
			h.t.Fatalf("at start+%s: hit %d (%s, key %s, cost %d, id %q): store error: %v",
				h.at(), i, hits[i].Limit, h.name(hits[i].Key), hits[i].Cost, hits[i].Hold.ID, r.Err)
		}
	}
	return results
}

// raw decides hits in one Decide call, every result filled with garbage
// first, to check that the store writes every field.
func (h *holds) raw(store limits.Store, hits []limits.Hit) []limits.Result {
	results := make([]limits.Result, len(hits))
	for i := range results {
		results[i] = limits.Result{Allowed: true, Remaining: -7, RetryAfter: -time.Hour, ResetAfter: -time.Hour, Delay: -time.Hour, Hold: 99, Err: errGarbage}
	}
	store.Decide(h.t.Context(), hits, results)
	return results
}

func (h *holds) do(o op) limits.Result { return h.call(o)[0] }

func (h *holds) at() time.Duration { return time.Duration(h.clock.Load()-Start) * time.Microsecond }

func (h *holds) wait(d time.Duration) { h.clock.Add(d.Microseconds()) }

// reserve is a reserve of cost under id on key a.
func (h *holds) reserve(id string, cost int64) limits.Result {
	return h.do(op{id: id, cost: cost})
}

// settle is a settle of id on key a with the actual cost.
func (h *holds) settle(id string, cost int64) limits.Result {
	return h.do(op{id: id, cost: cost, settle: true})
}

// peek is a peek at key (no id), as every hit of a holds domain, with the
// Lease.
func (h *holds) peek(key string) limits.Result { return h.do(op{key: key}) }

// want fails the case unless got is want.
func (h *holds) want(what string, got, want limits.Result) {
	h.t.Helper()
	if got != want {
		h.t.Fatalf("%s (%s) at start+%s:\n got  %s\n want %s", what, h.alg, h.at(), holdFormat(got), holdFormat(want))
	}
}

// alike fails the case unless keys a and ref read alike: a peek at each
// answers the same.
func (h *holds) alike(what string) {
	h.t.Helper()
	h.want(what+": key a reads as the reference", h.peek("a"), h.peek("ref"))
}

// alikeAfterLapse is alike after one call on key a, which may still count
// a hold that lapsed (Redis gives it back after that call).
func (h *holds) alikeAfterLapse(what string) {
	h.t.Helper()
	h.peek("a")
	h.alike(what)
}

// atReservation reports whether the algorithm gives a held cost back at
// the reservation's instant (its window, its log entry) rather than at the
// settle's.
func (h *holds) atReservation() bool {
	switch h.alg {
	case limits.FixedWindow, limits.SlidingWindow, limits.SlidingLog:
		return true
	}
	return false
}

// refReserve is what a reserve of cost makes of the reference key: for a
// kind that gives back at the reservation's instant nothing (what is given
// back there was never counted), else the plain hit. It returns the
// answer the reserve must get when it is the case's first hit: the plain
// hit's, on a fresh key.
func (h *holds) refReserve(cost int64) limits.Result {
	if h.atReservation() {
		return h.do(op{key: fmt.Sprint("fresh", h.clock.Load()), cost: cost})
	}
	return h.do(op{key: "ref", cost: cost})
}

// both is a plain hit of cost on key a and on the reference key. Where the
// reference does not count a's holds (atReservation) only their verdicts
// must agree, which the case's script relies on; else the answers.
func (h *holds) both(what string, cost int64) {
	h.t.Helper()
	got, ref := h.do(op{cost: cost}), h.do(op{key: "ref", cost: cost})
	if h.atReservation() {
		got, ref = limits.Result{Allowed: got.Allowed}, limits.Result{Allowed: ref.Allowed}
	}
	h.want(what, got, ref)
}

// refSettle is what the settle of a hold of held with cost makes of the
// reference key: the held cost given back (at the settle's instant for a
// bucket), then cost charged as a count_refused hit; it returns that
// charge's answer, as the settle's must be (with no Delay: the request
// has been served).
func (h *holds) refSettle(held, cost int64) limits.Result {
	h.refGiveBack(held)
	r := h.do(op{key: "ref", cost: cost, countRefused: true})
	r.Delay = 0
	return r
}

// refGiveBack gives held back on the reference key as a lapse does.
func (h *holds) refGiveBack(held int64) {
	if !h.atReservation() {
		h.do(op{key: "ref", cost: -held})
	}
}

// outcome is r with the hold outcome o.
func outcome(r limits.Result, o limits.HoldOutcome) limits.Result {
	r.Hold = o
	return r
}

// repeated is the answer to a reserve of an id already held, given what a
// peek reads: allowed, charging nothing.
func repeated(peek limits.Result) limits.Result {
	return limits.Result{Allowed: true, Remaining: peek.Remaining, ResetAfter: peek.ResetAfter, Hold: limits.HoldRepeated}
}

// held fails the case unless key a's live holds are cost in n holds
// (limits.HoldReader).
func (h *holds) held(what string, cost, n int64) {
	h.t.Helper()
	h.heldIn(h.store, what, cost, n)
}

// heldIn is held, read from store.
func (h *holds) heldIn(store limits.Store, what string, cost, n int64) {
	h.t.Helper()
	c, k, err := limits.Held(h.t.Context(), store, h.hit(op{}))
	if err != nil {
		h.t.Fatalf("%s: Held: %v", what, err)
	}
	if c != cost || k != n {
		h.t.Fatalf("%s (%s) at start+%s: Held = %d in %d holds, want %d in %d", what, h.alg, h.at(), c, k, cost, n)
	}
}

func holdFormat(r limits.Result) string {
	s := format(r)
	if r.Locked {
		s += " locked"
	}
	return s + fmt.Sprintf(" hold=%s", r.Hold)
}
