package limits_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// withinCase is a decideCase with the caller's deadline for a leaky bucket
// (maxDelay µs, zero for none).
type withinCase struct {
	name     string
	limit    limits.Limit
	state    limits.State
	cost     int64
	now      int64
	maxDelay int64
	want     limits.Decision
}

func runWithinCases(t *testing.T, cases []withinCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// The input is copied so that a decision sharing its log's storage
			// cannot change what the case reads.
			in := tc.state
			in.Log = append([]limits.LogEntry(nil), in.Log...)
			got := limits.DecideWithin(tc.limit, in, tc.cost, tc.now, tc.maxDelay)
			// An emptied log is as good as none.
			if len(got.State.Log) == 0 {
				got.State.Log = nil
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("DecideWithin(%s, %+v, cost %d, now %d, max delay %d):\n got  %+v\n want %+v",
					tc.limit, tc.state, tc.cost, tc.now, tc.maxDelay, got, tc.want)
			}
		})
	}
}

// delayed is an allowed result that waits delay for its turn.
func delayed(remaining int64, reset, delay time.Duration) limits.Result {
	return limits.Result{Allowed: true, Remaining: remaining, ResetAfter: reset, Delay: delay}
}

func logOf(entries ...limits.LogEntry) limits.State {
	sum := int64(0)
	for _, e := range entries {
		sum += e.Cost
	}
	return limits.State{Live: len(entries) > 0, Count: sum, Log: entries}
}

