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

// benchService answers with one report of 100 buckets, one bare-key value
// each, with envoys-1 other clients already recorded on every bucket.
func benchService(b *testing.B, envoys int, store func() DemandStore, refresh time.Duration) (*Service, *rlqspb.RateLimitQuotaUsageReports) {
	d, err := config.Parse("limits.yaml", []byte("domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: second, requests_per_unit: 1000}\n"))
	if err != nil {
		b.Fatal(err)
	}
	ix := descriptors.NewIndex(&config.Config{Domains: map[string]*config.Domain{d.Name: d}})
	opts := Options{ReportInterval: time.Second, Refresh: refresh}
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
	for e := 0; e < envoys-1; e++ {
		c := &client{id: fmt.Sprint("other", e), buckets: map[string]*bucket{}}
		svc.answer(context.Background(), c, msg, time.Now())
	}
	return svc, msg
}

// The cost of answering one report of 100 buckets, as served (each
// bucket's division read once per refresh period, half a second here), and
// with every report reading every bucket's division (a refresh period of
// 1 ns: what a report that finds its divisions stale costs): per report (ns/op), per
// bucket (ns/bucket) and, on Redis, the Redis server's CPU per report
// (redis-cpu-ns/op, from INFO cpu before and after). Each bucket is
// reported by 10 Envoys, or by 1,000: the fleet of 1,000 simulated Envoys ×
// 100 buckets.
func BenchmarkReport(b *testing.B) {
	for _, envoys := range []int{10, 1000} {
		b.Run(fmt.Sprint("envoys=", envoys), func(b *testing.B) { benchmarkReport(b, envoys) })
	}
}

func benchmarkReport(b *testing.B, envoys int) {
	for _, v := range []struct {
		name    string
		refresh time.Duration
	}{{"", 0}, {"-every-report-reads", time.Nanosecond}} {
		b.Run("memory"+v.name, func(b *testing.B) {
			svc, msg := benchService(b, envoys, nil, v.refresh)
			c := &client{id: "me", buckets: map[string]*bucket{}}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				svc.answer(context.Background(), c, msg, time.Now())
			}
			perBucket(b, len(msg.BucketQuotaUsages))
		})
		b.Run("redis"+v.name, func(b *testing.B) {
			srv := redistest.Start(b)
			rc := redis.NewClient(&redis.Options{Addr: srv.Addr()})
			b.Cleanup(func() { _ = rc.Close() })
			svc, msg := benchService(b, envoys, func() DemandStore { return redisStore(rc) }, v.refresh)
			c := &client{id: "me", buckets: map[string]*bucket{}}
			cpu0 := redisCPU(b, rc)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				svc.answer(context.Background(), c, msg, time.Now())
			}
			b.StopTimer()
			perBucket(b, len(msg.BucketQuotaUsages))
			b.ReportMetric(float64((redisCPU(b, rc)-cpu0).Nanoseconds())/float64(b.N), "redis-cpu-ns/op")
		})
	}
}

func perBucket(b *testing.B, buckets int) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*buckets), "ns/bucket")
}

// redisCPU is the CPU time the Redis server has used, user and system
// (INFO cpu, as scripts/bench-peer.sh reads it).
func redisCPU(b *testing.B, rc *redis.Client) time.Duration {
	b.Helper()
	info, err := rc.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	cpu, err := redistest.CPU(info)
	if err != nil {
		b.Fatal(err)
	}
	return cpu
}

func redisStore(c *redis.Client) DemandStore { return redisdemand.New(c, "bench:") }
