package storetest

import (
	"time"
)

// countingCases run on every algorithm that counts N per period.
func countingCases() []testCase {
	return []testCase{
		countCase(s, 0), countCase(30*s, 20*s), countCase(5*time.Minute, 200*s),
		peekCase(), neverFitsCase(), refundCase(), independentCase(), inOrderCase(), expireCase(),
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

// peekCase: peek consumes nothing.
func peekCase() testCase {
	return testCase{
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
	}
}

// neverFitsCase: cost that can never fit leaves the key untouched.
func neverFitsCase() testCase {
	return testCase{
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
	}
}

// refundCase: refund never above the maximum.
func refundCase() testCase {
	return testCase{
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
	}
}

// independentCase: keys are independent.
func independentCase() testCase {
	return testCase{
		name: "keys are independent", n: 2, period: s,
		steps: []step{
			{cost: 1, want: per{fw: ok(1, s), sw: ok(1, 2*s), tb: ok(1, 500*ms), sl: ok(1, s)}},
			{cost: 1, want: per{fw: ok(0, s), sw: ok(0, 2*s), tb: ok(0, s), sl: ok(0, s)}},
			{cost: 1, want: per{fw: no(0, s, s), sw: no(0, 1500*ms, 2*s), tb: no(0, 500*ms, s), sl: no(0, s, s)}},
			{key: "b", cost: 1, want: per{fw: ok(1, s), sw: ok(1, 2*s), tb: ok(1, 500*ms), sl: ok(1, s)}},
			{key: "b", cost: 0, want: per{fw: ok(1, s), sw: ok(1, 2*s), tb: ok(1, 500*ms), sl: ok(1, s)}},
			{key: "a", cost: 0, want: per{fw: no(0, s, s), sw: no(0, 1500*ms, 2*s), tb: no(0, 500*ms, s), sl: no(0, s, s)}},
		},
	}
}

// inOrderCase: hits in one call are decided in order.
func inOrderCase() testCase {
	return testCase{
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
	}
}

// expireCase: keys expire.
func expireCase() testCase {
	return testCase{
		name: "keys expire", n: 2, period: time.Minute,
		steps: []step{
			{cost: 1, want: per{fw: ok(1, 40*s), sw: ok(1, 100*s), tb: ok(1, 30*s), sl: ok(1, time.Minute)}},
			{cost: 1, want: per{fw: ok(0, 40*s), sw: ok(0, 100*s), tb: ok(0, time.Minute), sl: ok(0, time.Minute)}},
			{wait: 3 * time.Minute, cost: 0, want: all(ok(2, 0))},
			{cost: 2, want: per{fw: ok(0, 40*s), sw: ok(0, 100*s), tb: ok(0, time.Minute), sl: ok(0, time.Minute)}},
		},
	}
}
