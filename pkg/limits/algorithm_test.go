package limits_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// base is a fixed instant aligned to every period the tables use (1 s, 30 s,
// 5 min, 1 h): 2023-11-14T22:00:00Z, in microseconds.
const base = 1_699_999_200_000_000

const (
	ms  = int64(1_000)
	sec = int64(1_000_000)
)

type decideCase struct {
	name  string
	limit limits.Limit
	state limits.State
	cost  int64
	now   int64
	want  limits.Decision
}

func runDecideCases(t *testing.T, cases []decideCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := limits.Decide(tc.limit, tc.state, tc.cost, tc.now)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Decide(%s, %+v, cost %d, now %d):\n got  %+v\n want %+v",
					tc.limit, tc.state, tc.cost, tc.now, got, tc.want)
			}
		})
	}
}

// res is an allowed result: remaining, and the wait until it is back at its
// maximum.
func res(allowed bool, remaining int64, reset time.Duration) limits.Result {
	return limits.Result{Allowed: allowed, Remaining: remaining, ResetAfter: reset}
}

// no is a refused result: remaining, the wait until the same hit is allowed
// (zero when it never fits), and the wait until remaining is back at its
// maximum.
func no(remaining int64, retry, reset time.Duration) limits.Result {
	return limits.Result{Remaining: remaining, RetryAfter: retry, ResetAfter: reset}
}

func us(n int64) time.Duration { return time.Duration(n) * time.Microsecond }

func TestDecideFixedWindow(t *testing.T) {
	l := limits.Limit{Algorithm: limits.FixedWindow, Requests: 3, Period: time.Second}
	w := int64(base / sec) // the window of base
	now := base + 250*ms   // 250 ms into window w, 750 ms before its end
	end := base + sec
	live := func(window, count int64) limits.State {
		return limits.State{Live: true, Window: window, Count: count}
	}
	runDecideCases(t, []decideCase{
		{"absent first hit", l, limits.State{}, 1, now, limits.Decision{
			Result: res(true, 2, 750*time.Millisecond), State: live(w, 1), Changed: true, ExpireAt: end}},
		{"last allowed", l, live(w, 2), 1, now, limits.Decision{
			Result: res(true, 0, 750*time.Millisecond), State: live(w, 3), Changed: true, ExpireAt: end}},
		{"over: refused until the window ends", l, live(w, 3), 1, now, limits.Decision{
			Result: no(0, 750*time.Millisecond, 750*time.Millisecond)}},
		{"over: 1us before the boundary", l, live(w, 3), 1, end - 1, limits.Decision{
			Result: no(0, time.Microsecond, time.Microsecond)}},
		{"boundary starts a new window", l, live(w, 3), 1, end, limits.Decision{
			Result: res(true, 2, time.Second), State: live(w+1, 1), Changed: true, ExpireAt: end + sec}},
		{"stale window is ignored", l, live(w-5, 3), 2, now, limits.Decision{
			Result: res(true, 1, 750*time.Millisecond), State: live(w, 2), Changed: true, ExpireAt: end}},
		{"cost 2 does not fit in 1", l, live(w, 2), 2, now, limits.Decision{
			Result: no(1, 750*time.Millisecond, 750*time.Millisecond)}},
		{"cost N fits an empty window", l, limits.State{}, 3, now, limits.Decision{
			Result: res(true, 0, 750*time.Millisecond), State: live(w, 3), Changed: true, ExpireAt: end}},
		{"peek absent", l, limits.State{}, 0, now, limits.Decision{
			Result: res(true, 3, 0)}},
		{"peek consumes nothing", l, live(w, 2), 0, now, limits.Decision{
			Result: res(true, 1, 750*time.Millisecond)}},
		{"peek refused when cost 1 would be", l, live(w, 3), 0, now, limits.Decision{
			Result: no(0, 750*time.Millisecond, 750*time.Millisecond)}},
		{"never fits: key untouched", l, live(w, 1), 4, now, limits.Decision{
			Result: no(2, 0, 750*time.Millisecond)}},
		{"never fits on absent key: already at maximum", l, limits.State{}, 4, now, limits.Decision{
			Result: no(3, 0, 0)}},
		{"refund", l, live(w, 3), -2, now, limits.Decision{
			Result: res(true, 2, 750*time.Millisecond), State: live(w, 1), Changed: true, ExpireAt: end}},
		{"refund never above N: key deleted", l, live(w, 1), -5, now, limits.Decision{
			Result: res(true, 3, 0), State: limits.State{Window: w}, Changed: true}},
		{"refund on absent key", l, limits.State{}, -1, now, limits.Decision{
			Result: res(true, 3, 0), State: limits.State{Window: w}, Changed: true}},
		{"negative instant floors", l, limits.State{}, 1, -1, limits.Decision{
			Result: res(true, 2, time.Microsecond), State: live(-1, 1), Changed: true, ExpireAt: 0}},
	})

	t.Run("30s and 5min windows are epoch aligned", func(t *testing.T) {
		for _, p := range []time.Duration{30 * time.Second, 5 * time.Minute} {
			l := limits.Limit{Algorithm: limits.FixedWindow, Requests: 1, Period: p}
			pu := p.Microseconds()
			at := base + pu/3 // base is aligned to both
			d := limits.Decide(l, limits.State{}, 1, at)
			if want := (base/pu + 1) * pu; d.ExpireAt != want {
				t.Errorf("%s: ExpireAt got %d want %d", p, d.ExpireAt, want)
			}
			if want := p - p/3; d.Result.ResetAfter != want {
				t.Errorf("%s: ResetAfter got %s want %s", p, d.Result.ResetAfter, want)
			}
		}
	})
}

