// Package storetest is the conformance suite of limits.Store: one table of
// cases, run against every store (the embedded one and Redis), so that all of
// them decide exactly as semantics.md says and as limits.Decide computes.
//
// The suite owns the clock. A store under test must read the clock it is
// given once per Decide call instead of its own; Run advances it between
// calls, so every case runs at fixed instants.
package storetest

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// Factory returns a new, empty store that reads its time from clock
// (microseconds since the epoch) on every Decide call. Run calls it once per
// case; the factory registers whatever cleanup the store needs with
// t.Cleanup. Keys are unique per case and per run, so stores that share a
// backend (one Redis for every case) need no flushing between cases.
type Factory func(t *testing.T, clock func() int64) limits.Store

// Start is the instant every case begins at: 2023-11-14T22:13:20Z in
// microseconds. It is a whole second, 20 s into a minute (and into a
// 30-second window) and 200 s into a 5-minute window, so the cases also
// check that windows are aligned to the epoch, not to the first hit.
const Start int64 = 1_700_000_000_000_000

// Wait sentinels for step.wait: advance the clock by the previous result's
// Reset, or by 1 µs less.
const (
	untilReset  time.Duration = -1
	beforeReset time.Duration = -2
)

// step is one hit: wait, then decide cost on key. Steps with same set are
// sent in the Decide call of the step before them.
type step struct {
	wait time.Duration
	key  string // "" means "a"
	cost int64
	// n, when set, replaces the case's N for this hit (another limit on
	// another key, in the same call).
	n    int64
	same bool
	want per
}

// per is a step's expected result for each algorithm.
type per struct{ fw, sw, tb limits.Result }

func all(r limits.Result) per { return per{r, r, r} }

func (p per) of(a limits.Algorithm) limits.Result {
	switch a {
	case limits.FixedWindow:
		return p.fw
	case limits.SlidingWindow:
		return p.sw
	}
	return p.tb
}

func ok(remaining int64, reset time.Duration) limits.Result {
	return limits.Result{Allowed: true, Remaining: remaining, Reset: reset}
}

func no(remaining int64, reset time.Duration) limits.Result {
	return limits.Result{Allowed: false, Remaining: remaining, Reset: reset}
}

type testCase struct {
	name string
	// algs restricts the case to some algorithms; nil means all three.
	algs   []limits.Algorithm
	n      int64
	period time.Duration
	burst  int64
	steps  []step
}

const (
	us = time.Microsecond
	ms = time.Millisecond
	s  = time.Second
)

var algorithms = []limits.Algorithm{limits.FixedWindow, limits.SlidingWindow, limits.TokenBucket}

// Run runs the conformance suite against the stores newStore returns, as
// one subtest per algorithm and case.
func Run(t *testing.T, newStore Factory) {
	t.Helper()
	cases := cases()
	for _, a := range algorithms {
		t.Run(a.String(), func(t *testing.T) {
			for _, c := range cases {
				if c.algs != nil && !contains(c.algs, a) {
					continue
				}
				t.Run(c.name, func(t *testing.T) {
					newHarness(t, newStore).run(a, c)
				})
			}
		})
	}
}

func contains(as []limits.Algorithm, a limits.Algorithm) bool {
	for _, b := range as {
		if a == b {
			return true
		}
	}
	return false
}

