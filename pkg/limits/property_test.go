package limits_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// The property tests below drive Decide through a one-key store model with a
// fake clock and a seeded random arrival sequence, and check the guarantees
// of docs/semantics.md on every decision. RLS_PROPERTY_ITERATIONS sets how many
// sequences run per algorithm and variant (default small, so that go test
// stays fast) and RLS_PROPERTY_SEED, mixed into every seed, explores other
// sequences; a failure names the sequence's seed.

func propertyIterations(t *testing.T) int {
	t.Helper()
	n := 25
	if testing.Short() {
		n = 5
	}
	if s := os.Getenv("RLS_PROPERTY_ITERATIONS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v <= 0 {
			t.Fatalf("RLS_PROPERTY_ITERATIONS=%q: want a positive integer", s)
		}
		n = v
	}
	return n
}

func propertySeed(t *testing.T) uint64 {
	t.Helper()
	s := os.Getenv("RLS_PROPERTY_SEED")
	if s == "" {
		return 0
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("RLS_PROPERTY_SEED=%q: want an unsigned integer", s)
	}
	return v * 1_000_000_007
}

// model is the store contract reduced to one key: a state is absent once
// now >= ExpireAt, and written only when Changed. It keeps exactly one of the
// old and the new state after each decision, as Decide's doc asks of a store
// (a sliding log's old and new Log may share storage).
type model struct {
	s   limits.State
	exp int64
}

func (m *model) load(now int64) limits.State {
	if !m.s.Live || now >= m.exp {
		return limits.State{}
	}
	return m.s
}

func (m *model) decide(l limits.Limit, cost, now, maxDelay int64) limits.Decision {
	d := limits.DecideWithin(l, m.load(now), cost, now, maxDelay)
	if d.Changed {
		if !d.State.Live || d.ExpireAt <= now {
			*m = model{}
		} else {
			m.s, m.exp = d.State, d.ExpireAt
		}
	}
	return d
}

// clone is a copy of m whose decisions cannot disturb m's: the probes below
// decide from one state several times, which a store never does.
func (m model) clone() model {
	m.s.Log = append([]limits.LogEntry(nil), m.s.Log...)
	return m
}

// event is one decided hit of a sequence, kept for the bound checks.
type event struct {
	now, cost int64
	allowed   bool
	delay     int64 // µs, leaky bucket only
}

// variant is what a sequence exercises besides plain hits.
type variant struct {
	refunds      bool
	countRefused bool
}

func (v variant) String() string {
	return fmt.Sprintf("refunds=%v count_refused=%v", v.refunds, v.countRefused)
}

func randomLimit(r *rand.Rand, a limits.Algorithm, v variant) limits.Limit {
	periods := []time.Duration{
		7 * time.Microsecond, 997 * time.Microsecond, time.Millisecond,
		time.Second, 30 * time.Second, 5 * time.Minute, time.Hour,
		time.Duration(1+r.IntN(2_000_000)) * time.Microsecond,
	}
	l := limits.Limit{
		Algorithm:    a,
		Requests:     int64(1 + r.IntN(12)),
		Period:       periods[r.IntN(len(periods))],
		CountRefused: v.countRefused,
	}
	if r.IntN(8) == 0 {
		l.Requests = int64(50 + r.IntN(500))
		if a == limits.SlidingLog {
			// Each decision walks the log and copies it, and the remaining
			// probes take N decisions: keep the sequence fast.
			l.Requests = int64(20 + r.IntN(50))
		}
	}
	switch {
	case a == limits.TokenBucket && r.IntN(2) == 0:
		l.Burst = int64(1 + r.IntN(int(3*l.Requests)))
	case a == limits.LeakyBucket:
		// Intervals of at least 1 µs: see leakyGranularity.
		l.Requests = min(l.Requests, l.PeriodMicros())
		if r.IntN(4) != 0 { // a quarter keeps the default B = 0: no queue
			l.Burst = int64(1 + r.IntN(int(2*l.Requests)))
		}
	}
	return l
}

// randomMaxDelay is the caller's deadline for a leaky bucket's sequence:
// none for most, else somewhere within the bucket's own worst wait.
func randomMaxDelay(r *rand.Rand, l limits.Limit) int64 {
	if l.Algorithm != limits.LeakyBucket || r.IntN(3) != 0 {
		return 0
	}
	return 1 + r.Int64N(l.MaxWait().Microseconds()+l.PeriodMicros()/l.Requests+1)
}

