package storetest

import (
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
	runHolds(t, newStore)
}

func contains(as []limits.Algorithm, a limits.Algorithm) bool {
	for _, b := range as {
		if a == b {
			return true
		}
	}
	return false
}

// cases is the table, by kind: the cases every counting algorithm runs,
// then each algorithm's and each modifier's own. The expected values are
// worked out by hand from docs/semantics.md; each is also checked against
// limits.DecideWithin.
func cases() []testCase {
	var cs []testCase
	for _, kind := range [][]testCase{
		countingCases(), windowCases(), bucketCases(), logCases(), leakyCases(),
		countRefusedCases(), jointCases(), resetCases(), blockCases(), calendarCases(),
	} {
		cs = append(cs, kind...)
	}
	return cs
}