// cases is the table. The expected values are worked out by hand from
// semantics.md; each is also checked against limits.Decide.
func cases() []testCase {
	return []testCase{
		countCase(s, 0),
		countCase(30*s, 20*s),
		countCase(5*time.Minute, 200*s),
		{
			name: "peek consumes nothing", n: 3, period: time.Minute, // 20 s into the window
			steps: []step{
				{cost: 0, want: all(ok(3, 0))},
				{cost: 1, want: per{ok(2, 40*s), ok(2, 100*s), ok(2, 20*s)}},
				{cost: 0, want: per{ok(2, 40*s), ok(2, 100*s), ok(2, 20*s)}},
				{cost: 0, want: per{ok(2, 40*s), ok(2, 100*s), ok(2, 20*s)}},
				{cost: 2, want: per{ok(0, 40*s), ok(0, 100*s), ok(0, 60*s)}},
				// Refused exactly when cost 1 would be, with its wait.
				{cost: 0, want: per{no(0, 40*s), no(0, 60*s), no(0, 20*s)}},
				{cost: 1, want: per{no(0, 40*s), no(0, 60*s), no(0, 20*s)}},
				// Sliding: prev 3 weighs 2 at 20 s into the next window.
				{wait: untilReset, cost: 0, want: per{ok(3, 0), ok(1, 40*s), ok(1, 40*s)}},
				{cost: 0, want: per{ok(3, 0), ok(1, 40*s), ok(1, 40*s)}},
			},
		},
		{
			name: "cost that can never fit leaves the key untouched", n: 4, period: s,
			steps: []step{
				// Reset: the wait until the key is back at its maximum.
				{cost: 5, want: all(no(4, 0))},
				{cost: 1, want: per{ok(3, s), ok(3, 2*s), ok(3, 250*ms)}},
				{cost: 5, want: per{no(3, s), no(3, 2*s), no(3, 250*ms)}},
				{cost: 100, want: per{no(3, s), no(3, 2*s), no(3, 250*ms)}},
				{cost: 3, want: per{ok(0, s), ok(0, 2*s), ok(0, s)}},
			},
		},
		{
			name: "cost above the burst", algs: []limits.Algorithm{limits.TokenBucket},
			n: 4, period: s, burst: 6,
			steps: []step{
				{cost: 7, want: all(no(6, 0))},
				{cost: 6, want: all(ok(0, 1500*ms))},
				{wait: 500 * ms, cost: 7, want: all(no(2, s))},
				{cost: 2, want: all(ok(0, 1500*ms))},
			},
		},
		{
			name: "refund never above the maximum", n: 5, period: s,
			steps: []step{
				{cost: 1, want: per{ok(4, s), ok(4, 2*s), ok(4, 200*ms)}},
				{cost: 1, want: per{ok(3, s), ok(3, 2*s), ok(3, 400*ms)}},
				{cost: 1, want: per{ok(2, s), ok(2, 2*s), ok(2, 600*ms)}},
				{cost: -2, want: per{ok(4, s), ok(4, 2*s), ok(4, 200*ms)}},
				{cost: -10, want: all(ok(5, 0))},
				{cost: 1, want: per{ok(4, s), ok(4, 2*s), ok(4, 200*ms)}},
				{cost: 1, want: per{ok(3, s), ok(3, 2*s), ok(3, 400*ms)}},
				{cost: 1, want: per{ok(2, s), ok(2, 2*s), ok(2, 600*ms)}},
				{cost: 1, want: per{ok(1, s), ok(1, 2*s), ok(1, 800*ms)}},
				{cost: 1, want: per{ok(0, s), ok(0, 2*s), ok(0, s)}},
				{cost: 1, want: per{no(0, s), no(0, 1200*ms), no(0, 200*ms)}},
			},
		},
		{
			name: "keys are independent", n: 2, period: s,
			steps: []step{
				{cost: 1, want: per{ok(1, s), ok(1, 2*s), ok(1, 500*ms)}},
				{cost: 1, want: per{ok(0, s), ok(0, 2*s), ok(0, s)}},
				{cost: 1, want: per{no(0, s), no(0, 1500*ms), no(0, 500*ms)}},
				{key: "b", cost: 1, want: per{ok(1, s), ok(1, 2*s), ok(1, 500*ms)}},
				{key: "b", cost: 0, want: per{ok(1, s), ok(1, 2*s), ok(1, 500*ms)}},
				{key: "a", cost: 0, want: per{no(0, s), no(0, 1500*ms), no(0, 500*ms)}},
			},
		},
		{
			name: "hits in one call are decided in order", n: 2, period: s,
			steps: []step{
				{cost: 1, want: per{ok(1, s), ok(1, 2*s), ok(1, 500*ms)}},
				{same: true, key: "b", cost: 1, want: per{ok(1, s), ok(1, 2*s), ok(1, 500*ms)}},
				// The second hit on a key sees the first.
				{same: true, cost: 1, want: per{ok(0, s), ok(0, 2*s), ok(0, s)}},
				{same: true, cost: 1, want: per{no(0, s), no(0, 1500*ms), no(0, 500*ms)}},
				{same: true, cost: 0, want: per{no(0, s), no(0, 1500*ms), no(0, 500*ms)}},
				// Another limit in the same call.
				{same: true, key: "c", n: 1, cost: 1, want: per{ok(0, s), ok(0, 2*s), ok(0, s)}},
				{same: true, key: "c", n: 1, cost: 1, want: per{no(0, s), no(0, 2*s), no(0, s)}},
				// A refund and a hit in the next call.
				{cost: -1, want: per{ok(1, s), ok(1, 2*s), ok(1, 500*ms)}},
				{same: true, cost: 1, want: per{ok(0, s), ok(0, 2*s), ok(0, s)}},
			},
		},
		{
			// Start is 20 s into a minute: the boundary is 40 s later.
			name: "window boundary", n: 2, period: time.Minute,
			steps: []step{
				{wait: 40*s - us, cost: 1, want: per{ok(1, us), ok(1, time.Minute+us), ok(1, 30*s)}},
				{cost: 1, want: per{ok(0, us), ok(0, time.Minute+us), ok(0, time.Minute)}},
				{cost: 1, want: per{no(0, us), no(0, 30*s+us), no(0, 30*s)}},
				// The fixed window starts over; the sliding one counts the
				// previous window in full; the bucket ignores windows.
				{wait: us, cost: 0, want: per{ok(2, 0), no(0, 30*s), no(0, 30*s-us)}},
				{cost: 1, want: per{ok(1, time.Minute), no(0, 30*s), no(0, 30*s-us)}},
				{cost: 1, want: per{ok(0, time.Minute), no(0, 30*s), no(0, 30*s-us)}},
				{cost: 1, want: per{no(0, time.Minute), no(0, 30*s), no(0, 30*s-us)}},
			},
		},
		{
			name: "keys expire", n: 2, period: time.Minute,
			steps: []step{
				{cost: 1, want: per{ok(1, 40*s), ok(1, 100*s), ok(1, 30*s)}},
				{cost: 1, want: per{ok(0, 40*s), ok(0, 100*s), ok(0, time.Minute)}},
				{wait: 3 * time.Minute, cost: 0, want: all(ok(2, 0))},
				{cost: 2, want: per{ok(0, 40*s), ok(0, 100*s), ok(0, time.Minute)}},
			},
		},
		{
			// 10 per second: a token every 100 ms.
			name: "bucket refills after waiting", algs: []limits.Algorithm{limits.TokenBucket},
			n: 10, period: s,
			steps: append(drain(10, s), []step{
				{cost: 1, want: all(no(0, 100*ms))},
				{wait: 350 * ms, cost: 1, want: all(ok(2, 750*ms))},
				{cost: 1, want: all(ok(1, 850*ms))},
				{cost: 1, want: all(ok(0, 950*ms))},
				{cost: 1, want: all(no(0, 50*ms))},
				{wait: beforeReset, cost: 1, want: all(no(0, us))},
				{wait: us, cost: 1, want: all(ok(0, s))},
				{wait: 10 * s, cost: 0, want: all(ok(10, 0))},
			}...),
		},
		{
			// prev 8 weighs 8 × (T − e)/T.
			name: "sliding estimate decays", algs: []limits.Algorithm{limits.SlidingWindow},
			n: 10, period: s,
			steps: []step{
				{cost: 8, want: all(ok(2, 2*s))},
				{wait: 1250 * ms, cost: 0, want: all(ok(4, 750*ms))},
				{cost: 1, want: all(ok(3, 1750*ms))},
				{cost: 1, want: all(ok(2, 1750*ms))},
				{cost: 1, want: all(ok(1, 1750*ms))},
				{cost: 1, want: all(ok(0, 1750*ms))},
				{cost: 1, want: all(no(0, 125*ms))},
				{wait: beforeReset, cost: 1, want: all(no(0, us))},
				{wait: us, cost: 1, want: all(ok(0, 1625*ms))},
				{wait: 250 * ms, cost: 0, want: all(ok(2, 1375*ms))},
				// Next window, 250 ms in: the 5 hits of the last one weigh 3.75.
				{wait: 625 * ms, cost: 0, want: all(ok(6, 750*ms))},
			},
		},
	}
}

