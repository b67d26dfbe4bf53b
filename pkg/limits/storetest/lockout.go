package storetest

import (
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// lockoutCases are the cases of a limit with block_for
// (limits.Limit.BlockFor), of every algorithm that counts: the lock holds
// past the window's reset and the bucket's refill, lifts at block_for from
// the refusal that started it (later refusals do not extend it), and a
// refund or a reset lifts it at once; in a joint run, a locked limit
// refuses the run.
func lockoutCases() []testCase {
	return []testCase{lockoutHoldsCase(), lockoutRefundCase(), lockoutResetCase(), lockoutJointCase(), lockoutPeekCase()}
}

// lockoutPeekCase: a refused peek starts the lock (Envoy's check of a
// request whose cost is charged after the response), a hit that can never
// fit does not.
func lockoutPeekCase() testCase {
	return testCase{
		name: "refused peek starts a lockout, a hit that can never fit does not", n: 2, period: s,
		steps: locking(time.Minute, []step{
			{cost: 2, want: exhausted},
			{cost: 3, want: per{fw: no(0, 0, s), sw: no(0, 0, 2*s), tb: no(0, 0, s), sl: no(0, 0, s)}},
			{cost: 0, want: all(lockedFor(time.Minute))},
			{wait: 10 * s, cost: 1, want: all(lockedFor(50 * s))},
		}),
	}
}

// lockFor returns a step's with that makes its limit a lockout of d.
func lockFor(d time.Duration) func(*limits.Limit) {
	return func(l *limits.Limit) { l.BlockFor = d }
}

// locking sets lockFor(d) on every step.
func locking(d time.Duration, steps []step) []step {
	for i := range steps {
		steps[i].with = lockFor(d)
	}
	return steps
}

// lockedFor is a refusal by a lock with left to run.
func lockedFor(left time.Duration) limits.Result {
	r := no(0, left, left)
	r.Locked = true
	return r
}

// exhausted is a hit of cost 2 on a fresh key of N = 2 per second: the
// quota used up.
var exhausted = per{fw: ok(0, s), sw: ok(0, 2*s), tb: ok(0, s), sl: ok(0, s)}

// lockoutHoldsCase: 2 per second, locked 5 s from the first refusal.
func lockoutHoldsCase() testCase {
	return testCase{
		name: "lockout holds past the reset, for block_for from the first refusal", n: 2, period: s,
		steps: locking(5*s, []step{
			{cost: 2, want: exhausted},
			{cost: 1, want: all(lockedFor(5 * s))},
			// The window has moved on, the bucket refilled: still locked,
			// and this refusal does not extend the lock.
			{wait: 3 * s, cost: 1, want: all(lockedFor(2 * s))},
			{cost: 0, want: all(lockedFor(2 * s))},
			{wait: beforeRetry, cost: 1, want: all(lockedFor(us))},
			// The lock's end: the algorithm decides again, on a state that
			// counted none of the refused hits.
			{wait: us, cost: 1, want: per{fw: ok(1, s), sw: ok(1, 2*s), tb: ok(1, 500*ms), sl: ok(1, s)}},
		}),
	}
}

// lockoutRefundCase: a refund lifts the lock at once.
func lockoutRefundCase() testCase {
	return testCase{
		name: "refund lifts a lockout", n: 2, period: s,
		steps: locking(time.Minute, []step{
			{cost: 2, want: exhausted},
			{cost: 1, want: all(lockedFor(time.Minute))},
			{cost: -1, want: per{fw: ok(1, s), sw: ok(1, 2*s), tb: ok(1, 500*ms), sl: ok(1, s)}},
			{cost: 1, want: exhausted},
			{cost: 1, want: all(lockedFor(time.Minute))},
		}),
	}
}

// lockoutResetCase: a reset lifts the lock with the key's state.
func lockoutResetCase() testCase {
	return testCase{
		name: "reset lifts a lockout", n: 2, period: s,
		steps: locking(time.Minute, []step{
			{cost: 2, want: exhausted},
			{cost: 1, want: all(lockedFor(time.Minute))},
			{reset: true},
			{cost: 2, want: exhausted},
			{cost: 1, want: all(lockedFor(time.Minute))},
		}),
	}
}

// lockoutJointCase: a (N = 2, locked a minute) with b (N = 5): a's
// refusal locks a and refuses the run, and while a is locked the run is
// refused, b's charge undone.
func lockoutJointCase() testCase {
	lock := lockFor(time.Minute)
	return testCase{
		name: "locked limit refuses its joint run", n: 2, period: s,
		steps: []step{
			{cost: 2, with: lock, joint: true, want: exhausted},
			{same: true, key: "b", n: 5, cost: 2, want: per{fw: ok(3, s), sw: ok(3, 2*s), tb: ok(3, 400*ms), sl: ok(3, s)}},
			{cost: 1, with: lock, joint: true, want: all(lockedFor(time.Minute))},
			{same: true, key: "b", n: 5, cost: 1, want: per{fw: ok(2, s), sw: ok(2, 2*s), tb: ok(2, 600*ms), sl: ok(2, s)}},
			{wait: 2 * s, cost: 1, with: lock, joint: true, want: all(lockedFor(58 * s))},
			{same: true, key: "b", n: 5, cost: 1, want: per{fw: ok(4, s), sw: ok(4, 2*s), tb: ok(4, 200*ms), sl: ok(4, s)}},
			{key: "b", n: 5, cost: 0, want: all(ok(5, 0))},
		},
	}
}
