package memory_test

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/memory"
)

// boundKeys is how many distinct keys TestMemoryBound inserts: 1,000,000,
// or RLS_MEMORY_KEYS; -short takes a tenth.
func boundKeys(t *testing.T) int {
	n := 1_000_000
	if v := os.Getenv("RLS_MEMORY_KEYS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			t.Fatalf("RLS_MEMORY_KEYS=%q: want a positive number", v)
		}
	}
	if testing.Short() {
		n /= 10
	}
	return n
}

// boundKey is a key shaped like the service's (about 70 bytes), distinct
// for each i.
func boundKey(buf []byte, i int) []byte {
	buf = append(buf[:0], "rls:{"...)
	buf = strconv.AppendUint(buf, uint64(i)*0x9e3779b97f4a7c15, 16)
	buf = append(buf, "}:fw:3600000000:0:4:edge14:remote_address"...)
	return strconv.AppendInt(buf, int64(i), 10)
}

// TestMemoryBound inserts ten times MaxKeys distinct live keys into the
// embedded store: it never holds more than MaxKeys, the heap stays within a
// bound proportional to MaxKeys, and every key beyond the bound is counted
// as an eviction. Then, once some keys have expired, new keys take the
// place of expired ones, not of live ones.
func TestMemoryBound(t *testing.T) {
	total := boundKeys(t)
	maxKeys := total / 10
	// heapBound is 1 kB per key of MaxKeys, a few times what a key of this
	// shape takes (BenchmarkMemoryPerKey), so that only a store that keeps
	// more than MaxKeys, or leaks, exceeds it.
	heapBound := uint64(maxKeys) * 1000

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	clock := newFakeClock()
	s := memory.New(memory.Options{MaxKeys: maxKeys, SweepInterval: -1, Now: clock.Load})
	defer s.Close()
	hour := limits.Limit{Algorithm: limits.FixedWindow, Requests: 10, Period: time.Hour}
	second := limits.Limit{Algorithm: limits.FixedWindow, Requests: 10, Period: time.Second}
	limitOf := func(i int) limits.Limit {
		if i%2 == 1 {
			return second
		}
		return hour
	}
	hit := []limits.Hit{{Cost: 1}}
	results := make([]limits.Result, 1)
	var buf []byte
	insert := func(i int, l limits.Limit) {
		buf = boundKey(buf, i)
		hit[0].Key, hit[0].Limit = string(buf), l
		s.Decide(context.Background(), hit, results)
		if !results[0].Allowed || results[0].Remaining != l.Requests-1 {
			t.Fatalf("key %d: got %+v want allowed with %d remaining (a new key)", i, results[0], l.Requests-1)
		}
	}

	start := time.Now()
	// Every other key has a one-second window, which the clock (standing
	// still) does not end yet: all are live.
	for i := range total {
		insert(i, limitOf(i))
		if (i+1)%max(total/100, 1) == 0 {
			st := s.Stats()
			if st.Keys > maxKeys {
				t.Fatalf("after %d keys: Stats() %+v, want at most %d keys", i+1, st, maxKeys)
			}
			if got := uint64(st.Keys) + st.Evictions; got != uint64(i+1) || st.Expired != 0 {
				t.Fatalf("after %d keys: Stats() %+v, want keys+evictions = %d and nothing expired", i+1, st, i+1)
			}
		}
	}
	elapsed := time.Since(start)
	runtime.GC()
	runtime.ReadMemStats(&after)
	st := s.Stats()
	want := memory.Stats{Keys: maxKeys, Evictions: uint64(total - maxKeys)}
	if st != want {
		t.Errorf("after %d keys: Stats() %+v, want %+v", total, st, want)
	}
	heap := after.HeapAlloc - min(before.HeapAlloc, after.HeapAlloc)
	t.Logf("%d keys into MaxKeys %d in %v: Stats() %+v; heap %.1f MB (%.0f B per key held; bound %.0f MB)",
		total, maxKeys, elapsed.Round(time.Millisecond), st, float64(heap)/1e6, float64(heap)/float64(st.Keys), float64(heapBound)/1e6)
	if heap > heapBound {
		t.Errorf("heap grew by %d bytes, want at most %d (1 kB per key of MaxKeys)", heap, heapBound)
	}
	// The most recent keys are held, the first ones forgotten.
	for _, i := range []int{total - 1, total - 2} {
		buf = boundKey(buf, i)
		if got := remaining(t, s, string(buf), limitOf(i)); got != hour.Requests-1 {
			t.Errorf("key %d (recent): remaining got %d want %d (held)", i, got, hour.Requests-1)
		}
	}
	buf = boundKey(buf, 0)
	if got := remaining(t, s, string(buf), hour); got != hour.Requests {
		t.Errorf("key 0 (first): remaining got %d want %d (evicted)", got, hour.Requests)
	}

	// Which keys are held: each shard keeps its own most recent keys, so
	// they are about, not exactly, the last MaxKeys.
	var held []int
	heldSecond := 0
	for i := max(total-maxKeys*5/4, 0); i < total; i++ {
		buf = boundKey(buf, i)
		if remaining(t, s, string(buf), limitOf(i)) == hour.Requests-1 {
			if limitOf(i) == hour {
				held = append(held, i)
			} else {
				heldSecond++
			}
		}
	}
	if len(held)+heldSecond != maxKeys {
		t.Fatalf("found %d+%d keys held among the last %d, want %d", len(held), heldSecond, maxKeys*5/4, maxKeys)
	}

	// The one-second keys, about half of each shard, expire. A quarter of
	// MaxKeys new keys (about half the expired ones of any shard) take
	// their places: no live key is evicted.
	clock.advance(time.Second)
	fresh := maxKeys / 4
	for i := range fresh {
		insert(total+i, hour)
	}
	want = memory.Stats{Keys: maxKeys, Evictions: uint64(total - maxKeys), Expired: uint64(fresh)}
	if st := s.Stats(); st != want {
		t.Errorf("after %d keys more once %d had expired: Stats() %+v, want %+v (expired keys dropped, no live one)", fresh, heldSecond, st, want)
	}
	for _, i := range held {
		buf = boundKey(buf, i)
		if got := remaining(t, s, string(buf), hour); got != hour.Requests-1 {
			t.Fatalf("key %d (live): remaining got %d want %d (held while expired keys remained)", i, got, hour.Requests-1)
		}
	}
}
