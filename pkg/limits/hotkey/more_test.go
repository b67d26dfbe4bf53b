package hotkey

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/memory"
)

// TestPlainNoAlloc: a call without a limit of the mode allocates nothing
// beyond what the store behind allocates.
func TestPlainNoAlloc(t *testing.T) {
	mem := memory.New(memory.Options{})
	defer mem.Close()
	s := New(mem, Options{})
	hits := []limits.Hit{{Key: "k", Limit: limits.Limit{Algorithm: limits.FixedWindow, Requests: 1 << 30, Period: time.Hour}, Cost: 1}}
	res := make([]limits.Result, 1)
	ctx := context.Background()
	direct := testing.AllocsPerRun(200, func() { mem.Decide(ctx, hits, res) })
	layered := testing.AllocsPerRun(200, func() { s.Decide(ctx, hits, res) })
	if layered != direct {
		t.Fatalf("a plain call allocates %v through the layer, %v without it", layered, direct)
	}
}

// TestJointPlain: the hits of a joint run, and peeks, reach the store
// every time, and the layer holds nothing of them.
func TestJointPlain(t *testing.T) {
	f := newFleet(t, 1)
	l := limits.Limit{Algorithm: limits.FixedWindow, Requests: 1000, Period: time.Second, SyncInterval: 10 * time.Millisecond}
	run := []limits.Hit{{Key: "a", Limit: l, Cost: 1, Joint: true}, {Key: "b", Limit: l, Cost: 1}, {Key: "c", Limit: l, Cost: 0}}
	res := make([]limits.Result, len(run))
	for range 100 {
		f.stores[0].Decide(context.Background(), run, res)
		f.now.Add(100)
	}
	if got := f.shared.hits.Load(); got != 300 {
		t.Fatalf("the store saw %d hits, want 300", got)
	}
	if st := f.stores[0].Stats(); st.Keys != 0 || st.Local != 0 {
		t.Fatalf("the layer holds %+v, want nothing", st)
	}
}

// TestResetDropsShares: a reset, here or heard from another instance,
// drops the key's share, whose charge went with the counters.
func TestResetDropsShares(t *testing.T) {
	f := newFleet(t, 1)
	l := limits.Limit{Algorithm: limits.FixedWindow, Requests: 100_000, Period: time.Minute, SyncInterval: 10 * time.Millisecond}
	f.run(t, l, 1, 10_000)
	s := f.stores[0]
	if st := s.Stats(); st.Keys != 1 || st.Local == 0 {
		t.Fatalf("after a busy second the layer holds %+v, want the key and local answers", st)
	}
	if err := s.Reset(context.Background(), []limits.Hit{{Key: "hot", Limit: l}}); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Keys != 0 {
		t.Fatalf("after a reset the layer holds %d keys", st.Keys)
	}
	f.run(t, l, 1, 10_000)
	s.Forget([]string{"hot"})
	if st := s.Stats(); st.Keys != 0 {
		t.Fatalf("after Forget the layer holds %d keys", st.Keys)
	}
}

// TestWindowNeverOver: whatever the interleaving of three instances, the
// costs and the pace, the hits admitted in each window of a fixed window
// sum to at most its limit, and a sliding window's never more than the
// limit in any window either (its current count is part of its estimate).
func TestWindowNeverOver(t *testing.T) {
	for _, a := range []limits.Algorithm{limits.FixedWindow, limits.SlidingWindow} {
		t.Run(a.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(a)))
			l := limits.Limit{Algorithm: a, Requests: 500, Period: 100 * time.Millisecond, SyncInterval: 7 * time.Millisecond}
			f := newFleet(t, 3)
			start := f.now.Load() / 100_000 * 100_000
			f.now.Store(start)
			admitted := map[int64]int64{}
			res := make([]limits.Result, 1)
			for range 100_000 {
				h := []limits.Hit{{Key: "w", Limit: l, Cost: 1 + rng.Int64N(3)}}
				f.stores[rng.IntN(3)].Decide(context.Background(), h, res)
				if res[0].Err != nil {
					t.Fatal(res[0].Err)
				}
				if res[0].Allowed {
					admitted[(f.now.Load()-start)/100_000] += h[0].Cost
				}
				f.now.Add(pace(rng))
			}
			for w, n := range admitted {
				if n > l.Requests {
					t.Errorf("window %d admitted %d, over the limit %d", w, n, l.Requests)
				}
			}
		})
	}
}

// TestBucketBound: whatever the interleaving of three instances, the costs
// and the pace, a token bucket's hits admitted in any span of length t
// are at most B + N × (t + I) / T.
func TestBucketBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	l := limits.Limit{Algorithm: limits.TokenBucket, Requests: 500, Burst: 50, Period: 100 * time.Millisecond, SyncInterval: 7 * time.Millisecond}
	f := newFleet(t, 3)
	type admission struct{ at, cost int64 }
	var log []admission
	res := make([]limits.Result, 1)
	for range 100_000 {
		h := []limits.Hit{{Key: "b", Limit: l, Cost: 1 + rng.Int64N(3)}}
		f.stores[rng.IntN(3)].Decide(context.Background(), h, res)
		if res[0].Err != nil {
			t.Fatal(res[0].Err)
		}
		if res[0].Allowed {
			log = append(log, admission{f.now.Load(), h[0].Cost})
		}
		f.now.Add(pace(rng))
	}
	span := l.Period.Microseconds()
	bound := l.Burst + l.Requests*(span+l.SyncInterval.Microseconds())/span
	var sum, most int64
	first := 0
	for _, a := range log {
		sum += a.cost
		for log[first].at <= a.at-span {
			sum -= log[first].cost
			first++
		}
		most = max(most, sum)
	}
	if most > bound {
		t.Fatalf("%d admitted within %s, over the bound %d", most, l.Period, bound)
	}
	t.Logf("at most %d admitted within %s (bound %d, the plain bucket's %d)", most, l.Period, bound, l.Burst+l.Requests)
}

// pace is the µs to the next hit: mostly far faster than the limits
// allow, with a pause now and then that lets shares expire.
func pace(rng *rand.Rand) int64 {
	if rng.IntN(2000) == 0 {
		return 5_000 + rng.Int64N(50_000)
	}
	return rng.Int64N(40)
}

// TestCrossedSyncs: calls that each hit two keys of the mode, in opposite
// orders, from many goroutines, never wait for each other's syncs: every
// call is answered well within its deadline.
func TestCrossedSyncs(t *testing.T) {
	f := newFleet(t, 1)
	s := f.stores[0]
	l := limits.Limit{Algorithm: limits.FixedWindow, Requests: 1 << 30, Period: time.Hour, SyncInterval: time.Millisecond}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			a, b := "a", "b"
			if g%2 == 1 {
				a, b = b, a
			}
			hits := []limits.Hit{{Key: a, Limit: l, Cost: 1}, {Key: b, Limit: l, Cost: 1}}
			res := make([]limits.Result, 2)
			for range 2000 {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				start := time.Now()
				s.Decide(ctx, hits, res)
				cancel()
				if took := time.Since(start); took > 5*time.Second || res[0].Err != nil || res[1].Err != nil {
					t.Errorf("a call took %s: %+v", took, res)
					return
				}
				f.now.Add(50)
			}
		})
	}
	wg.Wait()
}
