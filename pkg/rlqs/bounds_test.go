package rlqs

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/rlqs/redisdemand"
)

// users are the reports of the per-user limit (60 a minute) of users
// u<from> to u<to-1>, each with one request in the last second.
func users(from, to int) []usage {
	us := make([]usage, 0, to-from)
	for i := from; i < to; i++ {
		us = append(us, usage{bucket: map[string]string{"path": "/login", "user": fmt.Sprint("u", i)}, allowed: 1, elapsed: time.Second})
	}
	return us
}

func userKey(t *testing.T, svc *Service, user string) string {
	t.Helper()
	end, _, p, o := svc.index().MatchSet("edge", []descriptors.Entry{{Key: "path", Value: "/login"}, {Key: "user", Value: user}}, nil, nil)
	if end == nil {
		t.Fatalf("user %s matches nothing", user)
	}
	return bucketKey("edge", end, p, o)
}

// The buckets a stream holds are bounded, and so are those of every stream
// together: a bucket past either bound is answered with the limit's whole
// rate and kept nowhere (no demand recorded, no division), and each such
// report is counted by its bound. A bucket not reported for IdleAfter is
// dropped (its room goes to the next new bucket), and a stream that closes
// leaves nothing behind: on the embedded store, and on Redis, where every
// key the buckets held had is gone.
func TestBucketBounds(t *testing.T) {
	t.Run("memory", func(t *testing.T) { testBucketBounds(t, nil) })
	t.Run("redis", func(t *testing.T) {
		rc := redis.NewClient(&redis.Options{Addr: redistest.Start(t).Addr()})
		t.Cleanup(func() { _ = rc.Close() })
		testBucketBounds(t, rc)
	})
}

