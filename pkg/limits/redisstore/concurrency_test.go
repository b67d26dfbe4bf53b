package redisstore

import (
	"reflect"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/memory"
	"github.com/envoy-rls/envoy-rls/pkg/limits/storetest"
)

// checkSlots compares a concurrency limit's live members, as inspect read
// them (one member per slot, scored by its lease's end), with the model's
// slots, as checkLog does a log's (checkMembers).
func checkSlots(t *testing.T, where string, in inspection, q *sequence, now, elapsedMs int64) bool {
	t.Helper()
	return checkMembers(t, where, in, q, now, now, elapsedMs)
}

// TestConcurrencyHolders: goroutines that take and give back slots on one
// key, through one store on Redis's clock, never hold more than its slots
// at once, and leave none held.
func TestConcurrencyHolders(t *testing.T) {
	s, _, _ := setup(t, Options{})
	t.Cleanup(s.Close)
	storetest.Holders(t, s, "holders")
}

// TestSlots: Slots lists the live slots of a concurrency key as the
// embedded store does, grouped by expiry, oldest first, past ones left out.
func TestSlots(t *testing.T) {
	var now int64 = 1_767_225_600_000_000
	s, _, _ := setup(t, Options{Clock: func() int64 { return now }})
	mem := memory.New(memory.Options{Now: func() int64 { return now }})
	t.Cleanup(func() { _ = mem.Close() })
	l := limits.Limit{Algorithm: limits.Concurrency, Requests: 10, Period: 10 * time.Second}
	h := limits.Hit{Key: "slots", Limit: l}
	for _, step := range []struct{ wait, cost int64 }{{0, 2}, {3_000_000, 1}, {0, 1}, {8_000_000, 3}} {
		now += step.wait
		h.Cost = step.cost
		for _, st := range []limits.Store{s, mem} {
			res := make([]limits.Result, 1)
			st.Decide(t.Context(), []limits.Hit{h}, res)
			if r := res[0]; r.Err != nil || !r.Allowed {
				t.Fatalf("%T: %+v", st, r)
			}
		}
	}
	want := []limits.LogEntry{{At: now - 8_000_000 + 10_000_000, Cost: 2}, {At: now + 10_000_000, Cost: 3}}
	for _, st := range []limits.Store{s, mem} {
		got, at, err := limits.Slots(t.Context(), st, h)
		if err != nil || at != now || !reflect.DeepEqual(got, want) {
			t.Errorf("%T: slots %v at %d (%v), want %v at %d", st, got, at, err, want, now)
		}
	}
}
