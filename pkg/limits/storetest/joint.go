package storetest

import (
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// countRefusedCases count refused hits.
func countRefusedCases() []testCase { return []testCase{countRefusedCase()} }

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

func withCountRefused(l *limits.Limit) { l.CountRefused = true }

// jointCases decide runs of joint hits.
func jointCases() []testCase {
	return []testCase{jointCase(), jointCountRefusedCase(), jointRepeatedKeyCase()}
}

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

// resetCases forget keys.
func resetCases() []testCase { return []testCase{resetCase(), resetSlidingCase()} }

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

// blockCases are block rules (requests_per_unit 0).
func blockCases() []testCase { return []testCase{blockCase(), blockJointCase()} }

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
