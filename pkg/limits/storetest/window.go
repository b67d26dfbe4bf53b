package storetest

import (
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// windowCases are the windows' own: where their boundaries fall, and how
// the sliding estimate weighs the previous window.
func windowCases() []testCase { return []testCase{boundaryCase(), decayCase()} }

// boundaryCase: window boundary.
// Start is 20 s into a minute: the boundary is 40 s later.
func boundaryCase() testCase {
	return testCase{
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
	}
}

// decayCase: sliding estimate decays.
// prev 8 weighs 8 × (T − e)/T.
func decayCase() testCase {
	return testCase{
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
	}
}
