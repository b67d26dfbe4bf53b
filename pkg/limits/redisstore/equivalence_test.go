package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// equivalenceCases are limits whose periods do not divide evenly by N, with
// buckets whose burst differs from N, down to microsecond periods and up to
// the largest values a limit may hold.
var equivalenceCases = []limits.Limit{
	{Algorithm: limits.FixedWindow, Requests: 3, Period: time.Second},
	{Algorithm: limits.FixedWindow, Requests: 7, Period: 10 * time.Second},
	{Algorithm: limits.FixedWindow, Requests: 3, Period: 7 * time.Microsecond},
	{Algorithm: limits.FixedWindow, Requests: 1000, Period: time.Hour},
	{Algorithm: limits.SlidingWindow, Requests: 3, Period: time.Second},
	{Algorithm: limits.SlidingWindow, Requests: 7, Period: 10 * time.Second},
	{Algorithm: limits.SlidingWindow, Requests: 3, Period: 7 * time.Microsecond},
	{Algorithm: limits.SlidingWindow, Requests: 11, Period: time.Minute},
	{Algorithm: limits.SlidingWindow, Requests: limits.MaxRequests, Period: limits.MaxPeriod},
	{Algorithm: limits.TokenBucket, Requests: 3, Period: time.Second, Burst: 5},
	{Algorithm: limits.TokenBucket, Requests: 7, Period: 10 * time.Second, Burst: 2},
	{Algorithm: limits.TokenBucket, Requests: 10, Period: time.Second},
	{Algorithm: limits.TokenBucket, Requests: 3, Period: 7 * time.Microsecond, Burst: 4},
	{Algorithm: limits.TokenBucket, Requests: limits.MaxRequests, Period: limits.MaxPeriod, Burst: 3},
}

// iterations is the number of steps per sequence: RLS_PROPERTY_ITERATIONS,
// 300 by default.
func iterations(t testing.TB) int {
	v := os.Getenv("RLS_PROPERTY_ITERATIONS")
	if v == "" {
		return 300
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("RLS_PROPERTY_ITERATIONS=%q: want a positive integer", v)
	}
	return n
}

// extraSeed is RLS_PROPERTY_SEED, mixed into every sequence's seed so that long
// runs can explore other sequences; 0 by default.
func extraSeed(t testing.TB) uint64 {
	v := os.Getenv("RLS_PROPERTY_SEED")
	if v == "" {
		return 0
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatalf("RLS_PROPERTY_SEED=%q: want an unsigned integer", v)
	}
	return n
}

// model keeps one key's state as a store does around limits.Decide.
type model struct {
	state    limits.State
	expireAt int64
}

func (m *model) decide(l limits.Limit, cost, now int64) limits.Decision {
	s := m.state
	if now >= m.expireAt {
		s = limits.State{}
	}
	d := limits.Decide(l, s, cost, now)
	if d.Changed {
		if d.ExpireAt > now {
			m.state, m.expireAt = d.State, d.ExpireAt
		} else {
			m.state, m.expireAt = limits.State{}, 0
		}
	}
	return d
}

// sequence is one key under test: its limit, its model and what Redis held
// after the previous step.
type sequence struct {
	key   string
	limit limits.Limit
	model model
	value string // the raw value in Redis, "" when absent
}

// TestEquivalence feeds the same pseudo-random sequences of hits to the Go
// algorithms and to the scripts, with explicit instants, and requires the
// same Allowed, Remaining and Reset at every step, and a key TTL that is
// ExpireAt-now rounded up to the millisecond.
//
// Redis expires keys on its own clock, which does not follow the test's
// instants: after checking the TTL of a step, the test removes it (PERSIST),
// so that the state stays until the test's instants make it stale. A stale
// state must then decide exactly as an absent key, which is what ExpireAt
// promises.
func TestEquivalence(t *testing.T) {
	steps := iterations(t)
	var now int64
	s, c, _ := setup(t, Options{Clock: func() int64 { return now }})
	for i, l := range equivalenceCases {
		t.Run(fmt.Sprintf("%d/%s", i, l), func(t *testing.T) {
			seqs := []*sequence{{key: fmt.Sprintf("eq:%d", i), limit: l}}
			runSequences(t, s, c, &now, seqs, steps, uint64(i))
		})
	}
	// All cases at once: one Decide call, one pipeline, per step.
	t.Run("batched", func(t *testing.T) {
		var seqs []*sequence
		for i, l := range equivalenceCases {
			seqs = append(seqs, &sequence{key: fmt.Sprintf("eqb:%d", i), limit: l})
		}
		runSequences(t, s, c, &now, seqs, steps, 1000)
	})
}

