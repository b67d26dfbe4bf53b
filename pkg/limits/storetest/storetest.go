package storetest

import (
	"errors"
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
// RetryAfter (a refusal's), or by 1 µs less.
const (
	untilRetry  time.Duration = -1
	beforeRetry time.Duration = -2
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
	// joint ties this hit to the next step, which must have same set: the
	// two are one atomic run (Hit.Joint).
	joint bool
	// maxDelay is the hit's Hit.MaxDelay.
	maxDelay time.Duration
	// with, when set, changes this hit's limit (another algorithm, or
	// count_refused, for one member of a joint run).
	with func(*limits.Limit)
	want per
	// err, when set, is the error the hit must fail with (errors.Is); want
	// is then ignored.
	err error
	// reset, instead of a hit, resets the key (limits.Resetter) with the
	// step's limit; the step must be alone in its call.
	reset bool
}

// per is a step's expected result for each algorithm.
type per struct{ fw, sw, tb, sl, lb limits.Result }

func all(r limits.Result) per { return per{fw: r, sw: r, tb: r, sl: r, lb: r} }

func (p per) of(a limits.Algorithm) limits.Result {
	switch a {
	case limits.FixedWindow:
		return p.fw
	case limits.SlidingWindow:
		return p.sw
	case limits.SlidingLog:
		return p.sl
	case limits.LeakyBucket:
		return p.lb
	}
	return p.tb
}

// ok is an allowed hit: remaining after it, and the wait until the key is
// back at its maximum.
func ok(remaining int64, reset time.Duration) limits.Result {
	return limits.Result{Allowed: true, Remaining: remaining, ResetAfter: reset}
}

// no is a refused hit: remaining, the wait until the same hit would be
// allowed (zero for one that can never fit), and the wait until the key is
// back at its maximum.
func no(remaining int64, retry, reset time.Duration) limits.Result {
	return limits.Result{Allowed: false, Remaining: remaining, RetryAfter: retry, ResetAfter: reset}
}

// later is an allowed leaky bucket hit that waits delay for its turn.
func later(remaining int64, reset, delay time.Duration) limits.Result {
	return limits.Result{Allowed: true, Remaining: remaining, ResetAfter: reset, Delay: delay}
}

type testCase struct {
	name string
	// algs restricts the case to some algorithms; nil means those that
	// count N per period (all but the leaky bucket, which shapes).
	algs   []limits.Algorithm
	n      int64
	period time.Duration
	burst  int64
	// countRefused sets the case's limits' CountRefused.
	countRefused bool
	steps        []step
}

const (
	us = time.Microsecond
	ms = time.Millisecond
	s  = time.Second
)

var (
	algorithms = []limits.Algorithm{limits.FixedWindow, limits.SlidingWindow, limits.TokenBucket, limits.SlidingLog, limits.LeakyBucket}
	counting   = []limits.Algorithm{limits.FixedWindow, limits.SlidingWindow, limits.TokenBucket, limits.SlidingLog}
	leaky      = []limits.Algorithm{limits.LeakyBucket}
)

// Run runs the conformance suite against the stores newStore returns, as
// one subtest per algorithm and case.
func Run(t *testing.T, newStore Factory) {
	t.Helper()
	cases := append(cases(), lockoutCases()...)
	for _, a := range algorithms {
		t.Run(a.String(), func(t *testing.T) {
			for _, c := range cases {
				algs := c.algs
				if algs == nil {
					algs = counting
				}
				if !contains(algs, a) {
					continue
				}
				t.Run(c.name, func(t *testing.T) {
					newHarness(t, newStore).run(a, c)
				})
			}
		})
	}
	runConcurrency(t, newStore)
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
// docs/semantics.md; each is also checked against limits.DecideWithin.
func cases() []testCase {
	return []testCase{
		countCase(s, 0),
		countCase(30*s, 20*s),
		countCase(5*time.Minute, 200*s),
		{
			name: "peek consumes nothing", n: 3, period: time.Minute, // 20 s into the window
			steps: []step{
				{cost: 0, want: all(ok(3, 0))},
				{cost: 1, want: per{fw: ok(2, 40*s), sw: ok(2, 100*s), tb: ok(2, 20*s), sl: ok(2, time.Minute)}},
				{cost: 0, want: per{fw: ok(2, 40*s), sw: ok(2, 100*s), tb: ok(2, 20*s), sl: ok(2, time.Minute)}},
				{cost: 0, want: per{fw: ok(2, 40*s), sw: ok(2, 100*s), tb: ok(2, 20*s), sl: ok(2, time.Minute)}},
				{cost: 2, want: per{fw: ok(0, 40*s), sw: ok(0, 100*s), tb: ok(0, 60*s), sl: ok(0, time.Minute)}},
				// Refused exactly when cost 1 would be, with its wait.
				{cost: 0, want: per{fw: no(0, 40*s, 40*s), sw: no(0, 60*s, 100*s), tb: no(0, 20*s, 60*s), sl: no(0, time.Minute, time.Minute)}},
				{cost: 1, want: per{fw: no(0, 40*s, 40*s), sw: no(0, 60*s, 100*s), tb: no(0, 20*s, 60*s), sl: no(0, time.Minute, time.Minute)}},
				// Sliding: prev 3 weighs 2 at 20 s into the next window.
				{wait: untilRetry, cost: 0, want: per{fw: ok(3, 0), sw: ok(1, 40*s), tb: ok(1, 40*s), sl: ok(3, 0)}},
				{cost: 0, want: per{fw: ok(3, 0), sw: ok(1, 40*s), tb: ok(1, 40*s), sl: ok(3, 0)}},
			},
		},
		{
			name: "cost that can never fit leaves the key untouched", n: 4, period: s,
			steps: []step{
				// No wait makes it fit: no RetryAfter; ResetAfter is the wait
				// until the key is back at its maximum.
				{cost: 5, want: all(no(4, 0, 0))},
				{cost: 1, want: per{fw: ok(3, s), sw: ok(3, 2*s), tb: ok(3, 250*ms), sl: ok(3, s)}},
				{cost: 5, want: per{fw: no(3, 0, s), sw: no(3, 0, 2*s), tb: no(3, 0, 250*ms), sl: no(3, 0, s)}},
				{cost: 100, want: per{fw: no(3, 0, s), sw: no(3, 0, 2*s), tb: no(3, 0, 250*ms), sl: no(3, 0, s)}},
				{cost: 3, want: per{fw: ok(0, s), sw: ok(0, 2*s), tb: ok(0, s), sl: ok(0, s)}},
			},
		},
		{
			name: "cost above the burst", algs: []limits.Algorithm{limits.TokenBucket},
			n: 4, period: s, burst: 6,
			steps: []step{
				{cost: 7, want: all(no(6, 0, 0))},
				{cost: 6, want: all(ok(0, 1500*ms))},
				{wait: 500 * ms, cost: 7, want: all(no(2, 0, s))},
				{cost: 2, want: all(ok(0, 1500*ms))},
			},
		},
		{
			name: "refund never above the maximum", n: 5, period: s,
			steps: []step{
				{cost: 1, want: per{fw: ok(4, s), sw: ok(4, 2*s), tb: ok(4, 200*ms), sl: ok(4, s)}},
				{cost: 1, want: per{fw: ok(3, s), sw: ok(3, 2*s), tb: ok(3, 400*ms), sl: ok(3, s)}},
				{cost: 1, want: per{fw: ok(2, s), sw: ok(2, 2*s), tb: ok(2, 600*ms), sl: ok(2, s)}},
				{cost: -2, want: per{fw: ok(4, s), sw: ok(4, 2*s), tb: ok(4, 200*ms), sl: ok(4, s)}},
				{cost: -10, want: all(ok(5, 0))},
				{cost: 1, want: per{fw: ok(4, s), sw: ok(4, 2*s), tb: ok(4, 200*ms), sl: ok(4, s)}},
				{cost: 1, want: per{fw: ok(3, s), sw: ok(3, 2*s), tb: ok(3, 400*ms), sl: ok(3, s)}},
				{cost: 1, want: per{fw: ok(2, s), sw: ok(2, 2*s), tb: ok(2, 600*ms), sl: ok(2, s)}},
				{cost: 1, want: per{fw: ok(1, s), sw: ok(1, 2*s), tb: ok(1, 800*ms), sl: ok(1, s)}},
				{cost: 1, want: per{fw: ok(0, s), sw: ok(0, 2*s), tb: ok(0, s), sl: ok(0, s)}},
				{cost: 1, want: per{fw: no(0, s, s), sw: no(0, 1200*ms, 2*s), tb: no(0, 200*ms, s), sl: no(0, s, s)}},
			},
		},
		{
			name: "keys are independent", n: 2, period: s,
			steps: []step{
				{cost: 1, want: per{fw: ok(1, s), sw: ok(1, 2*s), tb: ok(1, 500*ms), sl: ok(1, s)}},
				{cost: 1, want: per{fw: ok(0, s), sw: ok(0, 2*s), tb: ok(0, s), sl: ok(0, s)}},
				{cost: 1, want: per{fw: no(0, s, s), sw: no(0, 1500*ms, 2*s), tb: no(0, 500*ms, s), sl: no(0, s, s)}},
				{key: "b", cost: 1, want: per{fw: ok(1, s), sw: ok(1, 2*s), tb: ok(1, 500*ms), sl: ok(1, s)}},
				{key: "b", cost: 0, want: per{fw: ok(1, s), sw: ok(1, 2*s), tb: ok(1, 500*ms), sl: ok(1, s)}},
				{key: "a", cost: 0, want: per{fw: no(0, s, s), sw: no(0, 1500*ms, 2*s), tb: no(0, 500*ms, s), sl: no(0, s, s)}},
			},
		},
		{
			name: "hits in one call are decided in order", n: 2, period: s,
			steps: []step{
				{cost: 1, want: per{fw: ok(1, s), sw: ok(1, 2*s), tb: ok(1, 500*ms), sl: ok(1, s)}},
				{same: true, key: "b", cost: 1, want: per{fw: ok(1, s), sw: ok(1, 2*s), tb: ok(1, 500*ms), sl: ok(1, s)}},
				// The second hit on a key sees the first.
				{same: true, cost: 1, want: per{fw: ok(0, s), sw: ok(0, 2*s), tb: ok(0, s), sl: ok(0, s)}},
				{same: true, cost: 1, want: per{fw: no(0, s, s), sw: no(0, 1500*ms, 2*s), tb: no(0, 500*ms, s), sl: no(0, s, s)}},
				{same: true, cost: 0, want: per{fw: no(0, s, s), sw: no(0, 1500*ms, 2*s), tb: no(0, 500*ms, s), sl: no(0, s, s)}},
				// Another limit in the same call.
				{same: true, key: "c", n: 1, cost: 1, want: per{fw: ok(0, s), sw: ok(0, 2*s), tb: ok(0, s), sl: ok(0, s)}},
				{same: true, key: "c", n: 1, cost: 1, want: per{fw: no(0, s, s), sw: no(0, 2*s, 2*s), tb: no(0, s, s), sl: no(0, s, s)}},
				// A refund and a hit in the next call.
				{cost: -1, want: per{fw: ok(1, s), sw: ok(1, 2*s), tb: ok(1, 500*ms), sl: ok(1, s)}},
				{same: true, cost: 1, want: per{fw: ok(0, s), sw: ok(0, 2*s), tb: ok(0, s), sl: ok(0, s)}},
			},
		},
		{
			// Start is 20 s into a minute: the boundary is 40 s later.
			name: "window boundary", n: 2, period: time.Minute,
			steps: []step{
				{wait: 40*s - us, cost: 1, want: per{fw: ok(1, us), sw: ok(1, time.Minute+us), tb: ok(1, 30*s), sl: ok(1, time.Minute)}},
				{cost: 1, want: per{fw: ok(0, us), sw: ok(0, time.Minute+us), tb: ok(0, time.Minute), sl: ok(0, time.Minute)}},
				{cost: 1, want: per{fw: no(0, us, us), sw: no(0, 30*s+us, time.Minute+us), tb: no(0, 30*s, time.Minute), sl: no(0, time.Minute, time.Minute)}},
				// The fixed window starts over; the sliding one counts the
				// previous window in full; the bucket ignores windows.
				{wait: us, cost: 0, want: per{fw: ok(2, 0), sw: no(0, 30*s, time.Minute), tb: no(0, 30*s-us, time.Minute-us), sl: no(0, time.Minute-us, time.Minute-us)}},
				{cost: 1, want: per{fw: ok(1, time.Minute), sw: no(0, 30*s, time.Minute), tb: no(0, 30*s-us, time.Minute-us), sl: no(0, time.Minute-us, time.Minute-us)}},
				{cost: 1, want: per{fw: ok(0, time.Minute), sw: no(0, 30*s, time.Minute), tb: no(0, 30*s-us, time.Minute-us), sl: no(0, time.Minute-us, time.Minute-us)}},
				{cost: 1, want: per{fw: no(0, time.Minute, time.Minute), sw: no(0, 30*s, time.Minute), tb: no(0, 30*s-us, time.Minute-us), sl: no(0, time.Minute-us, time.Minute-us)}},
			},
		},
		{
			name: "keys expire", n: 2, period: time.Minute,
			steps: []step{
				{cost: 1, want: per{fw: ok(1, 40*s), sw: ok(1, 100*s), tb: ok(1, 30*s), sl: ok(1, time.Minute)}},
				{cost: 1, want: per{fw: ok(0, 40*s), sw: ok(0, 100*s), tb: ok(0, time.Minute), sl: ok(0, time.Minute)}},
				{wait: 3 * time.Minute, cost: 0, want: all(ok(2, 0))},
				{cost: 2, want: per{fw: ok(0, 40*s), sw: ok(0, 100*s), tb: ok(0, time.Minute), sl: ok(0, time.Minute)}},
			},
		},
		{
			// 10 per second: a token every 100 ms.
			name: "bucket refills after waiting", algs: []limits.Algorithm{limits.TokenBucket},
			n: 10, period: s,
			steps: append(drain(10, s), []step{
				{cost: 1, want: all(no(0, 100*ms, s))},
				{wait: 350 * ms, cost: 1, want: all(ok(2, 750*ms))},
				{cost: 1, want: all(ok(1, 850*ms))},
				{cost: 1, want: all(ok(0, 950*ms))},
				{cost: 1, want: all(no(0, 50*ms, 950*ms))},
				{wait: beforeRetry, cost: 1, want: all(no(0, us, 900*ms+us))},
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
				{cost: 1, want: all(no(0, 125*ms, 1750*ms))},
				{wait: beforeRetry, cost: 1, want: all(no(0, us, 1625*ms+us))},
				{wait: us, cost: 1, want: all(ok(0, 1625*ms))},
				{wait: 250 * ms, cost: 0, want: all(ok(2, 1375*ms))},
				// Next window, 250 ms in: the 5 hits of the last one weigh 3.75.
				{wait: 625 * ms, cost: 0, want: all(ok(6, 750*ms))},
			},
		},
		slidingLogCase(),
		leakyCase(), leakyCostCase(), leakyNoQueueCase(), maxDelayCase(),
		countRefusedCase(), countRefusedLeakyCase(),
		jointCase(), jointCountRefusedCase(), jointLeakyCase(), jointRepeatedKeyCase(),
		resetCase(), resetSlidingCase(), resetLeakyCase(),
		blockCase(), blockJointCase(),
		calendarDayCase(), calendarMonthCase(),
	}
}

// blockCase is a block rule (requests_per_unit 0), of every algorithm:
// every hit refused, whatever its cost, with nothing to wait for (no
// RetryAfter) and nothing to reset (remaining 0 is its maximum), and
// nothing kept, counting refused hits or not.
func blockCase() testCase {
	blocked := all(no(0, 0, 0))
	return testCase{
		name: "block rule refuses every hit", algs: algorithms, n: 0, period: time.Minute,
		steps: []step{
			{cost: 1, want: blocked},
			{cost: 0, want: blocked},
			{cost: 5, with: withCountRefused, want: blocked},
			{same: true, key: "b", cost: 1, want: blocked},
			{cost: -1, want: blocked},
			{wait: time.Minute, cost: 1, with: withCountRefused, want: blocked},
		},
	}
}

// blockJointCase: a block rule in a joint run refuses the run, so the
// other limits keep no charge.
func blockJointCase() testCase {
	fresh := per{fw: ok(1, 40*s), sw: ok(1, 100*s), tb: ok(1, 30*s), sl: ok(1, time.Minute)}
	return testCase{
		name: "block rule refuses its joint run", n: 0, period: time.Minute, // 20 s into the window
		steps: []step{
			{key: "b", n: 2, cost: 1, joint: true, want: fresh},
			{same: true, cost: 1, want: all(no(0, 0, 0))},
			{key: "b", n: 2, cost: 0, want: all(ok(2, 0))},
		},
	}
}

// countCase is N = 5 per period T, starting e into a window: five allowed,
// then refused until the reported RetryAfter, not 1 µs before.
func countCase(T, e time.Duration) testCase {
	steps := make([]step, 0, 9)
	for i := range int64(5) {
		steps = append(steps, step{cost: 1, want: per{
			fw: ok(4-i, T-e),
			sw: ok(4-i, 2*T-e),
			tb: ok(4-i, time.Duration(i+1)*T/5),
			sl: ok(4-i, T),
		}})
	}
	// Sliding: in the next window the 5 hits weigh 5 × (T − e')/T ≤ 4 from
	// e' = T/5. Bucket: a token every T/5. Log: all five leave at once, T on.
	refused := per{fw: no(0, T-e, T-e), sw: no(0, T-e+T/5, 2*T-e), tb: no(0, T/5, T), sl: no(0, T, T)}
	steps = append(steps,
		step{cost: 1, want: refused},
		step{cost: 0, want: refused},
		// 1 µs before each one's wait: the sliding window is T/5 − 1 µs into
		// the next window, which the previous one's hits weigh on until its
		// end.
		step{wait: beforeRetry, cost: 1, want: per{fw: no(0, us, us), sw: no(0, us, T-T/5+us), tb: no(0, us, 4*T/5+us), sl: no(0, us, us)}},
		step{wait: us, cost: 1, want: per{fw: ok(4, T), sw: ok(0, 2*T-T/5), tb: ok(0, T), sl: ok(4, T)}},
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
// the store contract built on limits.DecideWithin.
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
		case untilRetry, beforeRetry:
			if last.Allowed || last.RetryAfter <= 0 {
				h.t.Fatalf("step %d waits for the previous result's RetryAfter, but it has none: %s", i, format(last))
			}
			h.clock.Add(last.RetryAfter.Microseconds())
			if w == beforeRetry {
				h.clock.Add(-1)
			}
		default:
			h.clock.Add(w.Microseconds())
		}
		call := c.steps[i:j]
		if call[0].reset {
			h.reset(i, h.hits(a, c, call))
			i = j
			continue
		}
		hits := h.hits(a, c, call)
		results := h.decide(hits)
		for k, st := range call {
			if st.err != nil {
				if !errors.Is(results[k].Err, st.err) {
					h.t.Errorf("step %d (%s, key %s, cost %d): got %s, want the error %v",
						i+k, hits[k].Limit, h.name(hits[k].Key), st.cost, format(results[k]), st.err)
				}
				continue
			}
			if want := st.want.of(a); results[k] != want {
				h.t.Errorf("step %d (%s, key %s, cost %d) at start+%s:\n got  %s\n want %s",
					i+k, hits[k].Limit, h.name(hits[k].Key), st.cost,
					time.Duration(h.clock.Load()-Start)*time.Microsecond, format(results[k]), format(want))
			}
		}
		if h.t.Failed() {
			return // the later steps would only repeat the difference
		}
		if call[len(call)-1].err == nil {
			last = results[len(results)-1]
		}
		i = j
	}
}

// hits are the hits of one call's steps, of algorithm a in case c.
func (h *harness) hits(a limits.Algorithm, c testCase, call []step) []limits.Hit {
	h.t.Helper()
	hits := make([]limits.Hit, len(call))
	for k, st := range call {
		l := limits.Limit{Algorithm: a, Requests: c.n, Period: c.period, Burst: c.burst, CountRefused: c.countRefused}
		if st.n != 0 {
			l.Requests = st.n
		}
		if st.with != nil {
			st.with(&l)
		}
		key := st.key
		if key == "" {
			key = "a"
		}
		if st.joint && (k+1 == len(call)) {
			h.t.Fatalf("step %d of a call: joint with no step after it in the same call", k)
		}
		// A case's keys share a hash tag, as one descriptor's keys do, so
		// that any of them may form a joint run.
		hits[k] = limits.Hit{Key: h.prefix + "{case}:" + key, Limit: l, Cost: st.cost, MaxDelay: st.maxDelay, Joint: st.joint}
	}
	return hits
}

// reset resets the keys of hits (step i) on the store, and in the
// reference model.
func (h *harness) reset(i int, hits []limits.Hit) {
	h.t.Helper()
	if len(hits) != 1 {
		h.t.Fatalf("step %d: a reset step must be alone in its call", i)
	}
	if err := limits.Reset(h.t.Context(), h.store, hits); err != nil {
		h.t.Fatalf("step %d: reset %s: %v", i, h.name(hits[0].Key), err)
	}
	delete(h.ref, hits[0].Key)
}

// name is a key as the case names it.
func (h *harness) name(key string) string {
	return strings.TrimPrefix(key, h.prefix+"{case}:")
}

// decide sends hits in one Decide call and checks every result against the
// reference model: the store must answer exactly as limits.DecideWithin
// does, run by run.
func (h *harness) decide(hits []limits.Hit) []limits.Result {
	h.t.Helper()
	results := make([]limits.Result, len(hits))
	for i := range results {
		// Garbage, to check that the store writes every field.
		results[i] = limits.Result{Allowed: true, Remaining: -7, RetryAfter: -time.Hour, ResetAfter: -time.Hour, Delay: -time.Hour, Err: errGarbage}
	}
	h.store.Decide(h.t.Context(), hits, results)
	now := h.clock.Load()
	want := h.reference(hits, now)
	for i, hit := range hits {
		if want[i].Err != nil {
			if !errors.Is(results[i].Err, want[i].Err) {
				h.t.Errorf("hit %d (%s, key %s, cost %d): got %s, want the error %v",
					i, hit.Limit, h.name(hit.Key), hit.Cost, format(results[i]), want[i].Err)
			}
			continue
		}
		if results[i].Err != nil {
			h.t.Fatalf("hit %d (%s, cost %d): store error: %v", i, hit.Limit, hit.Cost, results[i].Err)
		}
		if results[i] != want[i] {
			h.t.Errorf("hit %d (%s, key %s, cost %d) at start+%s differs from limits.DecideWithin:\n got  %s\n want %s",
				i, hit.Limit, h.name(hit.Key), hit.Cost,
				time.Duration(now-Start)*time.Microsecond, format(results[i]), format(want[i]))
		}
	}
	return results
}

var errGarbage = fmt.Errorf("storetest: result not written by the store")

// reference decides hits as the store contract says: each run of joint hits
// is decided whole, its new states kept only if every hit is allowed, else
// only those of its count_refused limits; a run that repeats a key is not
// decided, every hit of it failing with limits.ErrRepeatedKey.
func (h *harness) reference(hits []limits.Hit, now int64) []limits.Result {
	results := make([]limits.Result, len(hits))
	for i := 0; i < len(hits); {
		j := i + 1
		for j < len(hits) && hits[j-1].Joint {
			j++
		}
		if limits.RepeatedKey(hits[i:j]) >= 0 {
			for k := i; k < j; k++ {
				results[k] = limits.Result{Err: limits.ErrRepeatedKey}
			}
			i = j
			continue
		}
		view := func(key string) limits.State {
			r := h.ref[key]
			if r.state.Live && now < r.expireAt {
				return r.state
			}
			return limits.State{}
		}
		decisions := make([]limits.Decision, j-i)
		allowed := true
		for k, hit := range hits[i:j] {
			d := limits.DecideWithin(hit.Limit, view(hit.Key), hit.Cost, now, hit.MaxDelayMicros())
			decisions[k], results[i+k] = d, d.Result
			allowed = allowed && d.Result.Allowed
		}
		for k, hit := range hits[i:j] {
			d := decisions[k]
			if !d.Changed || !(allowed || hit.Limit.CountRefused || d.Locks) {
				continue
			}
			if d.State.Live && d.ExpireAt > now {
				h.ref[hit.Key] = refState{d.State, d.ExpireAt}
			} else {
				delete(h.ref, hit.Key)
			}
		}
		i = j
	}
	return results
}

func format(r limits.Result) string {
	verdict := "refused"
	if r.Allowed {
		verdict = "allowed"
	}
	s := fmt.Sprintf("%s remaining=%d retry=%s reset=%s", verdict, r.Remaining, r.RetryAfter, r.ResetAfter)
	if r.Delay != 0 {
		s += fmt.Sprintf(" delay=%s", r.Delay)
	}
	if r.Err != nil {
		s += fmt.Sprintf(" err=%v", r.Err)
	}
	return s
}

// slidingLogCase: each hit leaves the log T after it came.
func slidingLogCase() testCase {
	return testCase{
		name: "log frees hits one by one", algs: []limits.Algorithm{limits.SlidingLog}, n: 3, period: s,
		steps: []step{
			{cost: 1, want: all(ok(2, s))},
			{wait: 300 * ms, cost: 1, want: all(ok(1, s))},
			{wait: 300 * ms, cost: 1, want: all(ok(0, s))},
			// The first leaves at start + 1 s.
			{cost: 1, want: all(no(0, 400*ms, s))},
			{cost: 0, want: all(no(0, 400*ms, s))},
			{wait: beforeRetry, cost: 1, want: all(no(0, us, 600*ms+us))},
			{wait: us, cost: 1, want: all(ok(0, s))},
			// Cost 2 waits for the hits of start + 300 ms and + 600 ms.
			{cost: 2, want: all(no(0, 600*ms, s))},
			{wait: untilRetry, cost: 2, want: all(ok(0, s))},
			{wait: 2 * s, cost: 0, want: all(ok(3, 0))},
		},
	}
}

// The leaky bucket cases: 10 per second is one turn every I = 100 ms; B = 2
// places in the queue besides the request in service.

func leakyCase() testCase {
	return testCase{
		name: "leaky bucket delays, then refuses at once", algs: leaky, n: 10, period: s, burst: 2,
		steps: []step{
			{cost: 1, want: all(later(2, 0, 0))},
			{cost: 1, want: all(later(1, 100*ms, 100*ms))},
			{cost: 1, want: all(later(0, 200*ms, 200*ms))},
			{cost: 1, want: all(no(0, 100*ms, 200*ms))},
			{cost: 0, want: all(no(0, 100*ms, 200*ms))},
			{wait: beforeRetry, cost: 1, want: all(no(0, us, 100*ms+us))},
			{wait: us, cost: 1, want: all(later(0, 200*ms, 200*ms))},
			// 50 ms of queue left: a peek waits for it, consuming nothing.
			{wait: 250 * ms, cost: 0, want: all(ok(2, 0))},
			{wait: s, cost: 0, want: all(ok(2, 0))},
		},
	}
}

func leakyCostCase() testCase {
	return testCase{
		name: "leaky bucket costs", algs: leaky, n: 10, period: s, burst: 2,
		steps: []step{
			// B + 1 turns fit an idle bucket; more never fit.
			{cost: 3, want: all(later(0, 200*ms, 0))},
			{cost: 4, want: all(no(0, 0, 200*ms))},
			{cost: 2, want: all(no(0, 200*ms, 200*ms))},
			{wait: untilRetry, cost: 2, want: all(later(0, 200*ms, 100*ms))},
			{cost: -3, want: all(ok(2, 0))},
			{cost: 4, want: all(no(2, 0, 0))},
		},
	}
}

func leakyNoQueueCase() testCase {
	return testCase{
		name: "leaky bucket without a queue spaces requests", algs: leaky, n: 10, period: s,
		steps: []step{
			// Remaining's maximum is B = 0: a refusal's ResetAfter is zero.
			{cost: 1, want: all(ok(0, 0))},
			{cost: 1, want: all(no(0, 100*ms, 0))},
			{wait: beforeRetry, cost: 1, want: all(no(0, us, 0))},
			{wait: us, cost: 1, want: all(ok(0, 0))},
			{cost: 2, want: all(no(0, 0, 0))},
		},
	}
}

func maxDelayCase() testCase {
	return testCase{
		name: "max delay refuses a longer wait at once, charging nothing", algs: leaky, n: 10, period: s, burst: 2,
		steps: []step{
			{cost: 1, want: all(later(2, 0, 0))},
			{cost: 1, maxDelay: 50 * ms, want: all(no(2, 50*ms, 0))},
			{cost: 1, maxDelay: 100 * ms, want: all(later(1, 100*ms, 100*ms))},
			{cost: 1, maxDelay: 150 * ms, want: all(no(1, 50*ms, 100*ms))},
			{wait: untilRetry, cost: 1, maxDelay: 150 * ms, want: all(later(0, 150*ms, 150*ms))},
		},
	}
}

// countRefusedCase: refused hits are charged, down to 2N counted (N tokens
// of debt); every refused hit's waits are measured from the charged state.
func countRefusedCase() testCase {
	return testCase{
		name: "count_refused charges refused hits", n: 4, period: s, countRefused: true,
		steps: []step{
			{cost: 4, want: per{fw: ok(0, s), sw: ok(0, 2*s), tb: ok(0, s), sl: ok(0, s)}},
			// Counted 5: the sliding window's next one weighs 5 × (T − e')/T
			// + 1 ≤ 4 from e' = 400 ms; the bucket holds −0.6 tokens, 4.6
			// from full: 1.15 s.
			{wait: 100 * ms, cost: 1, want: per{fw: no(0, 900*ms, 900*ms), sw: no(0, 1300*ms, 1900*ms), tb: no(0, 400*ms, 1150*ms), sl: no(0, 900*ms, s)}},
			{wait: untilRetry, cost: 1, want: per{fw: ok(3, s), sw: ok(0, 1600*ms), tb: ok(0, s), sl: ok(2, s)}},
			// Never fits, charged up to the cap: 8 counted, −4 tokens.
			{cost: 9, want: per{fw: no(0, 0, s), sw: no(0, 0, 1600*ms), tb: no(0, 0, 2*s), sl: no(0, 0, s)}},
			// At the cap a refusal adds nothing.
			{cost: 1, want: per{fw: no(0, s, s), sw: no(0, 1225*ms, 1600*ms), tb: no(0, 1250*ms, 2*s), sl: no(0, s, s)}},
			{wait: untilRetry, cost: 1, want: per{fw: ok(3, s), sw: ok(0, 1375*ms), tb: ok(0, s), sl: ok(3, s)}},
		},
	}
}

// countRefusedLeakyCase: 4 per second, I = 250 ms, B = 1.
func countRefusedLeakyCase() testCase {
	return testCase{
		name: "count_refused takes turns of refused hits", algs: leaky, n: 4, period: s, burst: 1, countRefused: true,
		steps: []step{
			{cost: 1, want: all(later(1, 0, 0))},
			{cost: 1, want: all(later(0, 250*ms, 250*ms))},
			{cost: 1, want: all(no(0, 500*ms, 500*ms))},
			{wait: untilRetry, cost: 1, want: all(later(0, 250*ms, 250*ms))},
			// Refused past the max delay: still a turn taken.
			{cost: 1, maxDelay: 100 * ms, want: all(no(0, 650*ms, 500*ms))},
			// Never fits: charged up to (B + N)·I = 1.25 s of queue.
			{cost: 5, want: all(no(0, 0, s))},
		},
	}
}

func withCountRefused(l *limits.Limit) { l.CountRefused = true }

// jointCase: a run of limits a (N = 4) and b (N = 1) is charged only if
// both allow.
func jointCase() testCase {
	fresh := per{fw: ok(3, s), sw: ok(3, 2*s), tb: ok(3, 250*ms), sl: ok(3, s)}
	full := per{fw: no(0, s, s), sw: no(0, 2*s, 2*s), tb: no(0, s, s), sl: no(0, s, s)}
	return testCase{
		name: "joint run is charged only if every limit allows", n: 4, period: s,
		steps: []step{
			{key: "b", n: 1, cost: 1, want: per{fw: ok(0, s), sw: ok(0, 2*s), tb: ok(0, s), sl: ok(0, s)}},
			// Each result is its own limit's decision.
			{cost: 1, joint: true, want: fresh},
			{same: true, key: "b", n: 1, cost: 1, want: full},
			{cost: 0, want: all(ok(4, 0))},
			{same: true, key: "b", n: 1, cost: 0, want: full},
			// Both allow: both charged.
			{cost: 1, joint: true, want: fresh},
			{same: true, key: "c", cost: 1, want: fresh},
			{cost: 0, want: fresh},
			{same: true, key: "c", cost: 0, want: fresh},
			// A run, then a lone hit, in one call.
			{cost: 1, joint: true, want: per{fw: ok(2, s), sw: ok(2, 2*s), tb: ok(2, 500*ms), sl: ok(2, s)}},
			{same: true, key: "b", n: 1, cost: 1, want: full},
			{same: true, key: "c", cost: 1, want: per{fw: ok(2, s), sw: ok(2, 2*s), tb: ok(2, 500*ms), sl: ok(2, s)}},
			{cost: 0, want: fresh},
		},
	}
}

// jointCountRefusedCase: a count_refused member keeps its charge when the
// run is refused, by another member or by itself.
func jointCountRefusedCase() testCase {
	fresh := per{fw: ok(3, s), sw: ok(3, 2*s), tb: ok(3, 250*ms), sl: ok(3, s)}
	return testCase{
		name: "joint run charges its count_refused limits when refused", n: 4, period: s,
		steps: []step{
			{key: "b", n: 1, cost: 1, want: per{fw: ok(0, s), sw: ok(0, 2*s), tb: ok(0, s), sl: ok(0, s)}},
			{cost: 1, joint: true, with: withCountRefused, want: fresh},
			{same: true, key: "b", n: 1, cost: 1, want: per{fw: no(0, s, s), sw: no(0, 2*s, 2*s), tb: no(0, s, s), sl: no(0, s, s)}},
			{cost: 0, with: withCountRefused, want: fresh},
			// a refuses cost 4 and is charged (5 counted, −1 token); c allows
			// but the run is refused, so c is not.
			{cost: 4, joint: true, with: withCountRefused, want: per{fw: no(0, s, s), sw: no(0, 2*s, 2*s), tb: no(0, 1250*ms, 1250*ms), sl: no(0, s, s)}},
			{same: true, key: "c", cost: 1, want: fresh},
			{cost: 0, key: "c", want: all(ok(4, 0))},
			{same: true, cost: 0, with: withCountRefused, want: per{fw: no(0, s, s), sw: no(0, 1400*ms, 2*s), tb: no(0, 500*ms, 1250*ms), sl: no(0, s, s)}},
		},
	}
}

// jointRepeatedKeyCase: a joint run that names a key twice is refused
// whole, on every store the same way, and changes nothing; the other hits of
// the call are decided as usual.
func jointRepeatedKeyCase() testCase {
	once := per{fw: ok(3, s), sw: ok(3, 2*s), tb: ok(3, 250*ms), sl: ok(3, s)}
	twice := per{fw: ok(2, s), sw: ok(2, 2*s), tb: ok(2, 500*ms), sl: ok(2, s)}
	return testCase{
		name: "joint run that repeats a key is refused whole", n: 4, period: s,
		steps: []step{
			{cost: 1, want: once},
			{cost: 1, joint: true, err: limits.ErrRepeatedKey},
			{same: true, key: "b", cost: 1, joint: true, err: limits.ErrRepeatedKey},
			{same: true, cost: 1, err: limits.ErrRepeatedKey},
			{same: true, key: "c", cost: 1, want: once},
			// Nothing of the refused run was charged.
			{cost: 0, want: once},
			{same: true, key: "b", cost: 0, want: all(ok(4, 0))},
			// Repeated in separate runs of one call, a key is decided in order.
			{cost: 1, joint: true, want: twice},
			{same: true, key: "b", cost: 1, want: once},
			{same: true, cost: 1, want: per{fw: ok(1, s), sw: ok(1, 2*s), tb: ok(1, 750*ms), sl: ok(1, s)}},
		},
	}
}

func withFixedWindow(l *limits.Limit) { l.Algorithm, l.Burst = limits.FixedWindow, 0 }

// jointLeakyCase: a leaky bucket joint with fixed windows (one descriptor's
// limits may mix algorithms). A refused run takes no turn; the leaky
// bucket's result still carries its own delay (the service drops it when
// the request is refused).
func jointLeakyCase() testCase {
	return testCase{
		name: "joint run across algorithms", algs: leaky, n: 10, period: s, burst: 2,
		steps: []step{
			{key: "b", n: 1, with: withFixedWindow, cost: 1, want: all(ok(0, s))},
			{cost: 1, want: all(later(2, 0, 0))},
			{cost: 1, joint: true, want: all(later(1, 100*ms, 100*ms))},
			{same: true, key: "b", n: 1, with: withFixedWindow, cost: 1, want: all(no(0, s, s))},
			{cost: 0, want: all(ok(2, 0))},
			{cost: 1, joint: true, want: all(later(1, 100*ms, 100*ms))},
			{same: true, key: "c", n: 5, with: withFixedWindow, cost: 1, want: all(ok(4, s))},
			{cost: 0, want: all(ok(1, 100*ms))},
		},
	}
}

// resetCase: a key refused, once reset, decides as a new key at the same
// instant, for every algorithm that counts; another key keeps its state.
func resetCase() testCase {
	c := countCase(time.Minute, 20*s)
	steps := append([]step{}, c.steps[:6]...) // five allowed, one refused
	steps = append(steps, step{key: "b", cost: 1, want: c.steps[0].want}, step{reset: true})
	steps = append(steps, c.steps[:5]...)
	steps = append(steps, step{key: "b", cost: 1, want: c.steps[1].want})
	return testCase{name: "reset forgets a key", n: 5, period: time.Minute, steps: steps}
}

// resetSlidingCase: a reset forgets the previous window that a sliding
// window weighs too.
func resetSlidingCase() testCase {
	c := countCase(time.Minute, 20*s)
	steps := append([]step{}, c.steps[:5]...)
	steps = append(steps,
		// 20 s into the next window the last one's 5 hits weigh 3.33.
		step{wait: time.Minute, cost: 0, want: all(ok(1, 40*s))},
		step{reset: true},
		step{cost: 1, want: all(ok(4, 100*s))},
	)
	return testCase{name: "reset forgets the previous window", algs: []limits.Algorithm{limits.SlidingWindow}, n: 5, period: time.Minute, steps: steps}
}

// resetLeakyCase: a reset empties a leaky bucket's queue.
func resetLeakyCase() testCase {
	c := leakyCase()
	steps := append([]step{}, c.steps[:4]...) // the queue full, then refused
	steps = append(steps, step{reset: true})
	steps = append(steps, c.steps[:3]...)
	c.name, c.steps = "reset empties a leaky bucket", steps
	return c
}
