package memory_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/memory"
	"github.com/envoy-rls/envoy-rls/pkg/limits/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, clock func() int64) limits.Store {
		s := memory.New(memory.Options{Now: clock})
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// fakeClock is a settable clock in microseconds, safe to read from the
// janitor while a test sets it.
type fakeClock struct{ atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.Store(storetest.Start)
	return c
}

func (c *fakeClock) advance(d time.Duration) { c.Add(d.Microseconds()) }

var (
	hour   = limits.Limit{Algorithm: limits.FixedWindow, Requests: 2, Period: time.Hour}
	second = limits.Limit{Algorithm: limits.FixedWindow, Requests: 2, Period: time.Second}
)

func decide(t *testing.T, s *memory.Store, key string, l limits.Limit, cost int64) limits.Result {
	t.Helper()
	r := make([]limits.Result, 1)
	s.Decide(context.Background(), []limits.Hit{{Key: key, Limit: l, Cost: cost}}, r)
	if r[0].Err != nil {
		t.Fatalf("Decide(%q): %v", key, r[0].Err)
	}
	return r[0]
}

// remaining peeks at key: how much of limit l it has left, N if the store
// has forgotten it.
func remaining(t *testing.T, s *memory.Store, key string, l limits.Limit) int64 {
	t.Helper()
	return decide(t, s, key, l, 0).Remaining
}

func wantStats(t *testing.T, s *memory.Store, want memory.Stats) {
	t.Helper()
	if got := s.Stats(); got != want {
		t.Errorf("Stats() got %+v want %+v", got, want)
	}
}

func TestConcurrentHitsOnOneKey(t *testing.T) {
	// With the real clock, a fixed window could restart during the test if
	// it ran across an hour boundary: start well clear of one.
	if left := time.Hour - time.Duration(time.Now().UnixNano())%time.Hour; left < 5*time.Second {
		time.Sleep(left + 10*time.Millisecond)
	}
	for _, a := range []limits.Algorithm{limits.FixedWindow, limits.SlidingWindow, limits.TokenBucket} {
		t.Run(a.String(), func(t *testing.T) {
			s := memory.New(memory.Options{})
			defer s.Close()
			l := limits.Limit{Algorithm: a, Requests: 100, Period: time.Hour}
			const goroutines, hits = 32, 50
			var allowed atomic.Int64
			var wg sync.WaitGroup
			for range goroutines {
				wg.Go(func() {
					r := make([]limits.Result, 1)
					h := []limits.Hit{{Key: "k", Limit: l, Cost: 1}}
					for range hits {
						s.Decide(context.Background(), h, r)
						if r[0].Allowed {
							allowed.Add(1)
						}
					}
				})
			}
			wg.Wait()
			if got := allowed.Load(); got != 100 {
				t.Errorf("allowed got %d want 100 of %d", got, goroutines*hits)
			}
		})
	}
}

func TestEvictsExpiredKeysFirst(t *testing.T) {
	clock := newFakeClock()
	s := memory.New(memory.Options{MaxKeys: 4, SweepInterval: -1, Now: clock.Load})
	defer s.Close()
	// Oldest first: "old" is the least recently used, "short" expires
	// first (its 1 s window ends while the hour windows go on).
	decide(t, s, "old", hour, 1)
	decide(t, s, "short", second, 1)
	decide(t, s, "c", hour, 1)
	decide(t, s, "d", hour, 1)
	clock.advance(time.Second)

	decide(t, s, "e", hour, 1) // full: "short" goes, though "old" is older
	wantStats(t, s, memory.Stats{Keys: 4, Evictions: 0, Expired: 1})
	if got := remaining(t, s, "old", hour); got != 1 {
		t.Errorf("old: remaining got %d want 1 (kept)", got)
	}

	// Nothing is expired: the least recently used goes. "old" was just
	// peeked at, so that is "c".
	decide(t, s, "f", hour, 1)
	wantStats(t, s, memory.Stats{Keys: 4, Evictions: 1, Expired: 1})
	for key, want := range map[string]int64{"old": 1, "d": 1, "e": 1, "f": 1} {
		if got := remaining(t, s, key, hour); got != want {
			t.Errorf("%s: remaining got %d want %d (kept)", key, got, want)
		}
	}
	// "c" was forgotten: it starts over. Inserting it evicts the least
	// recently used again.
	if got := decide(t, s, "c", hour, 1).Remaining; got != 1 {
		t.Errorf("c: remaining got %d want 1 (forgotten, then hit once)", got)
	}
	wantStats(t, s, memory.Stats{Keys: 4, Evictions: 2, Expired: 1})
}

func TestPeeksAndRefusalsDoNotStoreKeys(t *testing.T) {
	clock := newFakeClock()
	s := memory.New(memory.Options{MaxKeys: 2, SweepInterval: -1, Now: clock.Load})
	defer s.Close()
	decide(t, s, "a", hour, 1)
	decide(t, s, "b", hour, 1)
	for i := range 10 {
		key := fmt.Sprint("peek", i)
		decide(t, s, key, hour, 0)
		decide(t, s, key, hour, 3) // can never fit
		decide(t, s, key, hour, -1)
	}
	wantStats(t, s, memory.Stats{Keys: 2})
}

func TestExpiredKeyIsRemovedOnAccess(t *testing.T) {
	clock := newFakeClock()
	s := memory.New(memory.Options{SweepInterval: -1, Now: clock.Load})
	defer s.Close()
	decide(t, s, "a", second, 1)
	decide(t, s, "b", hour, 1)
	clock.advance(time.Second)
	if got := remaining(t, s, "a", second); got != 2 {
		t.Errorf("remaining got %d want 2", got)
	}
	wantStats(t, s, memory.Stats{Keys: 1, Expired: 1})
}