// nextGap picks the wait before the next hit: often nothing, often about one
// refill interval, sometimes exactly the last wait or 1 µs less (where the
// edge cases are), sometimes a few periods.
func nextGap(r *rand.Rand, l limits.Limit, last time.Duration) int64 {
	t := l.PeriodMicros()
	step := max(1, t/l.Requests)
	switch k := r.IntN(20); {
	case k < 5:
		return 0
	case k < 12:
		return r.Int64N(2 * step)
	case k < 15:
		return last.Microseconds()
	case k < 17:
		return max(0, last.Microseconds()-1)
	case k < 19:
		return r.Int64N(t + 1)
	default:
		return r.Int64N(3*t + 1)
	}
}

func randomCost(r *rand.Rand, l limits.Limit, refunds bool) int64 {
	switch k := r.IntN(20); {
	case k < 12:
		return 1
	case k < 14:
		return 0
	case k < 18:
		return int64(2 + r.IntN(3))
	case k < 19:
		return l.MaxCost() + int64(1+r.IntN(3)) // can never fit
	default:
		if refunds {
			return -int64(1 + r.IntN(3))
		}
		return 1
	}
}

const sequenceHits = 300

// runSequence decides a random sequence and checks, on every decision, the
// rules that hold for every algorithm. It returns the decided events for the
// algorithm-specific bounds.
func runSequence(t *testing.T, seed uint64, a limits.Algorithm, v variant) (limits.Limit, int64, []event) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	l := randomLimit(r, a, v)
	maxDelay := randomMaxDelay(r, l)
	now := int64(base + r.Int64N(l.PeriodMicros()*3))
	capacity, maxCost := l.Capacity(), l.MaxCost()
	var m model
	var last time.Duration
	events := make([]event, 0, sequenceHits)
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d, %s, %s, max delay %dus, hit %d at %d: %s", seed, l, v, maxDelay, len(events), now, fmt.Sprintf(format, args...))
	}
	decideAt := func(m model, cost, at, maxDelay int64) limits.Result {
		m = m.clone()
		return m.decide(l, cost, at, maxDelay).Result
	}
	for range sequenceHits {
		now += nextGap(r, l, last)
		cost := randomCost(r, l, v.refunds)

		// The expiry instant of the stored state is exact: from then on the
		// state decides like an absent key.
		if m.s.Live && now >= m.exp {
			for _, c := range []int64{0, 1, maxCost, maxCost + 1} {
				got := limits.DecideWithin(l, m.clone().s, c, now, maxDelay).Result
				want := limits.DecideWithin(l, limits.State{}, c, now, maxDelay).Result
				if got != want {
					fail("state %+v past its ExpireAt %d decides cost %d as %+v, absent key as %+v", m.s, m.exp, c, got, want)
				}
			}
		}

		before := m.clone()
		d := m.decide(l, cost, now, maxDelay)
		res := d.Result
		// The next gap may land on the edge of this answer's wait: the
		// retry's on a refusal that can fit, else the reset's.
		last = res.ResetAfter
		if res.RetryAfter > 0 {
			last = res.RetryAfter
		}
		events = append(events, event{now: now, cost: cost, allowed: res.Allowed, delay: res.Delay.Microseconds()})
		charges := l.CountRefused && cost > 0 && !res.Allowed

		if res.Remaining < 0 || res.Remaining > capacity {
			fail("cost %d: remaining got %d, want within [0, %d]", cost, res.Remaining, capacity)
		}
		if res.RetryAfter < 0 || res.ResetAfter < 0 || res.Delay < 0 {
			fail("cost %d: negative retry %s, reset %s or delay %s", cost, res.RetryAfter, res.ResetAfter, res.Delay)
		}
		if res.RetryAfter != 0 && (res.Allowed || cost > maxCost) {
			fail("cost %d: allowed %v with retry %s; only a refusal that can fit has one", cost, res.Allowed, res.RetryAfter)
		}
		if res.Delay != 0 && (a != limits.LeakyBucket || !res.Allowed) {
			fail("cost %d: allowed %v with delay %s; only an allowed leaky bucket hit waits", cost, res.Allowed, res.Delay)
		}
		if cost < 0 && !res.Allowed {
			fail("refund %d refused", cost)
		}
		if cost > maxCost && res.Allowed {
			fail("cost %d above the most that fits, %d: allowed", cost, maxCost)
		}
		if !res.Allowed && !charges && !reflect.DeepEqual(m, before) {
			fail("refused cost %d changed the state %+v → %+v", cost, before, m)
		}
		if cost == 0 && !reflect.DeepEqual(m, before) {
			fail("peek changed the state %+v → %+v", before, m)
		}
		if cost == 0 {
			// A peek answers as a hit of cost 1 would, consuming nothing.
			if one := decideAt(before, 1, now, maxDelay); one.Allowed != res.Allowed {
				fail("peek allowed %v, cost 1 allowed %v", res.Allowed, one.Allowed)
			}
		}
		if l.CountRefused {
			checkDebtCap(t, l, m.load(now), now, fail)
		}

		// Remaining is exact: that many hits of cost 1 now are allowed, one
		// more is not. A leaky bucket's remaining counts the free places in
		// its queue: when nothing is in service, one more hit is served at
		// once; and it is exact only up to leakyGranularity.
		extra := int64(0)
		if st := m.load(now); a == limits.LeakyBucket && (!st.Live || st.TAT <= now*1000) {
			extra = 1
		}
		probe, count := m.clone(), int64(0)
		for count <= res.Remaining+extra+leakyGranularity(l, now) && probe.decide(l, 1, now, 0).Result.Allowed {
			count++
		}
		if diff := count - res.Remaining - extra; diff < -leakyGranularity(l, now) || diff > leakyGranularity(l, now) {
			fail("remaining %d, but %d hits of cost 1 right after are allowed", res.Remaining, count)
		}

		// Both waits are measured from the state kept, a count_refused
		// charge included.
		if retry := res.RetryAfter.Microseconds(); !res.Allowed && cost <= maxCost {
			// Waiting exactly RetryAfter suffices, and no shorter wait does.
			if !decideAt(m, cost, now+retry, maxDelay).Allowed {
				fail("refused cost %d with retry %s, still refused after waiting it", cost, res.RetryAfter)
			}
			if retry > 0 && decideAt(m, cost, now+retry-1, maxDelay).Allowed {
				fail("refused cost %d with retry %s, but allowed 1us earlier (state %+v)", cost, res.RetryAfter, m.s)
			}
		}
		// ResetAfter, on every answer, is the wait until remaining is back
		// at its maximum.
		reset := res.ResetAfter.Microseconds()
		if got := decideAt(m, 0, now+reset, 0).Remaining; got != capacity {
			fail("cost %d: reset %s, remaining after waiting it got %d want %d", cost, res.ResetAfter, got, capacity)
		}
		if reset > 0 && capacity > 0 {
			if got := decideAt(m, 0, now+reset-1, 0).Remaining; got >= capacity {
				fail("cost %d: reset %s, but remaining already %d 1us earlier", cost, res.ResetAfter, got)
			}
		}
	}
	return l, maxDelay, events
}

