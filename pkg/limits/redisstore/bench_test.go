package redisstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// benchLimit is a limit of alg under which every hit of a benchmark is
// allowed and writes, the costlier path: the largest windows and buckets, a
// leaky bucket with the shortest turns and an endless queue, and a sliding
// log of MaxLogRequests over 100 ms, which holds a few thousand entries at
// the rates of a local Redis and trims as it goes.
func benchLimit(alg limits.Algorithm) limits.Limit {
	l := limits.Limit{Algorithm: alg, Requests: limits.MaxRequests, Period: time.Hour}
	switch alg {
	case limits.SlidingLog:
		l.Requests, l.Period = limits.MaxLogRequests, 100*time.Millisecond
	case limits.LeakyBucket:
		// Turns as close as a leaky bucket allows (MinLeakyInterval), and
		// a queue that never fills: hits wait their turn, never refused.
		l.Requests = int64(time.Hour / limits.MinLeakyInterval)
		l.Burst = limits.MaxRequests
	}
	return l
}

// BenchmarkDecide measures one Decide call against a local Redis with the
// server's TIME, as in production: one hit, a batch of eight hits on distinct
// keys (one pipeline), and a joint run of two limits.
func BenchmarkDecide(b *testing.B) {
	srv := redistest.Start(b)
	c := newClient(b, ClientOptions{URL: srv.URL(), Timeout: time.Second})
	s := New(c, Options{})
	for _, alg := range implemented {
		l := benchLimit(alg)
		for _, shape := range []struct {
			name  string
			n     int
			joint bool
		}{{"batch=1", 1, false}, {"batch=8", 8, false}, {"joint=2", 2, true}} {
			b.Run(alg.String()+"/"+shape.name, func(b *testing.B) {
				hits := make([]limits.Hit, shape.n)
				for i := range hits {
					hits[i] = limits.Hit{Key: fmt.Sprintf("{bench:%s:%s}:%d", alg, shape.name, i), Limit: l, Cost: 1}
					hits[i].Joint = shape.joint && i < len(hits)-1
				}
				benchHits(b, s, hits, true)
			})
		}
	}
	// A client over its limit: a full sliding log of 1000 refuses, walking
	// its oldest entry for the wait.
	b.Run("sliding_log/refused/full=1000", func(b *testing.B) {
		l := limits.Limit{Algorithm: limits.SlidingLog, Requests: 1000, Period: time.Hour}
		fill := make([]limits.Hit, 100)
		for i := range fill {
			fill[i] = limits.Hit{Key: "bench:sl:full", Limit: l, Cost: 1}
		}
		res := make([]limits.Result, len(fill))
		for range 10 {
			s.Decide(context.Background(), fill, res)
		}
		benchHits(b, s, fill[:1], false)
	})
}

// benchHits decides hits in a loop, and fails unless every result is
// allowed, or refused when allowed is false.
func benchHits(b *testing.B, s *Store, hits []limits.Hit, allowed bool) {
	b.Helper()
	ctx := context.Background()
	res := make([]limits.Result, len(hits))
	b.ReportAllocs()
	for b.Loop() {
		s.Decide(ctx, hits, res)
		for _, r := range res {
			if r.Err != nil || r.Allowed != allowed {
				b.Fatalf("got %+v, want allowed %v", r, allowed)
			}
		}
	}
}
