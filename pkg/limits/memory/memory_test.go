package memory_test

import (
	"context"
	"fmt"
	"runtime"
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

	algorithms = []limits.Algorithm{limits.FixedWindow, limits.SlidingWindow, limits.TokenBucket, limits.SlidingLog, limits.LeakyBucket}
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
	for _, a := range algorithms {
		t.Run(a.String(), func(t *testing.T) {
			s := memory.New(memory.Options{})
			defer s.Close()
			// A leaky bucket takes B + 1 at once: one in service, B queued
			// (the next turn is 36 s away).
			l := limits.Limit{Algorithm: a, Requests: 100, Period: time.Hour}
			if a == limits.LeakyBucket {
				l.Burst = 99
			}
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
			hits := make([]limits.Hit, 0, 8)
			results := make([]limits.Result, 8)
			for i := range maxKeys + 100 {
				if i%7 == 0 {
					clock.advance(time.Duration(i%1000) * time.Millisecond)
				}
				hits = hits[:0]
				for j := range 8 {
					a := algorithms[(i+j)%len(algorithms)]
					hits = append(hits, limits.Hit{
						Key:   fmt.Sprint(a.ShortName(), (i*8+j)%(3*maxKeys)),
						Limit: limits.Limit{Algorithm: a, Requests: 3, Period: time.Duration(1+i%5) * time.Second, Burst: 3},
						Cost:  int64(j%4) - 1,
						// Some pairs are joint runs.
						Joint: j%4 == 1 && i%3 == 0,
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
		{Key: "negative", Limit: limits.Limit{Algorithm: limits.FixedWindow, Requests: -1, Period: time.Second}, Cost: 1},
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

func TestLogsCountAgainstMaxKeys(t *testing.T) {
	clock := newFakeClock()
	s := memory.New(memory.Options{MaxKeys: 20, SweepInterval: -1, Now: clock.Load})
	defer s.Close()
	for i := range 15 {
		decide(t, s, fmt.Sprint("k", i), hour, 1)
	}
	// A log of 100 entries grown by appends has room for 127 (each move
	// doubles it, plus one), and its room is what it weighs: 1 + 127/12
	// rounded up = 12 keys. 7 of the 15 others make room, the least recently used
	// first.
	log := limits.Limit{Algorithm: limits.SlidingLog, Requests: 100, Period: time.Hour}
	for i := range 100 {
		if r := decide(t, s, "log", log, 1); !r.Allowed {
			t.Fatalf("log hit %d refused: %+v", i, r)
		}
		clock.advance(time.Millisecond)
	}
	wantStats(t, s, memory.Stats{Keys: 9, Evictions: 7})
	for i := range 15 {
		want := int64(1)
		if i < 7 {
			want = 2 // evicted: starts over
		}
		if got := remaining(t, s, fmt.Sprint("k", i), hour); got != want {
			t.Errorf("k%d: remaining got %d want %d", i, got, want)
		}
	}
	if r := decide(t, s, "log", log, 1); r.Allowed {
		t.Errorf("log: hit 101 got %+v want refused", r)
	}
}

func TestHeavyLogIsKeptAlone(t *testing.T) {
	clock := newFakeClock()
	s := memory.New(memory.Options{MaxKeys: 5, SweepInterval: -1, Now: clock.Load})
	defer s.Close()
	decide(t, s, "other", hour, 1)
	log := limits.Limit{Algorithm: limits.SlidingLog, Requests: 100, Period: time.Hour}
	for range 100 {
		decide(t, s, "log", log, 1)
	}
	// The log outweighs the whole store: it stays, alone, and still limits.
	wantStats(t, s, memory.Stats{Keys: 1, Evictions: 1})
	if r := decide(t, s, "log", log, 1); r.Allowed || r.RetryAfter != time.Hour {
		t.Errorf("log: hit 101 got %+v want refused for an hour", r)
	}
}

func TestMaxDelayBelowAMicrosecondIsABound(t *testing.T) {
	clock := newFakeClock()
	s := memory.New(memory.Options{SweepInterval: -1, Now: clock.Load})
	defer s.Close()
	l := limits.Limit{Algorithm: limits.LeakyBucket, Requests: 10, Period: time.Second, Burst: 5}
	decide(t, s, "k", l, 1)
	r := make([]limits.Result, 1)
	s.Decide(context.Background(), []limits.Hit{{Key: "k", Limit: l, Cost: 1, MaxDelay: 500 * time.Nanosecond}}, r)
	if r[0].Allowed {
		t.Errorf("max delay 500ns, wait 100ms: got %+v want refused (not unbounded)", r[0])
	}
	s.Decide(context.Background(), []limits.Hit{{Key: "k", Limit: l, Cost: 1, MaxDelay: -time.Second}}, r)
	if !r[0].Allowed || r[0].Delay != 100*time.Millisecond {
		t.Errorf("negative max delay: got %+v want allowed after 100ms (no bound)", r[0])
	}
}

func TestJointRunWithAnInvalidLimitIsNotDecided(t *testing.T) {
	s := memory.New(memory.Options{SweepInterval: -1})
	defer s.Close()
	hits := []limits.Hit{
		{Key: "{t}a", Limit: hour, Cost: 1, Joint: true},
		{Key: "{t}b", Limit: limits.Limit{Algorithm: limits.FixedWindow, Requests: -1, Period: time.Second}, Cost: 1, Joint: true},
		{Key: "{t}c", Limit: hour, Cost: 1},
		{Key: "alone", Limit: hour, Cost: 1},
	}
	r := make([]limits.Result, len(hits))
	s.Decide(context.Background(), hits, r)
	for i := range 3 {
		if r[i].Err == nil {
			t.Errorf("run member %d: got %+v want an error", i, r[i])
		}
	}
	if r[3].Err != nil || !r[3].Allowed {
		t.Errorf("hit after the run: got %+v want allowed", r[3])
	}
	wantStats(t, s, memory.Stats{Keys: 1})
}

func TestRefusedRunStoresNoNewKeys(t *testing.T) {
	s := memory.New(memory.Options{MaxKeys: 3, SweepInterval: -1})
	defer s.Close()
	one := limits.Limit{Algorithm: limits.FixedWindow, Requests: 1, Period: time.Hour}
	decide(t, s, "{t}full", one, 1)
	for i := range 10 {
		hits := []limits.Hit{
			{Key: fmt.Sprint("{t}new", i), Limit: hour, Cost: 1, Joint: true},
			{Key: "{t}full", Limit: one, Cost: 1},
		}
		r := make([]limits.Result, 2)
		s.Decide(context.Background(), hits, r)
		if !r[0].Allowed || r[1].Allowed {
			t.Fatalf("run %d: got %+v want the first allowed, the second refused", i, r)
		}
	}
	wantStats(t, s, memory.Stats{Keys: 1})
}

// benchLimits are limits that never refuse in a benchmark, so that every
// hit writes its state. The sliding logs run at steady state: the clock
// moves T/N per hit, so each hit drops the oldest entry of a full log.
var benchLimits = []struct {
	name  string
	limit limits.Limit
	tick  time.Duration // fake clock step per Decide; 0: the process clock
}{
	{"fixed_window", limits.Limit{Algorithm: limits.FixedWindow, Requests: limits.MaxRequests, Period: time.Hour}, 0},
	{"sliding_window", limits.Limit{Algorithm: limits.SlidingWindow, Requests: limits.MaxRequests, Period: time.Hour}, 0},
	{"token_bucket", limits.Limit{Algorithm: limits.TokenBucket, Requests: limits.MaxRequests, Period: time.Hour}, 0},
	{"leaky_bucket", limits.Limit{Algorithm: limits.LeakyBucket, Requests: 10_000, Period: time.Second, Burst: limits.MaxRequests}, 0},
	{"sliding_log/N=100", limits.Limit{Algorithm: limits.SlidingLog, Requests: 100, Period: time.Second}, 10 * time.Millisecond},
	{"sliding_log/N=1000", limits.Limit{Algorithm: limits.SlidingLog, Requests: 1000, Period: time.Second}, time.Millisecond},
}

func benchStore(tick time.Duration) *memory.Store {
	if tick == 0 {
		return memory.New(memory.Options{})
	}
	clock := newFakeClock()
	return memory.New(memory.Options{Now: func() int64 { return clock.Add(tick.Microseconds()) }})
}

func BenchmarkDecide(b *testing.B) {
	for _, c := range benchLimits {
		b.Run(c.name, func(b *testing.B) {
			s := benchStore(c.tick)
			defer s.Close()
			hits := []limits.Hit{{Key: "descriptor-key", Limit: c.limit, Cost: 1}}
			results := make([]limits.Result, 1)
			for range 2 * c.limit.Requests * int64(min(c.tick, 1)) { // fill the logs
				s.Decide(context.Background(), hits, results)
			}
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

// BenchmarkDecideJoint is one descriptor's two limits, decided as a run.
func BenchmarkDecideJoint(b *testing.B) {
	s := memory.New(memory.Options{})
	defer s.Close()
	hits := []limits.Hit{
		{Key: "rls:{0123456789abcdef}:sw:3600000000:0:6:domain", Limit: limits.Limit{Algorithm: limits.SlidingWindow, Requests: limits.MaxRequests, Period: time.Hour}, Cost: 1, Joint: true},
		{Key: "rls:{0123456789abcdef}:tb:1000000:1:6:domain", Limit: limits.Limit{Algorithm: limits.TokenBucket, Requests: limits.MaxRequests, Period: time.Second}, Cost: 1},
	}
	results := make([]limits.Result, 2)
	b.ReportAllocs()
	for b.Loop() {
		s.Decide(context.Background(), hits, results)
	}
	if !results[0].Allowed || !results[1].Allowed {
		b.Fatalf("got %+v want both allowed", results)
	}
}

// BenchmarkMemoryPerKey measures the heap a key takes in the store, its key
// string included (keys like the service's, about 50 bytes), for each
// algorithm and for full sliding logs. It reports B/key, the heap grown by
// the second half of the keys over their number, so that the store's fixed
// start (each shard's first 1024 slots) is not counted; the time it reports
// means nothing.
func BenchmarkMemoryPerKey(b *testing.B) {
	for _, c := range []struct {
		name  string
		limit limits.Limit
		keys  int
		hits  int // per key
	}{
		{"fixed_window", limits.Limit{Algorithm: limits.FixedWindow, Requests: 100, Period: time.Hour}, 200_000, 1},
		{"sliding_window", limits.Limit{Algorithm: limits.SlidingWindow, Requests: 100, Period: time.Hour}, 200_000, 1},
		{"token_bucket", limits.Limit{Algorithm: limits.TokenBucket, Requests: 100, Period: time.Hour}, 200_000, 1},
		{"leaky_bucket", limits.Limit{Algorithm: limits.LeakyBucket, Requests: 100, Period: time.Hour, Burst: 10}, 200_000, 1},
		{"sliding_log/N=100_full", limits.Limit{Algorithm: limits.SlidingLog, Requests: 100, Period: time.Hour}, 20_000, 100},
		{"sliding_log/N=1000_full", limits.Limit{Algorithm: limits.SlidingLog, Requests: 1000, Period: time.Hour}, 2_000, 1000},
	} {
		b.Run(c.name, func(b *testing.B) {
			var perKey float64
			for b.Loop() {
				perKey = heapPerKey(b, c.limit, c.keys, c.hits)
			}
			b.ReportMetric(perKey, "B/key")
		})
	}
}

func heapPerKey(b *testing.B, l limits.Limit, keys, hits int) float64 {
	b.Helper()
	clock := newFakeClock()
	s := memory.New(memory.Options{MaxKeys: keys * (2 + hits), SweepInterval: -1, Now: clock.Load})
	defer s.Close()
	hit := []limits.Hit{{Limit: l, Cost: 1}}
	results := make([]limits.Result, 1)
	fill := func(from, to int) {
		for i := from; i < to; i++ {
			hit[0].Key = fmt.Sprintf("rls:{%016x}:%s:3600000000:0:3:api4:user%d", i, l.Algorithm.ShortName(), i)
			for range hits {
				s.Decide(context.Background(), hit, results)
				clock.advance(time.Microsecond)
			}
			if !results[0].Allowed {
				b.Fatalf("key %d: got %+v want allowed", i, results[0])
			}
		}
	}
	var half, full runtime.MemStats
	fill(0, keys/2)
	runtime.GC()
	runtime.ReadMemStats(&half)
	fill(keys/2, keys)
	runtime.GC()
	runtime.ReadMemStats(&full)
	if st := s.Stats(); st.Keys != keys {
		b.Fatalf("Stats() %+v: want %d keys", st, keys)
	}
	return float64(full.HeapAlloc-half.HeapAlloc) / float64(keys-keys/2)
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