func TestKeysNeverAboveMaxKeys(t *testing.T) {
	for _, maxKeys := range []int{1, 3, 100, 2048} { // 2048: two shards
		t.Run(fmt.Sprint(maxKeys), func(t *testing.T) {
			clock := newFakeClock()
			s := memory.New(memory.Options{MaxKeys: maxKeys, SweepInterval: -1, Now: clock.Load})
			defer s.Close()
			algs := []limits.Algorithm{limits.FixedWindow, limits.SlidingWindow, limits.TokenBucket}
			hits := make([]limits.Hit, 0, 8)
			results := make([]limits.Result, 8)
			for i := range maxKeys + 100 {
				if i%7 == 0 {
					clock.advance(time.Duration(i%1000) * time.Millisecond)
				}
				hits = hits[:0]
				for j := range 8 {
					a := algs[(i+j)%3]
					hits = append(hits, limits.Hit{
						Key:   fmt.Sprint(a.ShortName(), (i*8+j)%(3*maxKeys)),
						Limit: limits.Limit{Algorithm: a, Requests: 3, Period: time.Duration(1+i%5) * time.Second},
						Cost:  int64(j%4) - 1,
					})
				}
				s.Decide(context.Background(), hits, results)
				if st := s.Stats(); st.Keys > maxKeys {
					t.Fatalf("after call %d: keys got %d want at most %d", i, st.Keys, maxKeys)
				}
			}
			st := s.Stats()
			if st.Evictions+st.Expired == 0 {
				t.Errorf("Stats() %+v: want keys dropped to make room", st)
			}
			t.Logf("Stats() %+v", st)
			// Once everything has expired, every key decides as new.
			clock.advance(time.Minute)
			for _, h := range hits {
				if got := remaining(t, s, h.Key, h.Limit); got != 3 {
					t.Errorf("%s after a minute: remaining got %d want 3", h.Key, got)
				}
			}
		})
	}
}

func TestJanitorSweepsExpiredKeys(t *testing.T) {
	clock := newFakeClock()
	s := memory.New(memory.Options{SweepInterval: time.Millisecond, Now: clock.Load})
	defer s.Close()
	for i := range 1000 {
		decide(t, s, fmt.Sprint("k", i), second, 1)
	}
	decide(t, s, "long", hour, 1)
	clock.advance(time.Second)
	deadline := time.Now().Add(5 * time.Second)
	for s.Stats().Keys != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("Stats() got %+v: want the 1000 expired keys swept", s.Stats())
		}
		time.Sleep(time.Millisecond)
	}
	wantStats(t, s, memory.Stats{Keys: 1, Expired: 1000})
	if got := remaining(t, s, "long", hour); got != 1 {
		t.Errorf("long: remaining got %d want 1 (kept)", got)
	}
}

func TestCloseIsIdempotentAndStoreStillDecides(t *testing.T) {
	s := memory.New(memory.Options{SweepInterval: time.Millisecond})
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if r := decide(t, s, "a", hour, 1); !r.Allowed || r.Remaining != 1 {
		t.Errorf("after Close got %+v want allowed, remaining 1", r)
	}
	// A store without a janitor closes too.
	if err := memory.New(memory.Options{SweepInterval: -1}).Close(); err != nil {
		t.Fatalf("Close without janitor: %v", err)
	}
}

func TestInvalidLimitIsAnError(t *testing.T) {
	s := memory.New(memory.Options{SweepInterval: -1})
	defer s.Close()
	hits := []limits.Hit{
		{Key: "zero", Limit: limits.Limit{Algorithm: limits.FixedWindow, Period: time.Second}, Cost: 1},
		{Key: "ok", Limit: hour, Cost: 1},
		{Key: "no period", Limit: limits.Limit{Algorithm: limits.TokenBucket, Requests: 1}, Cost: 1},
	}
	r := make([]limits.Result, len(hits))
	s.Decide(context.Background(), hits, r)
	if r[0].Err == nil || r[2].Err == nil {
		t.Errorf("invalid limits: got errors %v, %v, want both set", r[0].Err, r[2].Err)
	}
	if r[1].Err != nil || !r[1].Allowed {
		t.Errorf("valid limit beside invalid ones: got %+v want allowed", r[1])
	}
}

func BenchmarkDecide(b *testing.B) {
	for _, a := range []limits.Algorithm{limits.FixedWindow, limits.SlidingWindow, limits.TokenBucket} {
		b.Run(a.String(), func(b *testing.B) {
			s := memory.New(memory.Options{})
			defer s.Close()
			// Never refused, so every hit writes the state.
			hits := []limits.Hit{{Key: "descriptor-key", Limit: limits.Limit{Algorithm: a, Requests: limits.MaxRequests, Period: time.Hour}, Cost: 1}}
			results := make([]limits.Result, 1)
			s.Decide(context.Background(), hits, results)
			b.ReportAllocs()
			for b.Loop() {
				s.Decide(context.Background(), hits, results)
			}
			if !results[0].Allowed {
				b.Fatalf("got %+v want allowed", results[0])
			}
		})
	}
}

func BenchmarkDecideParallel(b *testing.B) {
	s := memory.New(memory.Options{})
	defer s.Close()
	l := limits.Limit{Algorithm: limits.SlidingWindow, Requests: limits.MaxRequests, Period: time.Hour}
	keys := make([]string, 4096)
	for i := range keys {
		keys[i] = fmt.Sprint("descriptor-key-", i)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		hits := []limits.Hit{{Limit: l, Cost: 1}}
		results := make([]limits.Result, 1)
		i := 0
		for pb.Next() {
			hits[0].Key = keys[i%len(keys)]
			s.Decide(context.Background(), hits, results)
			i++
		}
	})
}