func runSequences(t *testing.T, s *Store, c redis.UniversalClient, now *int64, seqs []*sequence, steps int, seed uint64) {
	ctx := context.Background()
	resets := 0
	defer func() {
		// A handful is expected with 1 ms TTLs on a slow machine; many
		// would mean that the keys expire too early.
		if resets > 0 {
			t.Logf("%d of %d decisions: the key expired in real time before the test read it; sequence restarted", resets, steps*len(seqs))
		}
		if resets > steps*len(seqs)/10 {
			t.Errorf("too many keys expired before the test read them")
		}
	}()
	rng := rand.New(rand.NewPCG(seed, 0x5eed^extraSeed(t)))
	*now = 1_767_225_600_000_000 + rng.Int64N(1_000_000_000_000)
	hits := make([]limits.Hit, len(seqs))
	want := make([]limits.Decision, len(seqs))
	res := make([]limits.Result, len(seqs))
	for step := range steps {
		// Keep instants where every value the algorithms compute, up to
		// now+2T for the longest period, stays below 2^53: near the bound,
		// long jumps become steps of at most a second.
		adv := advance(rng, seqs[rng.IntN(len(seqs))].limit)
		if room := maxNow - *now; adv > room/2 {
			adv = rng.Int64N(min(room/2, 1_000_000) + 1)
		}
		*now += adv
		before := make([]model, len(seqs))
		for i, q := range seqs {
			hits[i] = limits.Hit{Key: q.key, Limit: q.limit, Cost: pickCost(rng, q.limit)}
			before[i] = q.model
			want[i] = q.model.decide(q.limit, hits[i].Cost, *now)
		}
		start := time.Now()
		s.Decide(ctx, hits, res)

		// Read what each script left, and make it permanent.
		pipe := c.Pipeline()
		pttls := make([]*redis.Cmd, len(seqs))
		gets := make([]*redis.StringCmd, len(seqs))
		for i, q := range seqs {
			pttls[i] = pipe.Do(ctx, "PTTL", q.key)
			gets[i] = pipe.Get(ctx, q.key)
			pipe.Persist(ctx, q.key)
		}
		if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
			t.Fatalf("step %d: inspect keys: %v", step, err)
		}
		elapsedMs := time.Since(start).Milliseconds() + 1

		for i, q := range seqs {
			h, w, got := hits[i], want[i], res[i]
			where := fmt.Sprintf("step %d, %s, cost %d, now %d, Go state %+v, Redis state %q", step, q.limit, h.Cost, *now, before[i], q.value)
			if got.Err != nil {
				t.Fatalf("%s: %v", where, got.Err)
			}
			if got.Allowed != w.Result.Allowed || got.Remaining != w.Result.Remaining || got.Reset != w.Result.Reset {
				t.Fatalf("%s: Redis got allowed=%v remaining=%d reset=%d µs; Go want allowed=%v remaining=%d reset=%d µs",
					where, got.Allowed, got.Remaining, got.Reset.Microseconds(),
					w.Result.Allowed, w.Result.Remaining, w.Result.Reset.Microseconds())
			}
			pttl, err := pttls[i].Int64()
			if err != nil {
				t.Fatalf("%s: PTTL: %v", where, err)
			}
			value := gets[i].Val()
			live := w.Changed && w.ExpireAt > *now
			switch {
			case live:
				wantMs := (w.ExpireAt - *now + 999) / 1000
				if pttl == -2 && wantMs <= elapsedMs {
					// Redis's own clock expired the key before the test could
					// read it: follow Redis.
					resets++
					q.model = model{}
					value = ""
					break
				}
				if pttl > wantMs || pttl < wantMs-elapsedMs {
					t.Fatalf("%s: PTTL = %d ms, want %d ms (ExpireAt-now = %d µs, rounded up; %d ms elapsed)", where, pttl, wantMs, w.ExpireAt-*now, elapsedMs)
				}
			case w.Changed:
				if pttl != -2 {
					t.Fatalf("%s: PTTL = %d, want the key deleted (state equivalent to absent); value %q", where, pttl, value)
				}
			default: // nothing written: the key is as the previous step left it
				if value != q.value || (q.value == "") != (pttl == -2) || (q.value != "" && pttl != -1) {
					t.Fatalf("%s: key changed without a change of state: %q (PTTL %d), was %q", where, value, pttl, q.value)
				}
			}
			q.value = value
		}
	}
}

// maxNow bounds the test's instants (year 2065): with MaxPeriod, the sliding
// window's ExpireAt (w+2)·T is beyond 2^53 from 2070 on.
const maxNow = 3_000_000_000_000_000

// advance picks the time to the next step: often nothing or microseconds,
// often a fraction of the period, sometimes several periods.
func advance(rng *rand.Rand, l limits.Limit) int64 {
	t := l.PeriodMicros()
	switch p := rng.IntN(100); {
	case p < 15:
		return 0
	case p < 35:
		return 1 + rng.Int64N(1000)
	case p < 65:
		return 1 + rng.Int64N(max(1, t/l.Requests))
	case p < 90:
		return 1 + rng.Int64N(t)
	default:
		return t + rng.Int64N(2*t)
	}
}

// pickCost picks among a peek, small costs, a refund and costs that can
// never fit.
func pickCost(rng *rand.Rand, l limits.Limit) int64 {
	costs := []int64{0, 1, 1, 1, 1, 2, 5, l.Requests + 1, -1, l.Capacity() + 1}
	return costs[rng.IntN(len(costs))]
}