func TestDecideSlidingWindow(t *testing.T) {
	l := limits.Limit{Algorithm: limits.SlidingWindow, Requests: 10, Period: time.Second}
	w := int64(base / sec)
	st := func(window, cur, prev int64) limits.State {
		return limits.State{Live: true, Window: window, Count: cur, Prev: prev}
	}
	at := func(e int64) int64 { return base + e } // e µs into window w
	runDecideCases(t, []decideCase{
		// prev 8 weighs 8 × 0.75 = 6 at e = 250 ms.
		{"previous window becomes prev", l, st(w-1, 8, 0), 1, at(250 * ms), limits.Decision{
			Result: res(true, 3, 1750*time.Millisecond), State: st(w, 1, 8), Changed: true, ExpireAt: base + 2*sec}},
		{"estimate reaches N exactly", l, st(w, 3, 8), 1, at(250 * ms), limits.Decision{
			Result: res(true, 0, 1750*time.Millisecond), State: st(w, 4, 8), Changed: true, ExpireAt: base + 2*sec}},
		// 8 × (T − e')/T + 4 + 1 ≤ 10 from e' = 375 ms: wait 125 ms.
		{"over: wait for prev to decay", l, st(w, 4, 8), 1, at(250 * ms), limits.Decision{
			Result: no(0, 125*time.Millisecond, 1750*time.Millisecond)}},
		{"over: 1us before the decay is enough", l, st(w, 4, 8), 1, at(375*ms - 1), limits.Decision{
			Result: no(0, time.Microsecond, us(1625001))}},
		{"over: decayed just enough", l, st(w, 4, 8), 1, at(375 * ms), limits.Decision{
			Result: res(true, 0, 1625*time.Millisecond), State: st(w, 5, 8), Changed: true, ExpireAt: base + 2*sec}},
		// 8 × (T − e')/T + 4 + 3 ≤ 10 from e' = 625 ms.
		{"cost 3 waits longer", l, st(w, 4, 8), 3, at(250 * ms), limits.Decision{
			Result: no(0, 375*time.Millisecond, 1750*time.Millisecond)}},
		// cur 9 + 2 > 10 in this window; in the next one 9 × (T − e2)/T + 2 ≤ 10
		// from e2 = T − floor(8T/9) = 111112 µs.
		{"over: wait for the next window", l, st(w, 9, 0), 2, at(250 * ms), limits.Decision{
			Result: no(1, us(750_000+111_112), 1750*time.Millisecond)}},
		{"over: at the computed instant", l, st(w-1, 9, 0), 2, at(111_112), limits.Decision{
			Result: res(true, 0, us(2*sec-111_112)), State: st(w, 2, 9), Changed: true, ExpireAt: base + 2*sec}},
		{"over: 1us before the computed instant", l, st(w-1, 9, 0), 2, at(111_111), limits.Decision{
			Result: no(1, time.Microsecond, us(888889))}},
		{"full previous window at the boundary", l, st(w-1, 10, 0), 1, at(0), limits.Decision{
			Result: no(0, 100*time.Millisecond, time.Second)}},
		{"two windows back is absent", l, st(w-2, 10, 10), 1, at(0), limits.Decision{
			Result: res(true, 9, 2*time.Second), State: st(w, 1, 0), Changed: true, ExpireAt: base + 2*sec}},
		{"peek consumes nothing", l, st(w, 4, 8), 0, at(500 * ms), limits.Decision{
			Result: res(true, 2, 1500*time.Millisecond)}},
		{"peek refused when cost 1 would be", l, st(w, 4, 8), 0, at(250 * ms), limits.Decision{
			Result: no(0, 125*time.Millisecond, 1750*time.Millisecond)}},
		{"never fits, cur set: back at max after 2T - e", l, st(w, 4, 8), 11, at(250 * ms), limits.Decision{
			Result: no(0, 0, 1750*time.Millisecond)}},
		{"never fits, only prev: back at max after T - e", l, st(w-1, 4, 0), 11, at(250 * ms), limits.Decision{
			Result: no(7, 0, 750*time.Millisecond)}},
		{"never fits on absent key", l, limits.State{}, 11, at(250 * ms), limits.Decision{
			Result: no(10, 0, 0)}},
		{"refund", l, st(w, 4, 8), -3, at(250 * ms), limits.Decision{
			Result: res(true, 3, 1750*time.Millisecond), State: st(w, 1, 8), Changed: true, ExpireAt: base + 2*sec}},
		{"refund floors cur at 0, prev stays", l, st(w, 4, 8), -10, at(250 * ms), limits.Decision{
			Result: res(true, 4, 750*time.Millisecond), State: st(w, 0, 8), Changed: true, ExpireAt: base + sec}},
		{"refund to nothing deletes the key", l, st(w, 2, 0), -3, at(250 * ms), limits.Decision{
			Result: res(true, 10, 0), State: limits.State{Window: w}, Changed: true}},
	})

	t.Run("next window start is checked, not assumed", func(t *testing.T) {
		// 93214 × T is beyond 2^53 for this (valid) period, and
		// 93214 × T / T rounds above 93214: the next window's first
		// microsecond does not fit yet, the one after does.
		T := int64(839_528_366) * sec
		big := limits.Limit{Algorithm: limits.SlidingWindow, Requests: 93232, Period: time.Duration(T) * time.Microsecond}
		runDecideCases(t, []decideCase{
			{"refused in window 2", big, st(2, 93214, 1), 18, 2*T + 1000, limits.Decision{
				Result: no(17, us(T-1000+1), us(2*T-1000))}},
			{"still refused at the boundary", big, st(2, 93214, 1), 18, 3 * T, limits.Decision{
				Result: no(17, time.Microsecond, us(T))}},
			{"allowed after the reported wait", big, st(2, 93214, 1), 18, 3*T + 1, limits.Decision{
				Result: res(true, 0, us(2*T-1)), State: st(3, 18, 93214), Changed: true, ExpireAt: 5 * T}},
		})
	})

	t.Run("estimate decays across the window", func(t *testing.T) {
		// prev 8, cur 0: remaining = floor(10 − 8 × (T − e)/T).
		for _, c := range []struct {
			e, remaining int64
			reset        time.Duration
		}{
			{0, 2, time.Second},
			{250 * ms, 4, 750 * time.Millisecond},
			{500 * ms, 6, 500 * time.Millisecond},
			{750 * ms, 8, 250 * time.Millisecond},
			{875 * ms, 9, 125 * time.Millisecond},
			{sec - 1, 9, time.Microsecond},
			{sec, 10, 0}, // next window: prev is two windows back
		} {
			d := limits.Decide(l, st(w-1, 8, 0), 0, at(c.e))
			if want := res(true, c.remaining, c.reset); d.Result != want || d.Changed {
				t.Errorf("peek at e=%dus: got %+v changed %v, want %+v unchanged", c.e, d.Result, d.Changed, want)
			}
		}
	})
}

