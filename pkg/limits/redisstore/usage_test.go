package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// TestMemoryUsage reports what one key costs in Redis (MEMORY USAGE, every
// element sampled) for each algorithm, with a key as the service builds it,
// and for sliding logs full at N = 100, 1000 and MaxLogRequests: the figures
// behind the sizing advice of the README. It fails only if a key is missing
// or a log is not as full as it should be.
func TestMemoryUsage(t *testing.T) {
	var now int64 = 1_767_225_600_000_000
	s, c, _ := setup(t, Options{Clock: func() int64 { return now }})
	ctx := context.Background()
	usage := func(key string) int64 {
		t.Helper()
		n, err := c.MemoryUsage(ctx, key, 0).Result()
		if err != nil {
			t.Fatalf("MEMORY USAGE %s: %v", key, err)
		}
		return n
	}
	keyOf := func(l limits.Limit, index int) string {
		return descriptors.Key(descriptors.KeyInput{
			Index:   index,
			Domain:  "api",
			Entries: []descriptors.Entry{{Key: "user", Value: "alice"}, {Key: "path", Value: "/v1/orders"}},
			Limit:   l,
		})
	}
	for _, alg := range implemented {
		l := allowing(alg, 100)
		key := keyOf(l, 0)
		for i := range 2 {
			// Two hits, so that the sliding window has both counters.
			if r := decideOne(t, s, limits.Hit{Key: key, Limit: l, Cost: 1}); r.Err != nil || !r.Allowed {
				t.Fatalf("%s hit %d: %+v", l, i, r)
			}
			now += time.Hour.Microseconds() / 2
		}
		if isWindow(alg) {
			// A counter per window: the last one's.
			key = windowKey(key, floorDiv(now-time.Hour.Microseconds()/2, l.PeriodMicros()))
		}
		t.Logf("%-14s one key (%d-byte name): %4d bytes", alg, len(key), usage(key))
	}
	for _, n := range []int64{100, 1000, limits.MaxLogRequests} {
		l := limits.Limit{Algorithm: limits.SlidingLog, Requests: n, Period: time.Hour}
		key := keyOf(l, int(n))
		hits := make([]limits.Hit, n)
		for i := range hits {
			hits[i] = limits.Hit{Key: key, Limit: l, Cost: 1}
		}
		// A hundred hits per call, one call per µs.
		res := make([]limits.Result, 100)
		for i := 0; i < len(hits); i += len(res) {
			s.Decide(ctx, hits[i:i+len(res)], res)
			for k, r := range res {
				if r.Err != nil || !r.Allowed {
					t.Fatalf("%s hit %d: %+v", l, i+k, r)
				}
			}
			now++
		}
		if got := c.ZCard(ctx, key).Val(); got != n {
			t.Fatalf("%s: %d entries, want %d", l, got, n)
		}
		u := usage(key)
		t.Logf("sliding_log    N=%-5d full (%d-byte name): %7d bytes, %.1f per entry", n, len(key), u, float64(u)/float64(n))
	}
	for _, n := range []int64{10, 100, 1000} {
		// Every slot held, one hit each.
		l := limits.Limit{Algorithm: limits.Concurrency, Requests: n, Period: 30 * time.Second}
		key := keyOf(l, int(n))
		for i := range n {
			if r := decideOne(t, s, limits.Hit{Key: key, Limit: l, Cost: 1}); r.Err != nil || !r.Allowed {
				t.Fatalf("%s hit %d: %+v", l, i, r)
			}
			now++
		}
		if got := c.ZCard(ctx, key).Val(); got != n {
			t.Fatalf("%s: %d slots, want %d", l, got, n)
		}
		u := usage(key)
		t.Logf("concurrency    N=%-5d held (%d-byte name): %7d bytes, %.1f per slot", n, len(key), u, float64(u)/float64(n))
	}
}