// leakyGranularity is how far a leaky bucket's remaining may be from the
// hits that are then allowed. Its drain instant is a float64 of absolute
// microseconds, so near 2^51 µs (today) it moves in quarter microseconds: each
// hit advances it by Q, I rounded to a multiple of 0.25 µs, while remaining
// divides by I itself. Over B places the two can part by B·|I − Q|/Q ≤
// B·0.125/(I − 0.125) hits, plus one for the rounding of either.
func leakyGranularity(l limits.Limit, now int64) int64 {
	if l.Algorithm != limits.LeakyBucket {
		return 0
	}
	f := float64(now)
	half := (math.Nextafter(f, math.Inf(1)) - f) / 2
	i := float64(l.PeriodMicros()) / float64(l.Requests)
	return 2 + int64(float64(l.Burst)*half/(i-half))
}

// checkDebtCap checks that count_refused charges stop at one period's worth
// of debt.
func checkDebtCap(t *testing.T, l limits.Limit, s limits.State, now int64, fail func(string, ...any)) {
	t.Helper()
	n := l.Requests
	switch l.Algorithm {
	case limits.FixedWindow, limits.SlidingWindow:
		if s.Count > 2*n {
			fail("count %d above 2N = %d", s.Count, 2*n)
		}
	case limits.SlidingLog:
		sum := int64(0)
		for _, e := range s.Log {
			if e.At > now-l.PeriodMicros() {
				sum += e.Cost
			}
		}
		if sum > 2*n {
			fail("log holds %d in the window, above 2N = %d", sum, 2*n)
		}
	case limits.TokenBucket:
		// Tokens below −N: the bucket full again beyond (B + N)·I.
		if capAt := now*1000 + (l.Capacity()+n)*limits.Interval(l); s.Live && s.TAT > capAt {
			fail("tat %d beyond now + (B + N)·I = %d", s.TAT, capAt)
		}
	case limits.LeakyBucket:
		if capAt := now*1000 + (l.Burst+n)*limits.Interval(l); s.Live && s.TAT > capAt {
			fail("drain %d beyond now + (B + N)·I = %d", s.TAT, capAt)
		}
	}
}