// testBucketBounds is TestBucketBounds on Redis through rc, or on the
// embedded store with rc nil.
func testBucketBounds(t *testing.T, rc *redis.Client) {
	clk := &clock{t: time.Unix(1_000_000, 0)}
	opts := Options{ReportInterval: time.Second, IdleAfter: 10 * time.Second,
		MaxStreamBuckets: 50, MaxBuckets: 80, Now: clk.Now}
	keys := func() int64 { return 0 } // the Redis keys of the demands
	if rc != nil {
		opts.Store = redisdemand.New(rc, "t:")
		keys = func() int64 {
			t.Helper()
			n, err := rc.DBSize(context.Background()).Result()
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	svc := newService(t, opts)
	conn := serve(t, svc)
	flood, other := dial(t, conn), dial(t, conn)

	var over []string
	for from := 0; from < 200; from += 20 {
		for i, a := range flood.report(users(from, from+20)...) {
			if got := perSecond(tokens(t, a)); got != 1 {
				t.Fatalf("user u%d: %v a second, want the limit's 1", from+i, got)
			}
			if from+i >= 50 {
				over = append(over, a.GetBucketId().GetBucket()["user"])
			}
		}
	}
	if n := svc.Stats().Buckets.Load(); n != 50 {
		t.Fatalf("one stream reported 200 buckets: %d held, want the stream's bound 50", n)
	}
	for _, u := range []string{"u49", "u50", "u199"} {
		held := svc.local.holds(userKey(t, svc, u))
		if want := u == "u49"; held != want {
			t.Errorf("user %s: demand held %v, want %v", u, held, want)
		}
	}
	if n := keys(); rc != nil && n != 50 {
		t.Errorf("%d keys in Redis, want the 50 held buckets'", n)
	}
	if len(over) != 150 || over[0] != "u50" {
		t.Fatalf("answered over the bound: %d from %v, want 150 from u50", len(over), over[:1])
	}

	// The instance's bound: 30 more, then every new one is over it.
	other.report(users(1000, 1050)...)
	if n := svc.Stats().Buckets.Load(); n != 80 {
		t.Fatalf("%d buckets held, want the instance's bound 80", n)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(svc.Collector())
	want := `
# HELP rls_rlqs_buckets_over_bound_total Reports of a bucket answered undivided (the limit's whole rate, kept nowhere) because its stream held -rlqs-max-buckets-per-stream buckets (bound stream) or the instance -rlqs-max-buckets (bound instance).
# TYPE rls_rlqs_buckets_over_bound_total counter
rls_rlqs_buckets_over_bound_total{bound="instance"} 20
rls_rlqs_buckets_over_bound_total{bound="stream"} 150
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "rls_rlqs_buckets_over_bound_total"); err != nil {
		t.Fatal(err)
	}

	// u0..u9 go on being reported; the 40 others of the flood are not,
	// and are dropped once IdleAfter has passed since their last report.
	clk.Add(5 * time.Second)
	flood.report(users(0, 10)...)
	clk.Add(5 * time.Second)
	flood.report(users(0, 10)...)
	if n := svc.Stats().Buckets.Load(); n != 10+30 {
		t.Fatalf("%d buckets held after the unreported ones' idle time, want 40", n)
	}
	if n := svc.Stats().Unreported.Load(); n != 40 {
		t.Fatalf("%d buckets dropped unreported, want 40", n)
	}
	if svc.local.holds(userKey(t, svc, "u10")) || !svc.local.holds(userKey(t, svc, "u9")) {
		t.Fatal("the demands held are not those of the buckets still reported")
	}
	// Their room is the next new buckets'.
	flood.report(users(200, 240)...)
	if n := svc.Stats().Buckets.Load(); n != 80 {
		t.Fatalf("%d buckets held, want 80 again", n)
	}

	flood.leave()
	other.leave()
	waitFor(t, func() bool { return svc.Stats().Streams.Load() == 0 })
	if n := svc.Stats().Buckets.Load(); n != 0 {
		t.Fatalf("%d buckets held after every stream closed", n)
	}
	svc.mu.Lock()
	divs := len(svc.divs)
	svc.mu.Unlock()
	svc.local.mu.Lock()
	demands := len(svc.local.buckets)
	svc.local.mu.Unlock()
	rules := 0
	svc.rules.each(func(string, float64, float64) { rules++ })
	if n := keys(); divs+demands+rules != 0 || n != 0 {
		t.Fatalf("after every stream closed: %d divisions, %d buckets' demands, %d rules' totals held, %d keys in Redis", divs, demands, rules, n)
	}
}

// The flood: one stream reporting 2,000 new bucket ids every 50 ms
// (of the clock the service reads), each report under the message bound.
// The buckets held stay within the default bound, the heap's growth
// within 200 MB, and what the flood left is released when its stream
// closes. RLS_RLQS_FLOOD sets the bucket ids sent (300,000 is the issue's;
// 20,000 by default); the figures are logged for BENCHMARKS.md.
func TestBucketFlood(t *testing.T) {
	total := 20_000
	if v := os.Getenv("RLS_RLQS_FLOOD"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("RLS_RLQS_FLOOD=%q: want a number of bucket ids", v)
		}
		total = n
	}
	const perReport = 2_000
	clk := &clock{t: time.Unix(1_000_000, 0)}
	svc := newService(t, Options{Now: clk.Now}) // the defaults: 5 s reports, the default bounds
	flood := dial(t, serve(t, svc))
	base := liveHeap()
	peak := uint64(0)
	var ms runtime.MemStats
	for from := 0; from < total; from += perReport {
		flood.report(users(from, min(from+perReport, total))...)
		clk.Add(50 * time.Millisecond)
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapInuse)
		if n := svc.Stats().Buckets.Load(); n > 1_000 {
			t.Fatalf("after %d bucket ids: %d buckets held, over the default bound of 1,000 a stream", from+perReport, n)
		}
	}
	held, buckets := liveHeap(), svc.Stats().Buckets.Load()
	flood.leave()
	waitFor(t, func() bool { return svc.Stats().Streams.Load() == 0 })
	after := liveHeap()
	growth := int64(peak) - int64(base)
	t.Logf("%d bucket ids in %d reports: heap in use %.1f MB at the start, peak %.1f MB (+%.1f MB); live after the flood %.1f MB, after the stream closed %.1f MB; %d buckets held at the flood's end, %d reports over the bound",
		total, (total+perReport-1)/perReport, mb(base), mb(peak), float64(growth)/1e6, mb(held), mb(after), buckets, svc.Stats().OverStream.Load())
	if growth > 200e6 {
		t.Fatalf("the heap grew %.1f MB under the flood, over 200 MB", float64(growth)/1e6)
	}
	if n := svc.Stats().Buckets.Load(); n != 0 {
		t.Fatalf("%d buckets held after the stream closed", n)
	}
	if after > base+5e6 {
		t.Fatalf("live heap %.1f MB after the stream closed, %.1f MB at the start", mb(after), mb(base))
	}
}

// liveHeap is the heap in use after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

func mb(b uint64) float64 { return float64(b) / 1e6 }

// What a bucket held costs in memory, read from the live heap with every
// bucket held and again after every stream closed: streams of 100 buckets
// each, the buckets of every stream their own (the flood's shape) or the
// same 100 for all (a fleet's). B/bucket is per bucket of a stream (what
// -rlqs-max-buckets counts), retained-B the live heap left after every
// stream closed.
func BenchmarkBucketMemory(b *testing.B) {
	const streams, perStream = 100, 100
	for _, shape := range []string{"own", "shared"} {
		b.Run(shape, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				svc := newService(b, Options{ReportInterval: time.Second, MaxStreamBuckets: perStream, MaxBuckets: streams * perStream})
				conn := serve(b, svc)
				base := liveHeap()
				es := make([]*envoy, streams)
				for s := range es {
					es[s] = dial(b, conn)
					from := 0
					if shape == "own" {
						from = s * perStream
					}
					es[s].report(users(from, from+perStream)...)
				}
				held := liveHeap()
				if n := svc.Stats().Buckets.Load(); n != streams*perStream {
					b.Fatalf("%d buckets held, want %d", n, streams*perStream)
				}
				for _, e := range es {
					e.leave()
				}
				for svc.Stats().Streams.Load() > 0 {
					time.Sleep(time.Millisecond)
				}
				after := liveHeap()
				b.ReportMetric(float64(int64(held)-int64(base))/(streams*perStream), "B/bucket")
				b.ReportMetric(float64(int64(after)-int64(base)), "retained-B")
			}
		})
	}
}