func TestDecideSlidingLog(t *testing.T) {
	// 3 per second; now is 500 ms after base, so the window is
	// (base − 500 ms, base + 500 ms].
	l := limits.Limit{Algorithm: limits.SlidingLog, Requests: 3, Period: time.Second}
	now := base + 500*ms
	at := func(offset, cost int64) limits.LogEntry { return limits.LogEntry{At: base + offset, Cost: cost} }
	full := logOf(at(100*ms, 1), at(300*ms, 1), at(400*ms, 1))
	runWithinCases(t, []withinCase{
		{name: "absent first hit", limit: l, cost: 1, now: now, want: limits.Decision{
			Result: res(true, 2, time.Second), State: logOf(at(500*ms, 1)), Changed: true, ExpireAt: now + sec}},
		{name: "last allowed: back at N when the newest leaves", limit: l, state: logOf(at(100*ms, 1), at(300*ms, 1)), cost: 1, now: now, want: limits.Decision{
			Result: res(true, 0, time.Second), State: logOf(at(100*ms, 1), at(300*ms, 1), at(500*ms, 1)), Changed: true, ExpireAt: now + sec}},
		{name: "full: refused until the oldest leaves", limit: l, state: full, cost: 1, now: now, want: limits.Decision{
			Result: no(0, 600*time.Millisecond, 900*time.Millisecond)}},
		{name: "full: 1us before the oldest leaves", limit: l, state: full, cost: 1, now: base + 1100*ms - 1, want: limits.Decision{
			Result: no(0, time.Microsecond, us(300001))}},
		// The window is (now − T, now]: an entry at exactly now − T is out.
		{name: "the oldest leaves at At + T", limit: l, state: full, cost: 1, now: base + 1100*ms, want: limits.Decision{
			Result: res(true, 0, time.Second), State: logOf(at(300*ms, 1), at(400*ms, 1), at(1100*ms, 1)), Changed: true, ExpireAt: base + 2100*ms}},
		{name: "cost 2 waits for two entries", limit: l, state: full, cost: 2, now: now, want: limits.Decision{
			Result: no(0, 800*time.Millisecond, 900*time.Millisecond)}},
		{name: "an entry of cost 2 leaves at once", limit: l, state: logOf(at(100*ms, 2)), cost: 2, now: now, want: limits.Decision{
			Result: no(1, 600*time.Millisecond, 600*time.Millisecond)}},
		{name: "hits at one instant are separate entries", limit: l, state: logOf(at(500*ms, 1)), cost: 1, now: now, want: limits.Decision{
			Result: res(true, 1, time.Second), State: logOf(at(500*ms, 1), at(500*ms, 1)), Changed: true, ExpireAt: now + sec}},
		{name: "entries that left are dropped on a change", limit: l, state: logOf(at(-600*ms, 1), at(-500*ms, 1), at(-499*ms, 1)), cost: 1, now: now, want: limits.Decision{
			Result: res(true, 1, time.Second), State: logOf(at(-499*ms, 1), at(500*ms, 1)), Changed: true, ExpireAt: now + sec}},
		{name: "peek consumes nothing", limit: l, state: logOf(at(100*ms, 1)), cost: 0, now: now, want: limits.Decision{
			Result: res(true, 2, 600*time.Millisecond)}},
		{name: "peek on entries that all left", limit: l, state: logOf(at(-600*ms, 1), at(-500*ms, 1)), cost: 0, now: now, want: limits.Decision{
			Result: res(true, 3, 0)}},
		{name: "peek refused when cost 1 would be", limit: l, state: full, cost: 0, now: now, want: limits.Decision{
			Result: no(0, 600*time.Millisecond, 900*time.Millisecond)}},
		{name: "never fits: key untouched, reset until all leave", limit: l, state: logOf(at(100*ms, 1), at(200*ms, 1)), cost: 4, now: now, want: limits.Decision{
			Result: no(1, 0, 700*time.Millisecond)}},
		{name: "never fits on absent key", limit: l, cost: 4, now: now, want: limits.Decision{
			Result: no(3, 0, 0)}},
		{name: "refund takes from the newest entry", limit: l, state: logOf(at(100*ms, 1), at(300*ms, 2)), cost: -1, now: now, want: limits.Decision{
			Result: res(true, 1, 800*time.Millisecond), State: logOf(at(100*ms, 1), at(300*ms, 1)), Changed: true, ExpireAt: base + 1300*ms}},
		{name: "refund across entries", limit: l, state: logOf(at(100*ms, 1), at(300*ms, 2)), cost: -2, now: now, want: limits.Decision{
			Result: res(true, 2, 600*time.Millisecond), State: logOf(at(100*ms, 1)), Changed: true, ExpireAt: base + 1100*ms}},
		{name: "refund never above N: key deleted", limit: l, state: logOf(at(100*ms, 1), at(300*ms, 2)), cost: -10, now: now, want: limits.Decision{
			Result: res(true, 3, 0), Changed: true}},
		{name: "refund on absent key", limit: l, cost: -1, now: now, want: limits.Decision{
			Result: res(true, 3, 0), Changed: true}},
	})

	t.Run("the input log is not modified", func(t *testing.T) {
		in := logOf(at(-600*ms, 1), at(100*ms, 1), at(300*ms, 2))
		keep := append([]limits.LogEntry(nil), in.Log...)
		for _, cost := range []int64{1, 0, -2, 5, 1} {
			limits.Decide(l, in, cost, now)
			if !reflect.DeepEqual(in.Log, keep) {
				t.Fatalf("cost %d: input log got %+v want %+v", cost, in.Log, keep)
			}
		}
	})
}

