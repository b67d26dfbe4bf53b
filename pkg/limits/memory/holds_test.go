package memory_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/memory"
	"github.com/envoy-rls/envoy-rls/pkg/limits/storetest"
)

// TestHoldsAcross: the embedded store is one process's own, so its two
// "instances" are the same store.
func TestHoldsAcross(t *testing.T) {
	storetest.HoldsAcross(t, func(t *testing.T, clock func() int64) (limits.Store, limits.Store) {
		s := memory.New(memory.Options{Now: clock})
		t.Cleanup(func() { s.Close() })
		return s, s
	})
}

// hold is a hit of limit l on key with a Hold of id and lease.
func hold(key string, l limits.Limit, cost int64, id string, settle bool, lease time.Duration) limits.Hit {
	return limits.Hit{Key: key, Limit: l, Cost: cost, Hold: limits.Hold{ID: id, Settle: settle, Lease: lease}}
}

func decideOne(t testing.TB, s *memory.Store, h limits.Hit) limits.Result {
	t.Helper()
	r := make([]limits.Result, 1)
	s.Decide(context.Background(), []limits.Hit{h}, r)
	if r[0].Err != nil {
		t.Fatalf("Decide(%q): %v", h.Key, r[0].Err)
	}
	return r[0]
}

// TestJanitorGivesBackLapsedHolds: holds on keys nobody decides again are
// given back and dropped by the janitor, their keys with them once their
// state has expired too.
func TestJanitorGivesBackLapsedHolds(t *testing.T) {
	clock := newFakeClock()
	s := memory.New(memory.Options{SweepInterval: time.Millisecond, Now: clock.Load})
	defer s.Close()
	l := limits.Limit{Algorithm: limits.TokenBucket, Requests: 10, Period: time.Second}
	for i := range 3 {
		if r := decideOne(t, s, hold(fmt.Sprint("k", i), l, 5, "r", false, time.Minute)); r.Hold != limits.HoldReserved {
			t.Fatalf("reserve: %+v", r)
		}
	}
	if st := s.Stats(); st.Keys != 3 || st.Holds != 3 {
		t.Fatalf("Stats() %+v, want 3 keys with a hold each", st)
	}
	clock.advance(time.Minute)
	deadline := time.Now().Add(10 * time.Second)
	for st := s.Stats(); st.Keys != 0 || st.Holds != 0; st = s.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("Stats() %+v 10 s after the lapse: want nothing kept", st)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestLapseBeforeTheNextDecision: a lapsed hold is given back before the
// first decision that reads its key, not after it.
func TestLapseBeforeTheNextDecision(t *testing.T) {
	clock := newFakeClock()
	s := memory.New(memory.Options{SweepInterval: -1, Now: clock.Load})
	defer s.Close()
	l := limits.Limit{Algorithm: limits.FixedWindow, Requests: 10, Period: time.Hour}
	decideOne(t, s, hold("k", l, 8, "r", false, time.Second))
	clock.advance(time.Second)
	if r := decideOne(t, s, hold("k", l, 10, "", false, time.Second)); !r.Allowed || r.Remaining != 0 {
		t.Fatalf("a hit of the whole limit after the lapse: %+v, want allowed", r)
	}
	if st := s.Stats(); st.Holds != 0 {
		t.Fatalf("Stats() %+v, want the lapsed hold dropped", st)
	}
}

// TestHoldsCountAgainstMaxKeys: holds weigh as keys, so a store full of
// holds evicts keys to stay within MaxKeys.
func TestHoldsCountAgainstMaxKeys(t *testing.T) {
	const maxKeys = 100
	clock := newFakeClock()
	s := memory.New(memory.Options{MaxKeys: maxKeys, SweepInterval: -1, Now: clock.Load})
	defer s.Close()
	l := limits.Limit{Algorithm: limits.FixedWindow, Requests: 1000, Period: time.Hour}
	for i := range 300 {
		key := fmt.Sprint("k", i%30)
		if r := decideOne(t, s, hold(key, l, 1, fmt.Sprint("r", i), false, time.Hour)); r.Hold != limits.HoldReserved {
			t.Fatalf("reserve %d: %+v", i, r)
		}
		if st := s.Stats(); st.Keys+st.Holds > maxKeys {
			t.Fatalf("after %d reserves: Stats() %+v, keys and holds above %d", i+1, st, maxKeys)
		}
	}
	if st := s.Stats(); st.Evictions == 0 {
		t.Fatalf("Stats() %+v: want evictions", st)
	}
}

// TestHoldDecideAllocs: a hit of a holds domain without an id (its Lease
// set) allocates nothing, nor does a repeated reserve.
func TestHoldDecideAllocs(t *testing.T) {
	s := memory.New(memory.Options{})
	defer s.Close()
	l := limits.Limit{Algorithm: limits.SlidingWindow, Requests: limits.MaxRequests, Period: time.Hour}
	ctx := context.Background()
	results := make([]limits.Result, 1)
	for _, h := range []limits.Hit{
		hold("k", l, 1, "", false, time.Minute),
		hold("k", l, 1, "r1", false, time.Minute),
	} {
		hits := []limits.Hit{h}
		s.Decide(ctx, hits, results)
		if got := testing.AllocsPerRun(2000, func() { s.Decide(ctx, hits, results) }); got != 0 {
			t.Errorf("hold %+v: allocations per decision got %v want 0", h.Hold, got)
		}
	}
}

// BenchmarkMemoryPerHold measures the heap an open hold takes in the
// store: 100,000 holds of request ids shaped like Envoy's x-request-id (a
// UUID, 36 bytes), on 100 keys. It reports B/hold; its time means nothing.
func BenchmarkMemoryPerHold(b *testing.B) {
	var perHold float64
	for b.Loop() {
		perHold = heapPerHold(b, 100_000, 100)
	}
	b.ReportMetric(perHold, "B/hold")
	b.ReportMetric(float64(1<<30)/perHold, "holds/GiB")
}

func heapPerHold(b *testing.B, holds, keys int) float64 {
	b.Helper()
	clock := newFakeClock()
	s := memory.New(memory.Options{MaxKeys: 20 * holds, SweepInterval: -1, Now: clock.Load})
	defer s.Close()
	l := limits.Limit{Algorithm: limits.FixedWindow, Requests: limits.MaxRequests, Period: time.Hour}
	hit := []limits.Hit{hold("", l, 1000, "", false, 10*time.Minute)}
	results := make([]limits.Result, 1)
	for k := range keys {
		hit[0].Key = fmt.Sprintf("rls:{%016x}:fw:3600000000:0:3:llm:api_key%d", k, k)
		s.Decide(context.Background(), hit, results)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range holds {
		hit[0].Key = fmt.Sprintf("rls:{%016x}:fw:3600000000:0:3:llm:api_key%d", i%keys, i%keys)
		hit[0].Hold.ID = fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", i, i%0xffff, i%0xfff, i%0xfff, i)
		s.Decide(context.Background(), hit, results)
		if results[0].Hold != limits.HoldReserved {
			b.Fatalf("reserve %d: %+v", i, results[0])
		}
	}
	hit[0].Hold.ID = ""
	runtime.GC()
	runtime.ReadMemStats(&after)
	if st := s.Stats(); st.Holds != holds {
		b.Fatalf("Stats() %+v: want %d holds", st, holds)
	}
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(holds)
}
