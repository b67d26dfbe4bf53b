package rlqs

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
	"github.com/envoy-rls/envoy-rls/pkg/rlqs/internal/share"
	"github.com/envoy-rls/envoy-rls/pkg/rlqs/redisdemand"
)

// countingStore is a real DemandStore that counts the reads of each
// bucket and holds each read for a while, so that reports arriving
// meanwhile find it under way.
type countingStore struct {
	DemandStore
	hold  time.Duration
	mu    sync.Mutex
	reads map[string]int
	fails int // reads that returned an error
}

func counting(st DemandStore) *countingStore {
	return &countingStore{DemandStore: st, hold: 20 * time.Millisecond, reads: map[string]int{}}
}

func (c *countingStore) ReadAll(ctx context.Context, buckets []string) ([]map[string]share.Demand, error) {
	time.Sleep(c.hold)
	out, err := c.DemandStore.ReadAll(ctx, buckets)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range buckets {
		c.reads[b]++
	}
	if err != nil {
		c.fails++
	}
	return out, err
}

// total returns the reads of every bucket since the last call.
func (c *countingStore) total() (reads map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	reads, c.reads = c.reads, map[string]int{}
	return reads
}

// fleetReport is one report of buckets "u0".."u<n-1>" of the user limit,
// each at demand requests in the last second.
func fleetReport(n int, demand uint64) *rlqspb.RateLimitQuotaUsageReports {
	msg := &rlqspb.RateLimitQuotaUsageReports{Domain: "edge"}
	for i := 0; i < n; i++ {
		msg.BucketQuotaUsages = append(msg.BucketQuotaUsages, &rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{
			BucketId:    &rlqspb.BucketId{Bucket: map[string]string{"path": "/login", "user": fmt.Sprint("u", i)}},
			TimeElapsed: durationpb.New(time.Second), NumRequestsAllowed: demand,
		})
	}
	return msg
}

// Many streams reporting the same buckets at once read each bucket's
// demands once per refresh period, not once per report: within the period
// no report reads, and after it the reports that find the division stale
// together cause one read, the others waiting on it. Each Envoy still gets
// its fair share. On the embedded store and on Redis.
func TestOneReadPerBucketPerRefresh(t *testing.T) {
	stores := map[string]func() DemandStore{
		"memory": nil, // set below, on the service's clock
		"redis": func() DemandStore {
			rc := redis.NewClient(&redis.Options{Addr: redistest.Start(t).Addr()})
			t.Cleanup(func() { _ = rc.Close() })
			return redisdemand.New(rc, "t:")
		},
	}
	for name, store := range stores {
		t.Run(name, func(t *testing.T) {
			clk := &clock{t: time.Unix(1_000_000, 0)}
			if store == nil {
				store = func() DemandStore { return NewMemory(clk.Now) }
			}
			st := counting(store())
			// 60 a minute per user: one a second.
			svc := newService(t, Options{ReportInterval: 5 * time.Second, Store: st, Now: clk.Now})
			const envoys, buckets = 40, 3
			clients := make([]*client, envoys)
			for i := range clients {
				clients[i] = &client{id: fmt.Sprint("envoy", i), buckets: map[string]*bucket{}}
			}
			all := func(demand uint64) [][]float64 {
				t.Helper()
				got := make([][]float64, envoys)
				var wg sync.WaitGroup
				start := make(chan struct{})
				for i, c := range clients {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						resp := svc.answer(context.Background(), c, fleetReport(buckets, demand), clk.Now())
						for _, a := range resp.BucketAction {
							tb := a.GetQuotaAssignmentAction().GetRateLimitStrategy().GetTokenBucket()
							got[i] = append(got[i], float64(tb.GetTokensPerFill().GetValue())/float64(tb.GetFillInterval().GetSeconds()))
						}
					}()
				}
				close(start)
				wg.Wait()
				return got
			}
			all(10) // every Envoy joins: each join reads again, at most once each
			all(10) // and a join that came during a read it missed, once more
			for b, n := range st.total() {
				if n > envoys+1 {
					t.Errorf("bucket %q read %d times by %d joins", b, n, envoys)
				}
			}
			for round := 0; round < 3; round++ {
				clk.Add(700 * time.Millisecond)
				all(10)
			}
			if reads := st.total(); len(reads) != 0 {
				t.Fatalf("reads within the refresh period (2.5 s): %v, want none", reads)
			}
			clk.Add(time.Second) // 3.1 s since the last read
			got := all(10)
			reads := st.total()
			if len(reads) != buckets {
				t.Fatalf("after the refresh period: reads %v, want one of each of %d buckets", reads, buckets)
			}
			for b, n := range reads {
				if n != 1 {
					t.Errorf("bucket %q read %d times by %d concurrent reports, want once", b, n, envoys)
				}
			}
			// One a second among 40 Envoys asking 10 each: an equal
			// share, 0.025 a second (one token in 40 s).
			for i, shares := range got {
				for j, s := range shares {
					if math.Abs(s-1.0/envoys) > 0.001 {
						t.Fatalf("envoy %d, bucket %d: %v per second, want %v", i, j, s, 1.0/envoys)
					}
				}
			}
			// Every stream closes: no division is kept.
			for _, c := range clients {
				svc.close(c)
			}
			svc.mu.Lock()
			left := len(svc.divs)
			svc.mu.Unlock()
			if left != 0 {
				t.Fatalf("%d divisions kept after every stream closed, want 0", left)
			}
		})
	}
}