// forEachSequence runs every variant's sequences and checks the bounds on
// those without refunds (a refund gives quota back, so the bounds do not
// hold there; every per-decision rule still does).
func forEachSequence(t *testing.T, a limits.Algorithm, check func(t *testing.T, seed uint64, l limits.Limit, maxDelay int64, events []event)) {
	t.Helper()
	n, extra := propertyIterations(t), propertySeed(t)
	for _, countRefused := range []bool{false, true} {
		for i := range n {
			seed := uint64(i)*4 + uint64(a)*1_000_003 + extra
			if countRefused {
				seed += 2
			}
			runSequence(t, seed+1, a, variant{refunds: true, countRefused: countRefused})
			l, maxDelay, events := runSequence(t, seed, a, variant{countRefused: countRefused})
			check(t, seed, l, maxDelay, events)
		}
	}
}

func TestPropertyFixedWindow(t *testing.T) {
	forEachSequence(t, limits.FixedWindow, func(t *testing.T, seed uint64, l limits.Limit, _ int64, events []event) {
		// Never more than N per aligned window, and a hit is allowed exactly
		// when it fits; a count_refused charge counts too, up to 2N.
		T, N := l.PeriodMicros(), l.Requests
		used, allowed := map[int64]int64{}, map[int64]int64{}
		for i, ev := range events {
			w := ev.now / T
			fits := ev.cost <= N && used[w]+max(ev.cost, 1) <= N
			if ev.allowed != fits {
				t.Fatalf("seed %d, %s, hit %d (cost %d, %d used in window): allowed got %v want %v", seed, l, i, ev.cost, used[w], ev.allowed, fits)
			}
			switch {
			case ev.allowed && ev.cost > 0:
				used[w] += ev.cost
				allowed[w] += ev.cost
			case !ev.allowed && l.CountRefused && ev.cost > 0:
				used[w] = min(used[w]+ev.cost, 2*N)
			}
			if allowed[w] > N {
				t.Fatalf("seed %d, %s: window %d allowed %d, want at most %d", seed, l, w, allowed[w], N)
			}
		}
	})
}

func TestPropertySlidingWindow(t *testing.T) {
	forEachSequence(t, limits.SlidingWindow, func(t *testing.T, seed uint64, l limits.Limit, _ int64, events []event) {
		// Each hit is allowed exactly when prev·(T−e)/T + cur + c ≤ N for
		// the hits counted, in exact integer arithmetic:
		// prev·(T−e) + (cur+c)·T ≤ N·T. So the allowed hits never exceed
		// what the estimate allows.
		T, N := l.PeriodMicros(), l.Requests
		used := map[int64]int64{}
		for i, ev := range events {
			w, e := ev.now/T, ev.now%T
			prev, cur := used[w-1], used[w]
			need := max(ev.cost, 1)
			fits := ev.cost <= N && prev*(T-e)+(cur+need)*T <= N*T
			if ev.allowed != fits {
				t.Fatalf("seed %d, %s, hit %d (cost %d, prev %d, cur %d, e %d): allowed got %v want %v", seed, l, i, ev.cost, prev, cur, e, ev.allowed, fits)
			}
			switch {
			case ev.allowed && ev.cost > 0:
				used[w] += ev.cost
			case !ev.allowed && l.CountRefused && ev.cost > 0:
				used[w] = min(used[w]+ev.cost, 2*N)
			}
		}
	})
}

