package storetest

import (
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// runConcurrency runs the concurrency cases: slots taken by hits, given
// back by negative hits (the oldest first), freed by their lease.
func runConcurrency(t *testing.T, newStore Factory) {
	t.Run(limits.Concurrency.String(), func(t *testing.T) {
		for _, c := range concurrencyCases() {
			t.Run(c.name, func(t *testing.T) {
				newHarness(t, newStore).run(limits.Concurrency, c)
			})
		}
	})
}

// concurrencyCases are the concurrency limit's cases; period is the
// lease. A step's want is the same for every algorithm (all), since only
// concurrency runs them.
func concurrencyCases() []testCase {
	return []testCase{
		{
			name: "slots are taken, refused, given back and taken again", n: 3, period: 10 * s,
			steps: []step{
				{cost: 1, want: all(ok(2, 10*s))},
				{wait: s, cost: 1, want: all(ok(1, 10*s))},
				{wait: s, cost: 1, want: all(ok(0, 10*s))},
				// Refused until the oldest slot's lease ends.
				{cost: 1, want: all(no(0, 8*s, 10*s))},
				{cost: 0, want: all(no(0, 8*s, 10*s))},
				// A release frees the oldest slot.
				{wait: 500 * ms, cost: -1, want: all(ok(1, 9500*ms))},
				{cost: 1, want: all(ok(0, 10*s))},
				// Two released: the slots of 1 s and 2 s go, 2.5 s's stays.
				{cost: -2, want: all(ok(2, 10*s))},
				{wait: 10 * s, cost: 0, want: all(ok(3, 0))},
				{cost: 4, want: all(no(3, 0, 0))},
				// Releasing more than is held frees what is held.
				{cost: -5, want: all(ok(3, 0))},
				{cost: 3, want: all(ok(0, 10*s))},
			},
		},
		{
			name: "a slot not given back frees itself when its lease ends", n: 2, period: 5 * s,
			steps: []step{
				{cost: 2, want: all(ok(0, 5*s))},
				{wait: s, cost: 1, want: all(no(0, 4*s, 4*s))},
				{wait: beforeRetry, cost: 1, want: all(no(0, us, us))},
				{wait: us, cost: 1, want: all(ok(1, 5*s))},
				{wait: 5 * s, cost: 0, want: all(ok(2, 0))},
			},
		},
		{
			name: "hits of several slots", n: 4, period: s,
			steps: []step{
				{cost: 3, want: all(ok(1, s))},
				{wait: 100 * ms, cost: 2, want: all(no(1, 900*ms, 900*ms))},
				{cost: 1, want: all(ok(0, s))},
				// The three slots of the first hit are the oldest: two go.
				{cost: -2, want: all(ok(2, s))},
				{cost: 2, want: all(ok(0, s))},
				// At 1.05 s the first hit's last slot is gone.
				{wait: 950 * ms, cost: 0, want: all(ok(1, 50*ms))},
				{cost: 3, want: all(no(1, 50*ms, 50*ms))},
			},
		},
		{
			name: "a refused joint run holds no slot", n: 2, period: 10 * s,
			steps: []step{
				{key: "c", cost: 1, joint: true, want: all(ok(1, 10*s))},
				{key: "w", cost: 1, n: 1, same: true, with: withFixedWindow, want: all(ok(0, 10*s))},
				{wait: s, key: "c", cost: 1, joint: true, want: all(ok(0, 10*s))},
				{key: "w", cost: 1, n: 1, same: true, with: withFixedWindow, want: all(no(0, 9*s, 9*s))},
				{key: "c", cost: 0, want: all(ok(1, 9*s))},
			},
		},
		{
			name: "reset frees every slot", n: 2, period: time.Minute,
			steps: []step{
				{cost: 2, want: all(ok(0, time.Minute))},
				{reset: true},
				{cost: 0, want: all(ok(2, 0))},
				{cost: 1, want: all(ok(1, time.Minute))},
			},
		},
	}
}
