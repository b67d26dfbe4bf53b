package storetest

import (
	"sync/atomic"
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
	return append(concurrencySlotCases(), concurrencyRunCases()...)
}

// concurrencySlotCases take, give back and let expire a key's slots.
func concurrencySlotCases() []testCase {
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
	}
}

// concurrencyRunCases are a concurrency limit in a joint run, counting
// refused hits, and reset.
func concurrencyRunCases() []testCase {
	return []testCase{
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
			// What Envoy sends: a release for every request that ends,
			// refused or not.
			name: "count_refused: a refused hit holds its slot until its release", n: 2, period: 10 * s, countRefused: true,
			steps: []step{
				{cost: 2, want: all(ok(0, 10*s))},
				{wait: s, cost: 1, want: all(no(0, 9*s, 10*s))},
				{cost: -1, want: all(ok(0, 10*s))},
				{cost: -1, want: all(ok(1, 10*s))},
				{cost: 1, want: all(ok(0, 10*s))},
				// At most 2N held: a hit that can never fit holds what is left.
				{cost: 5, want: all(no(0, 0, 10*s))},
				{cost: 1, want: all(no(0, 10*s, 10*s))},
				{cost: -4, want: all(ok(2, 0))},
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

// Holders runs many goroutines on one concurrency key of store, which
// decides on its own clock: each takes a slot, holds it a moment and gives
// it back, over and over. It fails if more goroutines ever hold a slot at
// once than the limit has slots, if the slots are not reused (more
// acquires allowed than there are slots, none expiring), or if any is left
// held at the end (every release gave one back: no leak). A store may
// refuse where a slot was free (a refused acquire counted until undone),
// so it need not fill every slot; a refused worker waits a hold's length
// before it tries again, so that on a loaded machine it does not spend
// every round on refusals before the undos land.
func Holders(t *testing.T, store limits.Store, key string) {
	t.Helper()
	const slots, workers, rounds = 4, 16, 60
	l := limits.Limit{Algorithm: limits.Concurrency, Requests: slots, Period: time.Minute}
	var holding, most, taken atomic.Int64
	errs := make(chan error, workers)
	for range workers {
		go func() {
			var err error
			defer func() { errs <- err }()
			res := make([]limits.Result, 1)
			for range rounds {
				store.Decide(t.Context(), []limits.Hit{{Key: key, Limit: l, Cost: 1}}, res)
				if err = res[0].Err; err != nil {
					return
				}
				if !res[0].Allowed {
					time.Sleep(time.Millisecond) // a hold's length: refused acquires count until undone
					continue
				}
				taken.Add(1)
				h := holding.Add(1)
				for m := most.Load(); h > m && !most.CompareAndSwap(m, h); m = most.Load() {
				}
				time.Sleep(time.Millisecond)
				holding.Add(-1)
				store.Decide(t.Context(), []limits.Hit{{Key: key, Limit: l, Cost: -1}}, res)
				if err = res[0].Err; err != nil {
					return
				}
			}
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if m := most.Load(); m > slots {
		t.Fatalf("%d goroutines held a slot at once, above the %d slots", m, slots)
	}
	if n := taken.Load(); n <= slots {
		t.Fatalf("%d acquires allowed: the released slots were not reused", n)
	}
	t.Logf("%d acquires allowed, at most %d slots of %d held at once", taken.Load(), most.Load(), slots)
	// A shared store may undo a refused acquire after its answer (the
	// Redis store does, docs/semantics.md): its slot is free once the
	// undo lands, so the peek waits for it, never for longer than 10 s.
	res := make([]limits.Result, 1)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		store.Decide(t.Context(), []limits.Hit{{Key: key, Limit: l, Cost: 0}}, res)
		if res[0].Err == nil && res[0].Remaining == slots {
			break
		}
		if res[0].Err != nil || time.Now().After(deadline) {
			t.Fatalf("after every release: %+v, want all %d slots free", res[0], slots)
		}
	}
}
