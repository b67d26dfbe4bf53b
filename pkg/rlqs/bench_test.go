package rlqs

import (
	"context"
	"fmt"
	"testing"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
	"github.com/envoy-rls/envoy-rls/pkg/rlqs/redisdemand"
)

// benchService answers with one report of 100 buckets, one bare-key value each, of 10
// Envoys' worth of clients already recorded.
func benchService(b *testing.B, store func() DemandStore) (*Service, *rlqspb.RateLimitQuotaUsageReports) {
	d, err := config.Parse("limits.yaml", []byte("domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: second, requests_per_unit: 1000}\n"))
	if err != nil {
		b.Fatal(err)
	}
	ix := descriptors.NewIndex(&config.Config{Domains: map[string]*config.Domain{d.Name: d}})
	opts := Options{ReportInterval: time.Second}
	if store != nil {
		opts.Store = store()
	}
	svc, err := New(func() *descriptors.Index { return ix }, opts)
	if err != nil {
		b.Fatal(err)
	}
	msg := &rlqspb.RateLimitQuotaUsageReports{Domain: "edge"}
	for i := 0; i < 100; i++ {
		msg.BucketQuotaUsages = append(msg.BucketQuotaUsages, &rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{
			BucketId:    &rlqspb.BucketId{Bucket: map[string]string{"user": fmt.Sprint("u", i)}},
			TimeElapsed: durationpb.New(time.Second), NumRequestsAllowed: 50,
		})
	}
	for e := 0; e < 9; e++ {
		c := &client{id: fmt.Sprint("other", e), buckets: map[string]*bucket{}}
		svc.answer(context.Background(), c, msg, time.Now())
	}
	return svc, msg
}

// The cost of answering one report of 100 buckets, per report; divide by
// 100 for the cost per bucket.
func BenchmarkReport(b *testing.B) {
	b.Run("memory", func(b *testing.B) {
		svc, msg := benchService(b, nil)
		c := &client{id: "me", buckets: map[string]*bucket{}}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			svc.answer(context.Background(), c, msg, time.Now())
		}
	})
	b.Run("redis", func(b *testing.B) {
		srv := redistest.Start(b)
		rc := redis.NewClient(&redis.Options{Addr: srv.Addr()})
		b.Cleanup(func() { _ = rc.Close() })
		svc, msg := benchService(b, func() DemandStore { return redisStore(rc) })
		c := &client{id: "me", buckets: map[string]*bucket{}}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			svc.answer(context.Background(), c, msg, time.Now())
		}
	})
}

func redisStore(c *redis.Client) DemandStore { return redisdemand.New(c, "bench:") }