func TestDecideLeakyBucket(t *testing.T) {
	// 10 per second: one turn every I = 100 ms, exact in float64. B = 2: two
	// places in the queue besides the request in service.
	l := limits.Limit{Algorithm: limits.LeakyBucket, Requests: 10, Period: time.Second, Burst: 2}
	noQueue := limits.Limit{Algorithm: limits.LeakyBucket, Requests: 10, Period: time.Second}
	now := int64(base + 123)
	drain := func(backlog int64) limits.State {
		return limits.State{Live: true, TAT: (now + backlog) * 1000}
	}
	runWithinCases(t, []withinCase{
		{name: "absent: served at once", limit: l, cost: 1, now: now, want: limits.Decision{
			Result: delayed(2, 0, 0), State: drain(100 * ms), Changed: true, ExpireAt: now + 100*ms}},
		{name: "second waits one turn", limit: l, state: drain(100 * ms), cost: 1, now: now, want: limits.Decision{
			Result: delayed(1, 100*time.Millisecond, 100*time.Millisecond), State: drain(200 * ms), Changed: true, ExpireAt: now + 200*ms}},
		{name: "third takes the last place", limit: l, state: drain(200 * ms), cost: 1, now: now, want: limits.Decision{
			Result: delayed(0, 200*time.Millisecond, 200*time.Millisecond), State: drain(300 * ms), Changed: true, ExpireAt: now + 300*ms}},
		{name: "full: refused at once until a place frees", limit: l, state: drain(300 * ms), cost: 1, now: now, want: limits.Decision{
			Result: no(0, 100*time.Millisecond, 200*time.Millisecond)}},
		{name: "full: 1us before a place frees", limit: l, state: drain(300 * ms), cost: 1, now: now + 100*ms - 1, want: limits.Decision{
			Result: no(0, time.Microsecond, us(100001))}},
		{name: "a place frees after I", limit: l, state: drain(300 * ms), cost: 1, now: now + 100*ms, want: limits.Decision{
			Result: delayed(0, 200*time.Millisecond, 200*time.Millisecond), State: drain(400 * ms), Changed: true, ExpireAt: now + 400*ms}},
		{name: "delay is rounded up to a microsecond", limit: l, state: limits.State{Live: true, TAT: (now+50_000)*1000 + 250}, cost: 1, now: now, want: limits.Decision{
			Result: delayed(1, 50_001*time.Microsecond, 50_001*time.Microsecond), State: limits.State{Live: true, TAT: (now+150_000)*1000 + 250}, Changed: true, ExpireAt: now + 150_001}},
		{name: "cost 2 takes two turns", limit: l, state: drain(100 * ms), cost: 2, now: now, want: limits.Decision{
			Result: delayed(0, 200*time.Millisecond, 100*time.Millisecond), State: drain(300 * ms), Changed: true, ExpireAt: now + 300*ms}},
		{name: "cost B+1 fits an idle bucket", limit: l, cost: 3, now: now, want: limits.Decision{
			Result: delayed(0, 200*time.Millisecond, 0), State: drain(300 * ms), Changed: true, ExpireAt: now + 300*ms}},
		{name: "cost B+1 waits until the bucket is idle", limit: l, state: drain(50 * ms), cost: 3, now: now, want: limits.Decision{
			Result: no(2, 50*time.Millisecond, 0)}},
		{name: "never fits above B+1: key untouched, reset until B places", limit: l, state: drain(250 * ms), cost: 4, now: now, want: limits.Decision{
			Result: no(0, 0, 150*time.Millisecond)}},
		{name: "never fits on absent key", limit: l, cost: 4, now: now, want: limits.Decision{
			Result: no(2, 0, 0)}},
		{name: "a drain in the past is an idle bucket", limit: l, state: drain(-5 * sec), cost: 1, now: now, want: limits.Decision{
			Result: delayed(2, 0, 0), State: drain(100 * ms), Changed: true, ExpireAt: now + 100*ms}},
		{name: "peek consumes nothing and takes no turn, so it does not wait", limit: l, state: drain(150 * ms), cost: 0, now: now, want: limits.Decision{
			Result: res(true, 1, 50*time.Millisecond)}},
		{name: "peek refused when cost 1 would be", limit: l, state: drain(250 * ms), cost: 0, now: now, want: limits.Decision{
			Result: no(0, 50*time.Millisecond, 150*time.Millisecond)}},
		{name: "refund", limit: l, state: drain(250 * ms), cost: -2, now: now, want: limits.Decision{
			Result: res(true, 2, 0), State: drain(50 * ms), Changed: true, ExpireAt: now + 50*ms}},
		{name: "refund never below an idle bucket: key deleted", limit: l, state: drain(100 * ms), cost: -5, now: now, want: limits.Decision{
			Result: res(true, 2, 0), State: limits.State{TAT: now * 1000}, Changed: true}},

		// The caller's deadline.
		{name: "max delay: a longer wait is refused, nothing charged", limit: l, state: drain(150 * ms), cost: 1, now: now, maxDelay: 100 * ms, want: limits.Decision{
			Result: no(1, 50*time.Millisecond, 50*time.Millisecond)}},
		{name: "max delay: 1us short", limit: l, state: drain(150 * ms), cost: 1, now: now, maxDelay: 150*ms - 1, want: limits.Decision{
			Result: no(1, time.Microsecond, 50*time.Millisecond)}},
		{name: "max delay: exactly the wait", limit: l, state: drain(150 * ms), cost: 1, now: now, maxDelay: 150 * ms, want: limits.Decision{
			Result: delayed(0, 150*time.Millisecond, 150*time.Millisecond), State: drain(250 * ms), Changed: true, ExpireAt: now + 250*ms}},
		{name: "max delay bounds the first turn, not the last", limit: l, state: drain(50 * ms), cost: 2, now: now, maxDelay: 60 * ms, want: limits.Decision{
			Result: delayed(0, 150*time.Millisecond, 50*time.Millisecond), State: drain(250 * ms), Changed: true, ExpireAt: now + 250*ms}},
		{name: "max delay: the queue is still the bound", limit: l, state: drain(300 * ms), cost: 1, now: now, maxDelay: sec, want: limits.Decision{
			Result: no(0, 100*time.Millisecond, 200*time.Millisecond)}},

		// B = 0: no queue, requests at least I apart.
		{name: "no queue: absent", limit: noQueue, cost: 1, now: now, want: limits.Decision{
			Result: delayed(0, 0, 0), State: drain(100 * ms), Changed: true, ExpireAt: now + 100*ms}},
		{name: "no queue: refused until the turn ends", limit: noQueue, state: drain(100 * ms), cost: 1, now: now, want: limits.Decision{
			Result: no(0, 100*time.Millisecond, 0)}},
		{name: "no queue: cost 2 never fits", limit: noQueue, cost: 2, now: now, want: limits.Decision{
			Result: no(0, 0, 0)}},
	})

	t.Run("interval in whole nanoseconds", func(t *testing.T) {
		// 3 per second: I = 333333333 ns, rounded down; waits round up to
		// the microsecond.
		third := limits.Limit{Algorithm: limits.LeakyBucket, Requests: 3, Period: time.Second, Burst: 1}
		d1 := now*1000 + 333_333_333
		d2 := d1 + 333_333_333
		runWithinCases(t, []withinCase{
			{name: "first", limit: third, cost: 1, now: now, want: limits.Decision{
				Result: delayed(1, 0, 0), State: limits.State{Live: true, TAT: d1}, Changed: true, ExpireAt: now + 333_334}},
			{name: "second waits ceil(333333.333)", limit: third, state: limits.State{Live: true, TAT: d1}, cost: 1, now: now, want: limits.Decision{
				Result: delayed(0, 333_334*time.Microsecond, 333_334*time.Microsecond), State: limits.State{Live: true, TAT: d2}, Changed: true, ExpireAt: now + 666_667}},
			{name: "third refused", limit: third, state: limits.State{Live: true, TAT: d2}, cost: 1, now: now, want: limits.Decision{
				Result: no(0, 333_334*time.Microsecond, us(333334))}},
		})
	})

	t.Run("waits are exact", func(t *testing.T) {
		// 11 per 5 minutes, B = 2, cost 3, backlog 90218166 µs: the request
		// fits once the backlog is B − 2 turns, after exactly the backlog.
		l := limits.Limit{Algorithm: limits.LeakyBucket, Requests: 11, Period: 5 * time.Minute, Burst: 2}
		now := int64(1699999941642568)
		s := limits.State{Live: true, TAT: (now + 90218166) * 1000}
		i := limits.Interval(l)
		runWithinCases(t, []withinCase{
			{name: "refused: the shortest wait", limit: l, state: s, cost: 3, now: now, want: limits.Decision{
				Result: no(0, 90218166*time.Microsecond, us(62945439))}},
			{name: "allowed after it", limit: l, state: s, cost: 3, now: now + 90218166, want: limits.Decision{
				Result: delayed(0, us((2*i+999)/1000), 0), State: limits.State{Live: true, TAT: (now+90218166)*1000 + 3*i}, Changed: true, ExpireAt: now + 90218166 + (3*i+999)/1000}},
		})
	})
}