func TestDecideTokenBucket(t *testing.T) {
	// 10 per second: one token every 100 ms.
	l := limits.Limit{Algorithm: limits.TokenBucket, Requests: 10, Period: time.Second}
	burst := limits.Limit{Algorithm: limits.TokenBucket, Requests: 10, Period: time.Second, Burst: 20}
	now := int64(base + 123)
	// st is a bucket of l holding tokens at stamp: full again B − tokens
	// intervals later.
	st := func(tokens float64, stamp int64, of ...limits.Limit) limits.State {
		lim := l
		if len(of) > 0 {
			lim = of[0]
		}
		return limits.State{Live: true, TAT: stamp*1000 + int64((float64(lim.Capacity())-tokens)*float64(limits.Interval(lim)))}
	}
	runDecideCases(t, []decideCase{
		{"absent is full (B defaults to N)", l, limits.State{}, 1, now, limits.Decision{
			Result: res(true, 9, 100*time.Millisecond), State: st(9, now), Changed: true, ExpireAt: now + 100*ms}},
		{"last token", l, st(1, now), 1, now, limits.Decision{
			Result: res(true, 0, time.Second), State: st(0, now), Changed: true, ExpireAt: now + sec}},
		{"empty: wait one token", l, st(0, now), 1, now, limits.Decision{
			Result: no(0, 100*time.Millisecond, time.Second)}},
		{"refill half a token", l, st(0, now-50*ms), 1, now, limits.Decision{
			Result: no(0, 50*time.Millisecond, 950*time.Millisecond)}},
		{"refill exactly one token", l, st(0, now-100*ms), 1, now, limits.Decision{
			Result: res(true, 0, time.Second), State: st(0, now), Changed: true, ExpireAt: now + sec}},
		{"cost 3 waits for 3 tokens", l, st(0.5, now), 3, now, limits.Decision{
			Result: no(0, 250*time.Millisecond, 950*time.Millisecond)}},
		{"refill is capped at B", l, st(2, now-time.Hour.Microseconds()), 1, now, limits.Decision{
			Result: res(true, 9, 100*time.Millisecond), State: st(9, now), Changed: true, ExpireAt: now + 100*ms}},
		{"fractional tokens floor", l, st(2.5, now), 1, now, limits.Decision{
			Result: res(true, 1, 850*time.Millisecond), State: st(1.5, now), Changed: true, ExpireAt: now + 850*ms}},
		{"burst above N", burst, limits.State{}, 20, now, limits.Decision{
			Result: res(true, 0, 2*time.Second), State: st(0, now, burst), Changed: true, ExpireAt: now + 2*sec}},
		{"burst refills to B, not N", burst, st(0, now-5*sec, burst), 0, now, limits.Decision{
			Result: res(true, 20, 0)}},
		{"cost above N fits a burst", burst, st(15, now, burst), 12, now, limits.Decision{
			Result: res(true, 3, 1700*time.Millisecond), State: st(3, now, burst), Changed: true, ExpireAt: now + 1700*ms}},
		{"peek consumes nothing", l, st(3, now), 0, now, limits.Decision{
			Result: res(true, 3, 700*time.Millisecond)}},
		{"peek refused when cost 1 would be", l, st(0.5, now), 0, now, limits.Decision{
			Result: no(0, 50*time.Millisecond, 950*time.Millisecond)}},
		{"never fits: key untouched, reset until full", l, st(3, now), 11, now, limits.Decision{
			Result: no(3, 0, 700*time.Millisecond)}},
		{"never fits above burst", burst, limits.State{}, 21, now, limits.Decision{
			Result: no(20, 0, 0)}},
		{"refund", l, st(3, now), -4, now, limits.Decision{
			Result: res(true, 7, 300*time.Millisecond), State: st(7, now), Changed: true, ExpireAt: now + 300*ms}},
		{"refund never above B: key deleted", l, st(3, now), -100, now, limits.Decision{
			Result: res(true, 10, 0), State: limits.State{TAT: now * 1000}, Changed: true}},
	})

	t.Run("waits in whole intervals, rounded up to the microsecond", func(t *testing.T) {
		// 10 per ms, burst 13, holding 1.13: full again 11.87 intervals of
		// 100 µs on.
		fast := limits.Limit{Algorithm: limits.TokenBucket, Requests: 10, Period: time.Millisecond, Burst: 13}
		// 3 per second: I = 333333333 ns (rounded down), so the three
		// tokens are back within the second: 999999999 ns after the last.
		slow := limits.Limit{Algorithm: limits.TokenBucket, Requests: 3, Period: time.Second}
		runDecideCases(t, []decideCase{
			{"fractional interval", fast, st(1.13, now, fast), 0, now, limits.Decision{
				Result: res(true, 1, us(1187))}},
			{"never fits: wait from the kept state", slow, st(0, now, slow), 4, now + 41_700, limits.Decision{
				Result: no(0, 0, us(958300))}},
			{"refused: wait from the kept state", slow, st(0, now, slow), 1, now + 41_700, limits.Decision{
				Result: no(0, us(333_334-41_700), us(958300))}},
			{"peek: wait from the kept state", slow, st(2, now, slow), 0, now + 41_700, limits.Decision{
				Result: res(true, 2, us(333_334-41_700))}},
			{"full again in exactly a period", slow, limits.State{}, 3, now, limits.Decision{
				Result: res(true, 0, time.Second), State: st(0, now, slow), Changed: true, ExpireAt: now + sec}},
		})
	})
}