func TestPropertyTokenBucket(t *testing.T) {
	forEachSequence(t, limits.TokenBucket, func(t *testing.T, seed uint64, l limits.Limit, _ int64, events []event) {
		// In any interval [t_i, t_j], the allowed cost is at most
		// B + N/T·(t_j − t_i). Scaled by T, with S the prefix sums:
		// T·(S_j − S_{i−1}) − N·(t_j − t_i) ≤ B·T. The tokens are float64, so
		// the interval is granted one extra microsecond of refill for
		// rounding. Charges of refused hits only make it stricter.
		T, N, B := l.PeriodMicros(), l.Requests, l.Capacity()
		t0 := events[0].now
		var sum int64               // S_{j}
		minPrefix := int64(1 << 62) // min over i ≤ j of T·S_{i−1} − N·t_i
		for j, ev := range events {
			tj := ev.now - t0
			minPrefix = min(minPrefix, T*sum-N*tj)
			if ev.allowed && ev.cost > 0 {
				sum += ev.cost
			}
			if over := T*sum - N*tj - minPrefix; over > B*T+N {
				t.Fatalf("seed %d, %s: by hit %d, an interval allowed %d/T too much (B·T = %d)", seed, l, j, over-B*T, B*T)
			}
		}
	})
}

func TestPropertySlidingLog(t *testing.T) {
	forEachSequence(t, limits.SlidingLog, func(t *testing.T, seed uint64, l limits.Limit, _ int64, events []event) {
		// Exact: a hit is allowed exactly when the costs counted in
		// (now − T, now] plus its own fit N (a count_refused charge counts,
		// up to 2N), and the allowed costs in any window (t − T, t] never
		// exceed N. The window ending at an allowed hit is the fullest.
		T, N := l.PeriodMicros(), l.Requests
		type entry struct{ at, cost int64 }
		var counted, allowed []entry
		in := func(es []entry, now int64) int64 {
			sum := int64(0)
			for _, e := range es {
				if e.at > now-T && e.at <= now {
					sum += e.cost
				}
			}
			return sum
		}
		for i, ev := range events {
			total := in(counted, ev.now)
			fits := ev.cost <= N && total+max(ev.cost, 1) <= N
			if ev.allowed != fits {
				t.Fatalf("seed %d, %s, hit %d (cost %d, %d counted): allowed got %v want %v", seed, l, i, ev.cost, total, ev.allowed, fits)
			}
			switch {
			case ev.allowed && ev.cost > 0:
				counted = append(counted, entry{ev.now, ev.cost})
				allowed = append(allowed, entry{ev.now, ev.cost})
			case !ev.allowed && l.CountRefused && ev.cost > 0:
				if add := min(ev.cost, 2*N-total); add > 0 {
					counted = append(counted, entry{ev.now, add})
				}
			}
			if got := in(allowed, ev.now); got > N {
				t.Fatalf("seed %d, %s: the window ending at hit %d allowed %d, want at most %d", seed, l, i, got, N)
			}
		}
	})
}

func TestPropertyLeakyBucket(t *testing.T) {
	forEachSequence(t, limits.LeakyBucket, func(t *testing.T, seed uint64, l limits.Limit, maxDelay int64, events []event) {
		// Shaping: allowed hits are served (arrival + Delay) one interval
		// I = T/N per unit of cost apart, and none waits more than B·I (nor
		// the caller's maxDelay). The drain instant is a float64 near 2^51
		// µs, so each step may round by a quarter microsecond, and Delay is
		// rounded up to a whole one.
		I := float64(l.PeriodMicros()) / float64(l.Requests)
		worst := float64(l.Burst) * I
		var prevServe, prevCost int64
		seen := false
		for i, ev := range events {
			if !ev.allowed || ev.cost <= 0 {
				continue
			}
			if float64(ev.delay) > math.Ceil(worst) || (maxDelay > 0 && ev.delay > maxDelay) {
				t.Fatalf("seed %d, %s, hit %d: delay %dus, want at most B·I = %.3fus and max delay %dus", seed, l, i, ev.delay, worst, maxDelay)
			}
			serve := ev.now + ev.delay
			slack := 1 + float64(prevCost)*0.125 // see leakyGranularity
			if seen && float64(serve-prevServe) < float64(prevCost)*I-slack {
				t.Fatalf("seed %d, %s, hit %d: served %dus after the previous one of cost %d, want at least %.3fus", seed, l, i, serve-prevServe, prevCost, float64(prevCost)*I)
			}
			prevServe, prevCost, seen = serve, ev.cost, true
		}
	})
}