// countCase is N = 5 per period T, starting e into a window: five allowed,
// then refused until the reported Reset, not 1 µs before.
func countCase(T, e time.Duration) testCase {
	steps := make([]step, 0, 9)
	for i := range int64(5) {
		steps = append(steps, step{cost: 1, want: per{
			fw: ok(4-i, T-e),
			sw: ok(4-i, 2*T-e),
			tb: ok(4-i, time.Duration(i+1)*T/5),
		}})
	}
	// Sliding: in the next window the 5 hits weigh 5 × (T − e')/T ≤ 4 from
	// e' = T/5. Bucket: a token every T/5.
	refused := per{fw: no(0, T-e), sw: no(0, T-e+T/5), tb: no(0, T/5)}
	steps = append(steps,
		step{cost: 1, want: refused},
		step{cost: 0, want: refused},
		step{wait: beforeReset, cost: 1, want: all(no(0, us))},
		step{wait: us, cost: 1, want: per{fw: ok(4, T), sw: ok(0, 2*T-T/5), tb: ok(0, T)}},
	)
	return testCase{name: "N then refused/" + T.String(), n: 5, period: T, steps: steps}
}

// drain is n hits of cost 1 on a full bucket of n per T.
func drain(n int64, T time.Duration) []step {
	steps := make([]step, 0, n)
	for i := range n {
		steps = append(steps, step{cost: 1, want: all(ok(n-1-i, time.Duration(i+1)*T/time.Duration(n)))})
	}
	return steps
}