// A join and a leave on another instance reach an Envoy within the
// refresh period and one report interval: its first report a refresh
// period after the change sees it (earlier ones may not). One on its own
// instance is seen at its next report.
func TestJoinAndLeaveWithinTheBound(t *testing.T) {
	srv := redistest.Start(t)
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rc.Close() })
	clk := &clock{t: time.Unix(1_000_000, 0)}
	const interval = 5 * time.Second
	a := newService(t, Options{ReportInterval: interval, Store: redisdemand.New(rc, "t:"), Now: clk.Now})
	b := newService(t, Options{ReportInterval: interval, Store: redisdemand.New(rc, "t:"), Now: clk.Now})
	connA, connB := serve(t, a), serve(t, b)
	share := func(e *envoy) float64 {
		t.Helper()
		return perSecond(tokens(t, e.report(usage{bucket: api(), allowed: 200, elapsed: time.Second})[0]))
	}
	x := dial(t, connA)
	share(x)
	clk.Add(interval)
	if got := share(x); got != 100 {
		t.Fatalf("alone: %v per second, want 100", got)
	}

	y := dial(t, connB) // joins on B
	if got := share(y); math.Abs(got-50) > 1 {
		t.Fatalf("the joining Envoy: %v per second, want 50", got)
	}
	clk.Add(a.opts.Refresh)
	if got := share(x); math.Abs(got-50) > 1 {
		t.Fatalf("a refresh period after a join on another instance: %v per second, want 50", got)
	}

	z := dial(t, connA) // joins on A: x sees it at its next report
	share(z)
	if got := share(x); math.Abs(got-100.0/3) > 1 {
		t.Fatalf("after a join on the same instance: %v per second, want a third of 100", got)
	}
	z.leave()
	waitFor(t, func() bool { return a.Stats().Streams.Load() == 1 })
	if got := share(x); math.Abs(got-50) > 1 {
		t.Fatalf("after a leave on the same instance: %v per second, want 50", got)
	}

	clk.Add(interval)
	share(y)
	y.leave()
	waitFor(t, func() bool { return b.Stats().Streams.Load() == 0 })
	clk.Add(a.opts.Refresh)
	if got := share(x); got != 100 {
		t.Fatalf("a refresh period after a leave on another instance: %v per second, want 100", got)
	}
}

// With Redis gone, a division is still read once per refresh period (an
// attempt that fails), not at every report, and each instance's Envoys
// divide the part of the limit they last held; with Redis back, the next
// read divides the whole fleet again.
func TestFallbackReadsOncePerRefresh(t *testing.T) {
	srv := redistest.Start(t)
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1,
		DialTimeout: 200 * time.Millisecond, ReadTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = rc.Close() })
	clk := &clock{t: time.Unix(1_000_000, 0)}
	st := counting(redisdemand.New(rc, "t:"))
	other := newService(t, Options{ReportInterval: 5 * time.Second, Store: redisdemand.New(rc, "t:"), Now: clk.Now})
	svc := newService(t, Options{ReportInterval: 5 * time.Second, Store: st, Now: clk.Now})
	x, y := dial(t, serve(t, svc)), dial(t, serve(t, other))
	share := func(e *envoy, demand uint64) float64 {
		t.Helper()
		return perSecond(tokens(t, e.report(usage{bucket: api(), allowed: demand, elapsed: time.Second})[0]))
	}
	share(x, 30)
	share(y, 200)
	clk.Add(3 * time.Second)
	if got := share(x, 30); got != 30 {
		t.Fatalf("shared: %v per second, want 30 (its demand, the rest to the other)", got)
	}
	st.total()

	srv.Stop()
	clk.Add(3 * time.Second)
	for i := 0; i < 5; i++ {
		if got := share(x, 30); got != 30 {
			t.Fatalf("Redis down, report %d: %v per second, want the 30 it held", i, got)
		}
	}
	if n := st.total()[bucketKeyOf(t, svc, "/api")]; n != 1 {
		t.Fatalf("Redis down: %d reads of the bucket in five reports within a refresh period, want 1", n)
	}
	if n := svc.Stats().StoreFailures.Load(); n < 5 {
		t.Fatalf("%d store failures counted, want at least 5", n)
	}

	srv.Restart()
	share(y, 200) // y's demand is back in Redis
	clk.Add(3 * time.Second)
	if got := share(x, 30); got != 30 {
		t.Fatalf("Redis back: %v per second, want 30", got)
	}
	if got := share(x, 80); math.Abs(got-50) > 1 {
		t.Fatalf("Redis back, demand grown to 80: %v per second, want half of 100", got)
	}
}
