package storetest

// leakyCases are the leaky bucket's own: its queue, its turns, its
// deadline, and how it counts refused hits, joins a run and resets.
func leakyCases() []testCase {
	return []testCase{
		leakyCase(), leakyCostCase(), leakyNoQueueCase(), maxDelayCase(),
		countRefusedLeakyCase(), jointLeakyCase(), resetLeakyCase(),
	}
}

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

// resetLeakyCase: a reset empties a leaky bucket's queue.
func resetLeakyCase() testCase {
	c := leakyCase()
	steps := append([]step{}, c.steps[:4]...) // the queue full, then refused
	steps = append(steps, step{reset: true})
	steps = append(steps, c.steps[:3]...)
	c.name, c.steps = "reset empties a leaky bucket", steps
	return c
}
