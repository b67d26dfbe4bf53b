package redisstore

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/memory"
)

// TestLockoutEquivalence: Redis, the embedded store and the Go functions
// answer every hit on a lockout alike, on random sequences at fixed
// instants: hits, peeks, refunds and hits that can never fit on a lockout
// of each algorithm that takes block_for (count_refused or not), alone, in
// a joint run with a plain limit, and resets.
func TestLockoutEquivalence(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, ClientOptions{URL: srv.URL(), Timeout: testTimeout})
	c.AddHook(LongerTTLs(time.Hour))
	seq := 0
	for _, a := range []limits.Algorithm{limits.FixedWindow, limits.SlidingWindow, limits.TokenBucket, limits.SlidingLog} {
		for _, countRefused := range []bool{false, true} {
			for seed := range uint64(6) {
				seq++
				name := fmt.Sprintf("%s/count_refused=%v/%d", a, countRefused, seed)
				rng := rand.New(rand.NewPCG(seed, uint64(a)*31+uint64(seq)))
				var now int64
				clock := func() int64 { return now }
				stores := []limits.Store{
					persisting{store: New(c, Options{Clock: clock}), client: c, clock: clock},
					memory.New(memory.Options{Now: clock, SweepInterval: -1}),
				}
				lockoutRun(t, name, rng, a, countRefused, &now, stores)
				stores[1].(*memory.Store).Close()
			}
		}
	}
}

// lockRef is the reference: one state per key, decided by
// limits.DecideWithin and kept as the store contract says.
type lockRef map[string]struct {
	s   limits.State
	exp int64
}

func (r lockRef) decide(hits []limits.Hit, now int64) []limits.Result {
	out := make([]limits.Result, len(hits))
	ds := make([]limits.Decision, len(hits))
	allowed := true
	for i, h := range hits {
		st := r[h.Key]
		if !st.s.Live || now >= st.exp {
			st.s = limits.State{}
		}
		ds[i] = limits.DecideWithin(h.Limit, st.s, h.Cost, now, 0)
		out[i] = ds[i].Result
		allowed = allowed && out[i].Allowed
	}
	for i, h := range hits {
		d := ds[i]
		if !d.Changed || !(allowed || h.Limit.CountRefused || d.Locks) {
			continue
		}
		if d.State.Live && d.ExpireAt > now {
			r[h.Key] = struct {
				s   limits.State
				exp int64
			}{d.State, d.ExpireAt}
		} else {
			delete(r, h.Key)
		}
	}
	return out
}

func lockoutRun(t *testing.T, name string, rng *rand.Rand, a limits.Algorithm, countRefused bool, now *int64, stores []limits.Store) {
	periods := []time.Duration{time.Millisecond, 50 * time.Millisecond, time.Second, time.Minute}
	lock := limits.Limit{Algorithm: a, Requests: int64(1 + rng.IntN(5)), Period: periods[rng.IntN(len(periods))], CountRefused: countRefused}
	if a == limits.TokenBucket {
		lock.Burst = lock.Requests
	}
	lock.BlockFor = []time.Duration{lock.Period / 2, 3 * lock.Period, time.Duration(1+rng.IntN(2000)) * time.Millisecond}[rng.IntN(3)]
	lock.BlockFor = max(lock.BlockFor, time.Millisecond)
	plain := limits.Limit{Algorithm: limits.FixedWindow, Requests: 8, Period: lock.Period}
	tag := fmt.Sprintf("{lock-%s-%d}", name, rng.Uint64())
	ka, kb := tag+":a", tag+":b"
	ref := lockRef{}
	*now = 1_767_225_600_000_000 + rng.Int64N(1_000_000_000)
	for step := range 150 {
		*now += []int64{0, rng.Int64N(lock.PeriodMicros()/2 + 1), rng.Int64N(lock.BlockFor.Microseconds() + 2), lock.BlockFor.Microseconds()}[rng.IntN(4)]
		cost := []int64{1, 1, 1, 1, 0, 2, -1, lock.MaxCost() + 1}[rng.IntN(8)]
		var hits []limits.Hit
		switch k := rng.IntN(10); {
		case k == 0:
			h := []limits.Hit{{Key: ka, Limit: lock}}
			for _, s := range stores {
				if err := limits.Reset(t.Context(), s, h); err != nil {
					t.Fatal(err)
				}
			}
			delete(ref, ka)
			continue
		case k < 4:
			hits = []limits.Hit{{Key: ka, Limit: lock, Cost: cost, Joint: true}, {Key: kb, Limit: plain, Cost: cost}}
		default:
			hits = []limits.Hit{{Key: ka, Limit: lock, Cost: cost}}
		}
		want := ref.decide(hits, *now)
		for si, s := range stores {
			got := make([]limits.Result, len(hits))
			s.Decide(t.Context(), hits, got)
			for i := range hits {
				if got[i] != want[i] {
					t.Fatalf("%s, step %d, store %d (%T), hit %d (%s, cost %d, joint %v): got %+v, want %+v",
						name, step, si, s, i, hits[i].Limit, hits[i].Cost, hits[i].Joint, got[i], want[i])
				}
			}
		}
	}
}

// TestLockoutCluster: on a cluster, a lock's key sits under its hit key's
// hash tag, on the same master, so a lockout decides there as on one
// Redis, alone and in joint runs.
func TestLockoutCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	c := newClient(t, ClientOptions{Cluster: cl.Addrs(), Timeout: testTimeout})
	c.AddHook(LongerTTLs(time.Hour))
	for _, a := range []limits.Algorithm{limits.FixedWindow, limits.TokenBucket} {
		rng := rand.New(rand.NewPCG(uint64(a), 7))
		var now int64
		clock := func() int64 { return now }
		s := New(c, Options{Clock: clock})
		stores := []limits.Store{persisting{store: s, client: c, clock: clock}}
		lockoutRun(t, "cluster/"+a.String(), rng, a, false, &now, stores)
		s.Close()
	}
}

// TestLockMemoryUsage reports what a lock costs in Redis (MEMORY USAGE),
// beside the algorithm's keys that TestMemoryUsage weighs: its key, with a
// name as the service builds it, holding the lock's end.
func TestLockMemoryUsage(t *testing.T) {
	var now int64 = 1_767_225_600_000_000
	s, c, _ := setup(t, Options{Clock: func() int64 { return now }})
	l := limits.Limit{Algorithm: limits.FixedWindow, Requests: 1, Period: time.Hour, BlockFor: 15 * time.Minute}
	key := descriptors.Key(descriptors.KeyInput{
		Domain:  "api",
		Entries: []descriptors.Entry{{Key: "user", Value: "alice"}, {Key: "path", Value: "/v1/orders"}},
		Limit:   l,
	})
	decideOne(t, s, limits.Hit{Key: key, Limit: l, Cost: 1})
	if r := decideOne(t, s, limits.Hit{Key: key, Limit: l, Cost: 1}); r.Err != nil || !r.Locked {
		t.Fatalf("second hit: %+v, want locked", r)
	}
	n, err := c.MemoryUsage(t.Context(), lockKey(key), 0).Result()
	if err != nil {
		t.Fatalf("MEMORY USAGE %s: %v", lockKey(key), err)
	}
	t.Logf("lock           one key (%d-byte name): %4d bytes", len(lockKey(key)), n)
}