func TestDecideCountRefused(t *testing.T) {
	// count_refused: a refused positive hit still consumes, down to one
	// period's worth of debt; a peek, a refund and an allowed hit are as
	// without it. A refused hit's waits are measured from the charged state.
	fw := limits.Limit{Algorithm: limits.FixedWindow, Requests: 3, Period: time.Second, CountRefused: true}
	sw := limits.Limit{Algorithm: limits.SlidingWindow, Requests: 10, Period: time.Second, CountRefused: true}
	tb := limits.Limit{Algorithm: limits.TokenBucket, Requests: 10, Period: time.Second, CountRefused: true}
	sl := limits.Limit{Algorithm: limits.SlidingLog, Requests: 3, Period: time.Second, CountRefused: true}
	lb := limits.Limit{Algorithm: limits.LeakyBucket, Requests: 10, Period: time.Second, Burst: 2, CountRefused: true}

	w := int64(base / sec)
	win := func(window, cur, prev int64) limits.State {
		return limits.State{Live: true, Window: window, Count: cur, Prev: prev}
	}
	t.Run("fixed_window", func(t *testing.T) {
		now := base + 250*ms
		end := base + sec
		runWithinCases(t, []withinCase{
			{name: "refused hit counts", limit: fw, state: win(w, 3, 0), cost: 1, now: now, want: limits.Decision{
				Result: no(0, 750*time.Millisecond, 750*time.Millisecond), State: win(w, 4, 0), Changed: true, ExpireAt: end}},
			{name: "debt stops at 2N", limit: fw, state: win(w, 5, 0), cost: 2, now: now, want: limits.Decision{
				Result: no(0, 750*time.Millisecond, 750*time.Millisecond), State: win(w, 6, 0), Changed: true, ExpireAt: end}},
			{name: "at 2N the state is written unchanged", limit: fw, state: win(w, 6, 0), cost: 1, now: now, want: limits.Decision{
				Result: no(0, 750*time.Millisecond, 750*time.Millisecond), State: win(w, 6, 0), Changed: true, ExpireAt: end}},
			{name: "a cost that never fits still counts", limit: fw, cost: 4, now: now, want: limits.Decision{
				Result: no(0, 0, 750*time.Millisecond), State: win(w, 4, 0), Changed: true, ExpireAt: end}},
			{name: "peek refused: nothing counted", limit: fw, state: win(w, 3, 0), cost: 0, now: now, want: limits.Decision{
				Result: no(0, 750*time.Millisecond, 750*time.Millisecond)}},
			{name: "allowed as without", limit: fw, state: win(w, 1, 0), cost: 2, now: now, want: limits.Decision{
				Result: res(true, 0, 750*time.Millisecond), State: win(w, 3, 0), Changed: true, ExpireAt: end}},
			{name: "the debt ends with the window", limit: fw, state: win(w, 6, 0), cost: 1, now: end, want: limits.Decision{
				Result: res(true, 2, time.Second), State: win(w+1, 1, 0), Changed: true, ExpireAt: end + sec}},
		})
	})
	t.Run("sliding_window", func(t *testing.T) {
		now := base + 250*ms
		runWithinCases(t, []withinCase{
			// 8 × 0.75 + 4 + 1 > 10: cur becomes 5, and 8 × (T − e')/T + 5 + 1
			// ≤ 10 from e' = 500 ms.
			{name: "refused hit counts, reset from the charged state", limit: sw, state: win(w, 4, 8), cost: 1, now: now, want: limits.Decision{
				Result: no(0, 250*time.Millisecond, 1750*time.Millisecond), State: win(w, 5, 8), Changed: true, ExpireAt: base + 2*sec}},
			{name: "debt stops at 2N", limit: sw, state: win(w, 19, 0), cost: 5, now: now, want: limits.Decision{
				Result: no(0, us(750_000+750_000), 1750*time.Millisecond), State: win(w, 20, 0), Changed: true, ExpireAt: base + 2*sec}},
			// In the next window 20 × (T − e')/T + 5 ≤ 10 from e' = 750 ms.
			{name: "a cost that never fits still counts", limit: sw, state: win(w, 4, 8), cost: 11, now: now, want: limits.Decision{
				Result: no(0, 0, 1750*time.Millisecond), State: win(w, 15, 8), Changed: true, ExpireAt: base + 2*sec}},
			{name: "peek refused: nothing counted", limit: sw, state: win(w, 4, 8), cost: 0, now: now, want: limits.Decision{
				Result: no(0, 125*time.Millisecond, 1750*time.Millisecond)}},
			{name: "full debt is gone two windows on", limit: sw, state: win(w, 20, 0), cost: 1, now: base + 2*sec, want: limits.Decision{
				Result: res(true, 9, 2*time.Second), State: win(w+2, 1, 0), Changed: true, ExpireAt: base + 4*sec}},
		})
	})
	t.Run("token_bucket", func(t *testing.T) {
		now := int64(base + 123)
		// st is tb holding tokens at stamp: full again B − tokens intervals
		// later.
		st := func(tokens float64, stamp int64) limits.State {
			return limits.State{Live: true, TAT: stamp*1000 + int64((10-tokens)*float64(100*time.Millisecond))}
		}
		runWithinCases(t, []withinCase{
			// −0.5 tokens: 1.5 to wait for one, 10.5 until full.
			{name: "refused hit takes tokens below zero", limit: tb, state: st(0.5, now), cost: 1, now: now, want: limits.Decision{
				Result: no(0, 150*time.Millisecond, 1050*time.Millisecond), State: st(-0.5, now), Changed: true, ExpireAt: now + 1050*ms}},
			{name: "refill first, then charge", limit: tb, state: st(0, now-50*ms), cost: 1, now: now, want: limits.Decision{
				Result: no(0, 150*time.Millisecond, 1050*time.Millisecond), State: st(-0.5, now), Changed: true, ExpireAt: now + 1050*ms}},
			{name: "debt stops at -N", limit: tb, state: st(-9, now), cost: 5, now: now, want: limits.Decision{
				Result: no(0, 1500*time.Millisecond, 2*time.Second), State: st(-10, now), Changed: true, ExpireAt: now + 2*sec}},
			{name: "a cost that never fits still counts", limit: tb, cost: 11, now: now, want: limits.Decision{
				Result: no(0, 0, 1100*time.Millisecond), State: st(-1, now), Changed: true, ExpireAt: now + 1100*ms}},
			{name: "peek refused: nothing counted", limit: tb, state: st(0.5, now), cost: 0, now: now, want: limits.Decision{
				Result: no(0, 50*time.Millisecond, 950*time.Millisecond)}},
		})
	})
	t.Run("sliding_log", func(t *testing.T) {
		now := base + 500*ms
		at := func(offset, cost int64) limits.LogEntry { return limits.LogEntry{At: base + offset, Cost: cost} }
		full := logOf(at(100*ms, 1), at(300*ms, 1), at(400*ms, 1))
		runWithinCases(t, []withinCase{
			// 4 counted: two must leave before 1 more fits.
			{name: "refused hit is logged, reset from the charged log", limit: sl, state: full, cost: 1, now: now, want: limits.Decision{
				Result: no(0, 800*time.Millisecond, time.Second), State: logOf(at(100*ms, 1), at(300*ms, 1), at(400*ms, 1), at(500*ms, 1)), Changed: true, ExpireAt: now + sec}},
			{name: "debt stops at 2N: only part is logged", limit: sl, state: logOf(at(100*ms, 3), at(300*ms, 2)), cost: 2, now: now, want: limits.Decision{
				Result: no(0, 800*time.Millisecond, time.Second), State: logOf(at(100*ms, 3), at(300*ms, 2), at(500*ms, 1)), Changed: true, ExpireAt: now + sec}},
			{name: "at 2N nothing more is logged", limit: sl, state: logOf(at(100*ms, 3), at(300*ms, 3)), cost: 1, now: now, want: limits.Decision{
				Result: no(0, 800*time.Millisecond, 800*time.Millisecond)}},
			{name: "a cost that never fits still counts", limit: sl, state: logOf(at(100*ms, 1)), cost: 5, now: now, want: limits.Decision{
				Result: no(0, 0, time.Second), State: logOf(at(100*ms, 1), at(500*ms, 5)), Changed: true, ExpireAt: now + sec}},
			{name: "peek refused: nothing counted", limit: sl, state: full, cost: 0, now: now, want: limits.Decision{
				Result: no(0, 600*time.Millisecond, 900*time.Millisecond)}},
		})
	})
	t.Run("leaky_bucket", func(t *testing.T) {
		now := int64(base + 123)
		drain := func(backlog int64) limits.State {
			return limits.State{Live: true, TAT: (now + backlog) * 1000}
		}
		runWithinCases(t, []withinCase{
			// The refused hit takes a turn: the queue drains 100 ms later.
			{name: "refused hit takes a turn, reset from the charged queue", limit: lb, state: drain(300 * ms), cost: 1, now: now, want: limits.Decision{
				Result: no(0, 200*time.Millisecond, 300*time.Millisecond), State: drain(400 * ms), Changed: true, ExpireAt: now + 400*ms}},
			// At most (B + N)·I = 1.2 s of backlog.
			{name: "debt stops one period beyond a full queue", limit: lb, state: drain(1150 * ms), cost: 2, now: now, want: limits.Decision{
				Result: no(0, 1100*time.Millisecond, 1100*time.Millisecond), State: drain(1200 * ms), Changed: true, ExpireAt: now + 1200*ms}},
			{name: "a cost that never fits still counts", limit: lb, state: drain(100 * ms), cost: 4, now: now, want: limits.Decision{
				Result: no(0, 0, 400*time.Millisecond), State: drain(500 * ms), Changed: true, ExpireAt: now + 500*ms}},
			{name: "refused past the max delay still counts", limit: lb, state: drain(150 * ms), cost: 1, now: now, maxDelay: 100 * ms, want: limits.Decision{
				Result: no(0, 150*time.Millisecond, 150*time.Millisecond), State: drain(250 * ms), Changed: true, ExpireAt: now + 250*ms}},
			{name: "peek refused: nothing counted", limit: lb, state: drain(300 * ms), cost: 0, now: now, want: limits.Decision{
				Result: no(0, 100*time.Millisecond, 200*time.Millisecond)}},
		})
	})
}

// TestIntervalRounding: a bucket's interval is T/N rounded down to the
// nanosecond, and one nanosecond at least.
func TestIntervalRounding(t *testing.T) {
	for _, c := range []struct {
		l    limits.Limit
		want int64
	}{
		{limits.Limit{Requests: 10, Period: time.Second}, 100_000_000},
		{limits.Limit{Requests: 3, Period: time.Second}, 333_333_333},
		{limits.Limit{Requests: 1e9, Period: time.Second}, 1},
		{limits.Limit{Requests: limits.MaxRequests, Period: time.Second}, 1},
		{limits.Limit{Requests: limits.MaxRequests, Period: time.Hour}, 838},
	} {
		if got := limits.Interval(c.l); got != c.want {
			t.Errorf("Interval(%d per %s) = %d ns, want %d", c.l.Requests, c.l.Period, got, c.want)
		}
	}
}
