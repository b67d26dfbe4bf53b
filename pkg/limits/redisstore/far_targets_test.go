package redisstore

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/breaker"
)

// farTarget is a point the service must decide at, from a store just
// created: a round trip, the callers, and the share of calls decided (not
// answered by the failure mode) it needs at the default store timeout.
type farTarget struct {
	rtt     time.Duration
	callers int
}

// farTargets are the points of "one round trip per decision": a quiet
// instance just started 20 ms from Redis, and a busy one 24 and 30 ms
// away, each given the default 50 ms.
var farTargets = []farTarget{
	{20 * time.Millisecond, 1},
	{24 * time.Millisecond, 32},
	{30 * time.Millisecond, 32},
}

// farPace is the least time between the starts of a caller's calls:
// less than any target's round trip, so that it paces only the calls
// answered without one.
const farPace = 15 * time.Millisecond

// farTargetResult is what a run at a farTarget counted.
type farTargetResult struct {
	calls, decided, refused int64
	openings                int64
	undosFailed             int64
}

func (r farTargetResult) share() float64 { return 100 * float64(r.decided) / float64(max(r.calls, 1)) }

// runFarTarget starts a store cold (no clock estimate, no connection)
// behind a proxy at ft.rtt, wraps it in a breaker with the default
// timeout, and has ft.callers call it for d, each on keys of its own: a
// joint run of a fixed window that allows every hit and a token bucket that
// refuses most of them, so that most runs are refused and their window
// charge undone.
func runFarTarget(t *testing.T, srv *redistest.Server, ft farTarget, d time.Duration) farTargetResult {
	t.Helper()
	p := redistest.StartDelayProxyJitter(t, srv.Addr(), ft.rtt/2, time.Millisecond)
	defer p.Close()
	c := newClient(t, ClientOptions{URL: "redis://" + p.Addr()}) // the default timeout
	s := New(c, Options{})
	defer s.Close()
	var r farTargetResult
	b := breaker.New(s, breaker.Options{Timeout: DefaultTimeout, OnChange: func(open bool) {
		if open {
			atomic.AddInt64(&r.openings, 1)
		}
	}})
	window := limits.Limit{Algorithm: limits.FixedWindow, Requests: limits.MaxRequests, Period: time.Hour}
	bucket := limits.Limit{Algorithm: limits.TokenBucket, Requests: 10, Period: time.Second, Burst: 10}
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for g := range ft.callers {
		wg.Go(func() {
			tag := "{target" + strconv.Itoa(g) + "}:"
			hits := []limits.Hit{
				{Key: tag + "w", Limit: window, Cost: 1, Joint: true},
				{Key: tag + "b", Limit: bucket, Cost: 1},
			}
			res := make([]limits.Result, len(hits))
			for next := time.Now(); next.Before(end); {
				// Paced as requests are: a call answered at once (the
				// breaker open) is not followed by thousands more.
				time.Sleep(time.Until(next))
				next = time.Now().Add(farPace)
				ctx, cancel := context.WithTimeout(context.Background(), DefaultTimeout)
				b.Decide(ctx, hits, res)
				cancel()
				atomic.AddInt64(&r.calls, 1)
				if res[0].Err == nil && res[1].Err == nil {
					atomic.AddInt64(&r.decided, 1)
					if !res[1].Allowed {
						atomic.AddInt64(&r.refused, 1)
					}
				} else if os.Getenv("RLS_FAR_DEBUG") != "" {
					t.Logf("%v after start: %v", time.Since(end.Add(-d)), res[1].Err)
				}
			}
		})
	}
	wg.Wait()
	r.undosFailed = s.BackFailed()
	return r
}

// TestFarTargets: a store just created, 20 ms from Redis with one caller,
// and 24 and 30 ms away with 32, each call given the default store timeout
// (50 ms) through a breaker with its defaults: at least 99 % of the calls
// are decided, and the breaker never opens. A call that needed a second
// round trip (a refused run's undo, the first TIME, a connection's
// handshake) missed the timeout at these round trips.
//
//	RLS_FAR_TARGETS=1 RLS_FAR_SECONDS=10 go test -count=1 -run TestFarTargets -v ./pkg/limits/redisstore/
//
// RLS_FAR_DEBUG=1 logs each failed call, its instant and error.
func TestFarTargets(t *testing.T) {
	if os.Getenv("RLS_FAR_TARGETS") == "" {
		t.Skip("a measurement at the default store timeout, which a loaded machine sways: set RLS_FAR_TARGETS=1 (TestOneRoundTrip checks the round trips)")
	}
	secs := 10
	if v := os.Getenv("RLS_FAR_SECONDS"); v != "" {
		secs, _ = strconv.Atoi(v)
	}
	srv := redistest.Start(t)
	for _, ft := range farTargets {
		t.Run(fmt.Sprintf("rtt=%v,callers=%d", ft.rtt, ft.callers), func(t *testing.T) {
			r := runFarTarget(t, srv, ft, time.Duration(secs)*time.Second)
			t.Logf("%d calls, %.2f %% decided (%d refused), breaker opened %d times, %d undos failed", r.calls, r.share(), r.refused, r.openings, r.undosFailed)
			if r.share() < 99 {
				t.Errorf("%.2f %% of the calls decided, want at least 99 %%", r.share())
			}
			if r.openings > 0 {
				t.Errorf("the breaker opened %d times on a Redis that answers every call", r.openings)
			}
			if r.refused == 0 {
				t.Error("no run refused: the undo's path is not exercised")
			}
		})
	}
}
