package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// roundTrip is the round trip the tests of one round trip per decision put
// between the store and Redis: long beside what a loaded machine adds, so
// that a second round trip shows.
const roundTrip = 100 * time.Millisecond

// farStore is a store 100 ms from srv, its warm-up done (its connections
// open), and a client of srv's own.
func farStore(t *testing.T, srv *redistest.Server) (*Store, *clockWaits) {
	t.Helper()
	p := redistest.StartDelayProxy(t, srv.Addr(), roundTrip/2)
	c := newClient(t, ClientOptions{URL: "redis://" + p.Addr(), Timeout: 5 * time.Second})
	hook := &clockWaits{}
	c.AddHook(hook)
	s := New(c, Options{})
	t.Cleanup(s.Close)
	s.pipes.WaitAside()
	return s, hook
}

// forgetClock takes the store's estimate of Redis's clock away, as before
// its first TIME.
func forgetClock(s *Store) {
	s.pipes.Clock().Forget()
}

// timedDecide is one call, its duration in round trips.
func timedDecide(s *Store, hits []limits.Hit, res []limits.Result) float64 {
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), callCtx{}, true), 5*time.Second)
	defer cancel()
	start := time.Now()
	s.Decide(ctx, hits, res)
	return float64(time.Since(start)) / float64(roundTrip)
}

// TestOneRoundTrip: 100 ms from Redis, a call takes one round trip
// whether the store has no estimate of the clock yet (its TIME rides with
// the charges, on a provisional instant), its joint run is refused (the
// undo goes after the answer) or it refunds in a run that may be refused;
// the undo is done all the same.
func TestOneRoundTrip(t *testing.T) {
	srv := redistest.Start(t)
	direct := newClient(t, ClientOptions{URL: srv.URL(), Timeout: testTimeout})
	waitPastBoundary(t, direct, time.Hour)
	s, hook := farStore(t, srv)
	window := hourly(limits.FixedWindow, 10)
	full := hourly(limits.FixedWindow, 1)
	log, slots, lockout := hourly(limits.SlidingLog, 1), hourly(limits.Concurrency, 1), full
	lockout.BlockFor = time.Minute
	cases := []struct {
		name    string
		cold    bool
		hits    []limits.Hit
		allowed bool
	}{
		{"cold clock", true, []limits.Hit{{Key: "{one}:cold", Limit: window, Cost: 1}}, true},
		{"allowed run", false, []limits.Hit{{Key: "{one}:a", Limit: window, Cost: 1, Joint: true}, {Key: "{one}:b", Limit: full, Cost: 1}}, true},
		{"refused run", false, []limits.Hit{{Key: "{one}:a", Limit: window, Cost: 1, Joint: true}, {Key: "{one}:b", Limit: full, Cost: 1}}, false},
		{"cold and refused", true, []limits.Hit{{Key: "{one}:a", Limit: window, Cost: 1, Joint: true}, {Key: "{one}:b", Limit: full, Cost: 1}}, false},
		{"refund in a refusable run", false, []limits.Hit{{Key: "{one}:a", Limit: window, Cost: -1, Joint: true}, {Key: "{one}:c", Limit: window, Cost: 1}}, true},
		// A refusal whose answer reads members (its wait), or starts a
		// lock, is answered from the first round trip too.
		{"sliding log allowed", false, []limits.Hit{{Key: "{one}:log", Limit: log, Cost: 1}}, true},
		{"sliding log refused", false, []limits.Hit{{Key: "{one}:log", Limit: log, Cost: 1}}, false},
		{"concurrency allowed", false, []limits.Hit{{Key: "{one}:slots", Limit: slots, Cost: 1}}, true},
		{"concurrency refused", false, []limits.Hit{{Key: "{one}:slots", Limit: slots, Cost: 1}}, false},
		{"lockout allowed", false, []limits.Hit{{Key: "{one}:lock", Limit: lockout, Cost: 1}}, true},
		{"lockout starts", false, []limits.Hit{{Key: "{one}:lock", Limit: lockout, Cost: 1}}, false},
	}
	for _, tc := range cases {
		if tc.cold {
			forgetClock(s)
		}
		hook.waits.Store(0)
		res := make([]limits.Result, len(tc.hits))
		took := timedDecide(s, tc.hits, res)
		for i, r := range res {
			if r.Err != nil {
				t.Fatalf("%s: hit %d: %v", tc.name, i, r.Err)
			}
		}
		if got := res[len(res)-1]; got.Allowed != tc.allowed || !got.Allowed && got.RetryAfter <= 0 {
			t.Errorf("%s: %+v, want allowed %v (a refusal with its wait)", tc.name, got, tc.allowed)
		}
		if took >= 1.6 {
			t.Errorf("%s: the call took %.2f round trips, want one", tc.name, took)
		}
		if w := hook.waits.Load(); w > 0 {
			t.Errorf("%s: the call waited for %d TIME of its own", tc.name, w)
		}
	}
	s.settle()
	// {one}:a: charged by the allowed run, refunded by the last; the
	// refused runs' charges undone after their answers.
	w := floorDiv(time.Now().UnixMicro(), window.PeriodMicros())
	if got, err := counter(context.Background(), direct, windowKey("{one}:a", w)); err != nil || got != 0 {
		t.Errorf("{one}:a counts %d, %v; want 0 (the refused runs undone, the allowed one refunded)", got, err)
	}
}

// TestProvisionalInstantBelied: a store whose host's clock is an hour
// ahead of Redis's decides its first call, cold, at that wrong instant,
// finds it belied by the TIME that rode with it, undoes its charge and
// decides again at Redis's instant: the hit is counted once, in Redis's
// window, and the wrong window's charge is undone.
func TestProvisionalInstantBelied(t *testing.T) {
	srv := redistest.Start(t)
	direct := newClient(t, ClientOptions{URL: srv.URL(), Timeout: testTimeout})
	waitPastBoundary(t, direct, time.Hour)
	s, _ := farStore(t, srv)
	s.wall = func() time.Time { return time.Now().Add(time.Hour) }
	forgetClock(s)
	l := hourly(limits.FixedWindow, 10)
	res := make([]limits.Result, 1)
	took := timedDecide(s, []limits.Hit{{Key: "belied", Limit: l, Cost: 1}}, res)
	if res[0].Err != nil || !res[0].Allowed {
		t.Fatalf("got %+v, want allowed", res[0])
	}
	if took < 1.6 {
		t.Errorf("the call took %.2f round trips: its belied instant was not sent again", took)
	}
	s.settle()
	w := floorDiv(time.Now().UnixMicro(), l.PeriodMicros())
	ctx := context.Background()
	if got, err := counter(ctx, direct, windowKey("belied", w)); err != nil || got != 1 {
		t.Errorf("Redis's window counts %d, %v; want 1", got, err)
	}
	if got, err := counter(ctx, direct, windowKey("belied", w+1)); got != 0 && err != redis.Nil {
		t.Errorf("the window an hour ahead counts %d, %v; want 0 (undone)", got, err)
	}
}
