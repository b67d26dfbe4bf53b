package redisstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// BenchmarkDecide measures one Decide call against a local Redis with the
// server's TIME, as in production: one hit, and a batch of eight hits on
// distinct keys (one pipeline). The limit is high, so that every hit is
// allowed and writes, the costlier path.
func BenchmarkDecide(b *testing.B) {
	srv := redistest.Start(b)
	c := newClient(b, ClientOptions{URL: srv.URL(), Timeout: time.Second})
	s := New(c, Options{})
	ctx := context.Background()
	for _, alg := range implemented {
		l := limits.Limit{Algorithm: alg, Requests: limits.MaxRequests, Period: time.Hour}
		for _, batch := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s/batch=%d", alg, batch), func(b *testing.B) {
				hits := make([]limits.Hit, batch)
				for i := range hits {
					hits[i] = limits.Hit{Key: fmt.Sprintf("bench:%s:%d", alg, i), Limit: l, Cost: 1}
				}
				res := make([]limits.Result, batch)
				b.ReportAllocs()
				for b.Loop() {
					s.Decide(ctx, hits, res)
					if res[0].Err != nil || !res[0].Allowed {
						b.Fatalf("got %+v", res[0])
					}
				}
			})
		}
	}
}