// harness runs one case against one new store, with a reference model of
// the store contract built on limits.Decide.
type harness struct {
	t      *testing.T
	store  limits.Store
	clock  atomic.Int64
	prefix string
	ref    map[string]refState
}

// refState is the reference model's entry: State is absent from ExpireAt on.
type refState struct {
	state    limits.State
	expireAt int64
}

// run is a counter so that every case's keys are new even when one backend
// serves several runs of the suite.
var runs atomic.Int64

func newHarness(t *testing.T, newStore Factory) *harness {
	t.Helper()
	h := &harness{
		t:      t,
		prefix: fmt.Sprintf("storetest:%d:%d:%s:", time.Now().UnixNano(), runs.Add(1), t.Name()),
		ref:    map[string]refState{},
	}
	h.clock.Store(Start)
	h.store = newStore(t, h.clock.Load)
	return h
}

func (h *harness) run(a limits.Algorithm, c testCase) {
	h.t.Helper()
	var last limits.Result
	for i := 0; i < len(c.steps); {
		j := i + 1
		for j < len(c.steps) && c.steps[j].same {
			j++
		}
		switch w := c.steps[i].wait; w {
		case untilReset:
			h.clock.Add(last.Reset.Microseconds())
		case beforeReset:
			h.clock.Add(last.Reset.Microseconds() - 1)
		default:
			h.clock.Add(w.Microseconds())
		}
		call := c.steps[i:j]
		hits := make([]limits.Hit, len(call))
		for k, st := range call {
			l := limits.Limit{Algorithm: a, Requests: c.n, Period: c.period, Burst: c.burst}
			if st.n != 0 {
				l.Requests = st.n
			}
			key := st.key
			if key == "" {
				key = "a"
			}
			hits[k] = limits.Hit{Key: h.prefix + key, Limit: l, Cost: st.cost}
		}
		results := h.decide(hits)
		for k, st := range call {
			if want := st.want.of(a); results[k] != want {
				h.t.Errorf("step %d (%s, key %s, cost %d) at start+%s:\n got  %s\n want %s",
					i+k, hits[k].Limit, strings.TrimPrefix(hits[k].Key, h.prefix), st.cost,
					time.Duration(h.clock.Load()-Start)*time.Microsecond, format(results[k]), format(want))
			}
		}
		if h.t.Failed() {
			return // the later steps would only repeat the difference
		}
		last = results[len(results)-1]
		i = j
	}
}

// decide sends hits in one Decide call and checks every result against the
// reference model: the store must answer exactly as limits.Decide does.
func (h *harness) decide(hits []limits.Hit) []limits.Result {
	h.t.Helper()
	results := make([]limits.Result, len(hits))
	for i := range results {
		// Garbage, to check that the store writes every field.
		results[i] = limits.Result{Allowed: true, Remaining: -7, Reset: -time.Hour, Err: errGarbage}
	}
	h.store.Decide(h.t.Context(), hits, results)
	now := h.clock.Load()
	for i, hit := range hits {
		if results[i].Err != nil {
			h.t.Fatalf("hit %d (%s, cost %d): store error: %v", i, hit.Limit, hit.Cost, results[i].Err)
		}
		if want := h.reference(hit, now); results[i] != want {
			h.t.Errorf("hit %d (%s, key %s, cost %d) at start+%s differs from limits.Decide:\n got  %s\n want %s",
				i, hit.Limit, strings.TrimPrefix(hit.Key, h.prefix), hit.Cost,
				time.Duration(now-Start)*time.Microsecond, format(results[i]), format(want))
		}
	}
	return results
}

var errGarbage = fmt.Errorf("storetest: result not written by the store")

func (h *harness) reference(hit limits.Hit, now int64) limits.Result {
	r := h.ref[hit.Key]
	var st limits.State
	if r.state.Live && now < r.expireAt {
		st = r.state
	}
	d := limits.Decide(hit.Limit, st, hit.Cost, now)
	if d.Changed {
		if d.State.Live && d.ExpireAt > now {
			h.ref[hit.Key] = refState{d.State, d.ExpireAt}
		} else {
			delete(h.ref, hit.Key)
		}
	}
	return d.Result
}

func format(r limits.Result) string {
	verdict := "refused"
	if r.Allowed {
		verdict = "allowed"
	}
	s := fmt.Sprintf("%s remaining=%d reset=%s", verdict, r.Remaining, r.Reset)
	if r.Err != nil {
		s += fmt.Sprintf(" err=%v", r.Err)
	}
	return s
}
