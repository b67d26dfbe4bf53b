package hotkey

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/memory"
)

// counted is a store that counts the hits sent to the one it wraps: what
// each would cost Redis, one command each.
type counted struct {
	limits.Store
	hits atomic.Int64
}

func (c *counted) Reset(ctx context.Context, hits []limits.Hit) error {
	return limits.Reset(ctx, c.Store, hits)
}

func (c *counted) Decide(ctx context.Context, hits []limits.Hit, results []limits.Result) {
	c.hits.Add(int64(len(hits)))
	c.Store.Decide(ctx, hits, results)
}

// fleet is instances of the mode on one shared store, on a clock the test
// moves.
type fleet struct {
	now    atomic.Int64 // µs
	shared *counted
	stores []*Store
}

func newFleet(t *testing.T, instances int) *fleet {
	t.Helper()
	f := &fleet{}
	f.now.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro())
	mem := memory.New(memory.Options{Now: f.now.Load})
	t.Cleanup(func() { mem.Close() })
	f.shared = &counted{Store: mem}
	for range instances {
		f.stores = append(f.stores, New(f.shared, Options{Now: func() time.Time { return time.UnixMicro(f.now.Load()) }}))
	}
	return f
}

// TestPlainUnchanged: a limit without sync_interval is decided by the
// store behind, hit for hit, and the layer holds nothing of it.
func TestPlainUnchanged(t *testing.T) {
	f := newFleet(t, 1)
	l := limits.Limit{Algorithm: limits.FixedWindow, Requests: 3, Period: time.Second}
	hits := []limits.Hit{{Key: "k", Limit: l, Cost: 1}}
	res := make([]limits.Result, 1)
	for i := range 5 {
		f.stores[0].Decide(context.Background(), hits, res)
		if want := i < 3; res[0].Allowed != want || res[0].Err != nil {
			t.Fatalf("hit %d: got %+v, want allowed %v", i, res[0], want)
		}
	}
	if got := f.shared.hits.Load(); got != 5 {
		t.Fatalf("the store saw %d hits, want 5", got)
	}
	if st := f.stores[0].Stats(); st.Keys != 0 || st.Local != 0 {
		t.Fatalf("the layer holds %+v, want nothing", st)
	}
}

// run drives the fleet for secs seconds of its clock, at perSecond hits of
// l's key in all, spread evenly over the instances, and returns the hits
// admitted in each second.
func (f *fleet) run(t *testing.T, l limits.Limit, secs, perSecond int) []int {
	t.Helper()
	admitted := make([]int, secs)
	hits := []limits.Hit{{Key: "hot", Limit: l, Cost: 1}}
	res := make([]limits.Result, 1)
	start := f.now.Load()
	for n := range secs * perSecond {
		f.stores[n%len(f.stores)].Decide(context.Background(), hits, res)
		if res[0].Err != nil {
			t.Fatalf("hit %d: %v", n, res[0].Err)
		}
		if res[0].Allowed {
			admitted[(f.now.Load()-start)/1e6]++
		}
		f.now.Store(start + int64(n+1)*1e6/int64(perSecond))
	}
	return admitted
}

// TestFleetBounds: three instances sharing one store, at twice a limit of
// 1,000 a second synced every 10 ms, admit at most 1 % over the limit in
// every second and use at least 95 % of it; far under the limit, they send
// the store at most one hit in ten.
func TestFleetBounds(t *testing.T) {
	for _, a := range []limits.Algorithm{limits.FixedWindow, limits.SlidingWindow, limits.TokenBucket} {
		t.Run(a.String(), func(t *testing.T) {
			l := limits.Limit{Algorithm: a, Requests: 1000, Period: time.Second, SyncInterval: 10 * time.Millisecond}
			f := newFleet(t, 3)
			f.now.Store(f.now.Load() / 1e6 * 1e6) // the run's seconds are the windows
			got := f.run(t, l, 6, 2000)
			for s, n := range got[1:] {
				if n > 1010 || n < 950 {
					t.Errorf("second %d admitted %d, want 950 to 1,010 (all: %v)", s+1, n, got)
				}
			}
			t.Logf("admitted per second at 2x: %v", got)
		})
	}
}

// TestFleetCommands: far under its limit, a key hit 6,000 or 30,000 times
// a second through three instances (20 or 100 hits per instance per
// interval) costs the store at most one hit in ten.
func TestFleetCommands(t *testing.T) {
	for _, a := range []limits.Algorithm{limits.FixedWindow, limits.SlidingWindow, limits.TokenBucket} {
		for _, rate := range []int{6_000, 30_000} {
			t.Run(fmt.Sprintf("%s/%d", a, rate), func(t *testing.T) {
				l := limits.Limit{Algorithm: a, Requests: 1_000_000, Period: time.Second, SyncInterval: 10 * time.Millisecond}
				f := newFleet(t, 3)
				got := f.run(t, l, 3, rate)
				for s, n := range got {
					if n != rate {
						t.Errorf("second %d admitted %d of %d", s, n, rate)
					}
				}
				sent := f.shared.hits.Load()
				per := float64(sent) / float64(3*rate)
				if per > 0.1 {
					t.Errorf("the store saw %d hits for %d decisions, %.3f each, want at most 0.1", sent, 3*rate, per)
				}
				t.Logf("%d store hits for %d decisions, %.4f each", sent, 3*rate, per)
			})
		}
	}
}
