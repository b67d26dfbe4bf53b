package integration

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

const unitSecond = rlsv3.RateLimitResponse_RateLimit_SECOND

// algorithmLimits is the config of TestAlgorithms: sliding_log and
// leaky_bucket, rate_limits lists, count_refused and unit_multiplier. Every
// subtest has keys or values of its own. Windows are a year long and logs an
// hour, so that counts do not depend on how fast the machine is; only the
// limits whose point is time itself (shaping, a log that moves, a bucket
// that refills) are short, and those whose scenarios assume that a few calls
// fit in a turn or a refill have turns and refills of seconds, so that the
// assumption is a wide bound (a machine that misses it is broken, and the
// test says which assumption failed).
const algorithmLimits = `
domain: algo
descriptors:
  - key: log
    rate_limit: {name: log-hour, algorithm: sliding_log, unit: hour, requests_per_unit: 3}
  - key: log_short
    rate_limit: {name: log-second, algorithm: sliding_log, unit: second, requests_per_unit: 2}

  # No queue: one request per hour, never delayed.
  - key: leaky
    rate_limit: {name: leaky-hour, algorithm: leaky_bucket, unit: hour, requests_per_unit: 1}
  # A turn every 2 s, a queue of 2: the worst wait is 4 s, within the
  # server's -max-delay here (algorithmMaxDelay).
  - key: shape
    rate_limit: {name: shape, algorithm: leaky_bucket, unit: second, unit_multiplier: 2, requests_per_unit: 1, burst: 2}
  # The same, for the shaping scenario alone: its decisions are counted in
  # rls_decisions_total under its own rule.
  - key: shape_queue
    rate_limit: {name: shape-queue, algorithm: leaky_bucket, unit: second, unit_multiplier: 2, requests_per_unit: 1, burst: 2}

  - key: both
    rate_limits:
      # 2 tokens per 5 s: a token every 2.5 s.
      - {name: both-burst, algorithm: token_bucket, unit: second, unit_multiplier: 5, requests_per_unit: 2}
      - {name: both-cap, algorithm: fixed_window, unit: year, requests_per_unit: 3}
  - key: both_counted
    rate_limits:
      - {name: bc-counted, algorithm: fixed_window, unit: year, requests_per_unit: 4, count_refused: true}
      - {name: bc-plain, algorithm: fixed_window, unit: year, requests_per_unit: 3}

  - key: refused
    value: counted
    rate_limit: {name: refused-counted, algorithm: fixed_window, unit: year, requests_per_unit: 5, count_refused: true}
  - key: refused
    value: free
    rate_limit: {name: refused-free, algorithm: fixed_window, unit: year, requests_per_unit: 5}

  - key: mult
    value: window
    rate_limit: {name: mult-window, unit: second, unit_multiplier: 30, requests_per_unit: 4}
  - key: mult
    value: log
    rate_limit: {name: mult-log, algorithm: sliding_log, unit: second, unit_multiplier: 30, requests_per_unit: 4}
`

// Bounds of the timing-dependent checks.
const (
	// clockSlack widens a reset computed from the test's own clock around
	// the calls: the server's clock (the process's, or Redis's TIME) is the
	// same machine's wall clock, so this covers rounding and clock reads.
	clockSlack = 50 * time.Millisecond
	// delaySlack is how much earlier than its turn a shaped answer may
	// arrive: timers do not fire early, so only clock reads.
	delaySlack = 5 * time.Millisecond
	// algorithmMaxDelay is TestAlgorithms' -max-delay: above the shaping
	// limits' worst wait (a queue of 2 at a turn every 2 s).
	algorithmMaxDelay = "5s"
)

// TestAlgorithms runs what issue #3 added against a real process per store:
// sliding_log and leaky_bucket (shaping included), rate_limits lists,
// count_refused and unit_multiplier.
func TestAlgorithms(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store) {
		s := startServer(t, writeConfig(t, algorithmLimits), append(st.flags(t), "-max-delay", algorithmMaxDelay)...)
		for _, tc := range []struct {
			name string
			f    func(t *testing.T, s *server)
		}{
			{"SlidingLog", testSlidingLog},
			{"SlidingLogMoves", testSlidingLogMoves},
			{"LeakyBucketNoQueue", testLeakyNoQueue},
			{"LeakyBucketShaping", testLeakyShaping},
			{"LeakyBucketDeadline", testLeakyDeadline},
			{"LeakyBucketCost", testLeakyCost},
			{"RateLimitsList", testRateLimitsList},
			{"RateLimitsListCountRefused", testRateLimitsListCountRefused},
			{"CountRefused", testCountRefused},
			{"UnitMultiplier", testUnitMultiplier},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				tc.f(t, s)
			})
		}
	})
}

// timed is one call and the test's clock just before and after it: the
// server decided at some instant in [before, after].
type timed struct {
	resp          *rlsv3.RateLimitResponse
	before, after time.Time
}

// decideTimed calls the service over gRPC, failing the test on an error.
func (s *server) decideTimed(t testing.TB, req *rlsv3.RateLimitRequest) timed {
	t.Helper()
	before := time.Now()
	resp := s.decide(t, req)
	return timed{resp, before, time.Now()}
}

// reset is the duration_until_reset of the call's first status.
func (c timed) reset() *durationpb.Duration { return c.resp.GetStatuses()[0].GetDurationUntilReset() }

// checkResetWithin checks a duration_until_reset against [lo, hi], widened
// by clockSlack.
func checkResetWithin(t testing.TB, label string, got *durationpb.Duration, lo, hi time.Duration) {
	t.Helper()
	if got == nil {
		t.Errorf("%s: duration_until_reset: got none, want between %s and %s", label, lo, hi)
		return
	}
	d := got.AsDuration()
	if d < lo-clockSlack || d > hi+clockSlack {
		t.Errorf("%s: duration_until_reset: got %s, want between %s and %s (± %s)", label, d, lo, hi, clockSlack)
	}
}

// checkSince checks a reset that is `period` after an instant the server
// read during call `at`, as seen by the server during call `now`:
// period − (now − at), where each instant is known to lie within its call.
func checkSince(t testing.TB, label string, got *durationpb.Duration, period time.Duration, at, now timed) {
	t.Helper()
	checkResetWithin(t, label, got, period-now.after.Sub(at.before), period-now.before.Sub(at.after))
}

// peek is a descriptor with hits_addend 0: allowed if a hit of 1 would be,
// consuming nothing.
func peek(kv ...string) *rlsv3.RateLimitRequest {
	return request("algo", withHits(desc(kv...), 0))
}

// hits is a request for one descriptor with its own hits_addend n.
func hits(n uint64, kv ...string) *rlsv3.RateLimitRequest {
	return request("algo", withHits(desc(kv...), n))
}

// testSlidingLog: N in the last T, exactly; a refusal waits until the
// oldest hits whose costs are needed have left the window.
func testSlidingLog(t *testing.T, s *server) {
	const period = time.Hour
	lim := limit("log-hour", 3, unitHour)
	req := request("algo", desc("log", "a"))

	a := s.decideTimed(t, req)
	checkResponse(t, a.resp, codeOK, want{codeOK, lim, 2})
	// Allowed: back at N once the newest hit has left, T from now.
	checkSince(t, "hit A", a.reset(), period, a, a)

	// Spaced from A, so that a reset counted from the wrong entry is out of
	// bounds (not an assertion: the log keeps real instants).
	time.Sleep(300 * time.Millisecond)
	b := s.decideTimed(t, hits(2, "log", "a"))
	checkResponse(t, b.resp, codeOK, want{codeOK, lim, 0})
	checkSince(t, "hit B (cost 2)", b.reset(), period, b, b)

	// A hit of 1 needs A (cost 1) to leave; a hit of 2 or 3 needs B too.
	r := s.decideTimed(t, req)
	checkResponse(t, r.resp, codeOver, want{codeOver, lim, 0})
	checkSince(t, "refused hit of 1", r.reset(), period, a, r)
	r = s.decideTimed(t, hits(3, "log", "a"))
	checkResponse(t, r.resp, codeOver, want{codeOver, lim, 0})
	checkSince(t, "refused hit of 3", r.reset(), period, b, r)
	// A peek is refused like a hit of 1, and consumes nothing.
	r = s.decideTimed(t, peek("log", "a"))
	checkResponse(t, r.resp, codeOver, want{codeOver, lim, 0})
	checkSince(t, "refused peek", r.reset(), period, a, r)

	// A hit above N never fits: refused, the key untouched, and the wait
	// is until the log is empty.
	r = s.decideTimed(t, hits(4, "log", "a"))
	checkResponse(t, r.resp, codeOver, want{codeOver, lim, 0})
	checkSince(t, "hit of 4, never fits", r.reset(), period, b, r)
	fresh := s.decideTimed(t, hits(4, "log", "b"))
	checkResponse(t, fresh.resp, codeOver, want{codeOver, lim, 3})
	checkResponse(t, s.decide(t, hits(3, "log", "b")), codeOK, want{codeOK, lim, 0})

	// A refund takes back the newest hits first.
	refund := withHits(desc("log", "a"), 2)
	refund.IsNegativeHits = true
	checkResponse(t, s.decide(t, request("algo", refund)), codeOK, want{codeOK, lim, 2})
	checkResponse(t, s.decide(t, req), codeOK, want{codeOK, lim, 1})
}

// testSlidingLogMoves: with T = 1 s, the hit refused while two are in the
// window is allowed once the oldest has left, and not before; the next one
// then waits for the other.
func testSlidingLogMoves(t *testing.T, s *server) {
	const period = time.Second
	lim := limit("log-second", 2, unitSecond)
	req := request("algo", desc("log_short", "a"))

	a := s.decideTimed(t, req)
	checkResponse(t, a.resp, codeOK, want{codeOK, lim, 1})
	time.Sleep(300 * time.Millisecond) // spaces the entries
	b := s.decideTimed(t, req)
	checkResponse(t, b.resp, codeOK, want{codeOK, lim, 0})
	r := s.decideTimed(t, req)
	checkResponse(t, r.resp, codeOver, want{codeOver, lim, 0})
	checkSince(t, "refused hit", r.reset(), period, a, r)

	var allowed timed
	if !poll(5*time.Second, func() bool {
		allowed = s.decideTimed(t, req)
		return allowed.resp.GetOverallCode() == codeOK
	}) {
		t.Fatalf("no hit allowed within 5s of A, the oldest hit, leaving a %s log; last response %v", period, allowed.resp)
	}
	if early := a.before.Add(period - clockSlack); allowed.after.Before(early) {
		t.Errorf("allowed again %s after A: got before A left the window, want at least %s",
			allowed.after.Sub(a.before), period)
	}
	if allowed.before.After(b.before.Add(period - clockSlack)) {
		// The poll was too slow to see the log between A and B leaving.
		t.Logf("allowed %s after B: B may have left too; the rest is not checked", allowed.before.Sub(b.before))
		return
	}
	checkResponse(t, allowed.resp, codeOK, want{codeOK, lim, 0})
	r = s.decideTimed(t, req)
	checkResponse(t, r.resp, codeOver, want{codeOver, lim, 0})
	checkSince(t, "refused hit after A left", r.reset(), period, b, r)
}

// testLeakyNoQueue: a leaky bucket without burst spaces requests T/N
// apart, and never delays: the next turn an hour away is a refusal.
func testLeakyNoQueue(t *testing.T, s *server) {
	const interval = time.Hour
	lim := limit("leaky-hour", 1, unitHour)
	req := request("algo", desc("leaky", "a"))

	first := s.decideTimed(t, req)
	// No queue: remaining is 0, and already at its maximum.
	checkResponse(t, first.resp, codeOK, want{codeOK, lim, 0})
	checkResetWithin(t, "first hit", first.reset(), 0, 0)
	for i := range 2 {
		r := s.decideTimed(t, req)
		checkResponse(t, r.resp, codeOver, want{codeOver, lim, 0})
		checkSince(t, "refused hit "+strconv.Itoa(i+2), r.reset(), interval, first, r)
	}
	r := s.decideTimed(t, peek("leaky", "a"))
	checkResponse(t, r.resp, codeOver, want{codeOver, lim, 0})
	checkSince(t, "refused peek", r.reset(), interval, first, r)

	// Two turns never fit a queue of 0; the key stays untouched.
	checkResponse(t, s.decide(t, hits(2, "leaky", "b")), codeOver, want{codeOver, lim, 0})
	checkResponse(t, s.decide(t, peek("leaky", "b")), codeOK, want{codeOK, lim, 0})
	checkResponse(t, s.decide(t, request("algo", desc("leaky", "b"))), codeOK, want{codeOK, lim, 0})
}

// The shaping limit: 1 per 2 seconds, a turn every 2 s, a queue of 2.
const (
	shapeTurn  = 2 * time.Second
	shapeQueue = 2
	// shapeDeadline is the deadline of a call that should wait its turn:
	// above the longest turn away (the queue's length) with a turn spare.
	shapeDeadline = (shapeQueue + 2) * shapeTurn
)

// shapingLimit is how a shaping limit is reported: 1 per second with
// unit_multiplier 2.
func shapingLimit(name string) *rlsv3.RateLimitResponse_RateLimit {
	l := limit(name, 1, unitSecond)
	l.UnitMultiplier = wrapperspb.UInt32(2)
	return l
}

var shapeLimit = shapingLimit("shape")

// shapeQueueDecisions is the series that counts the allowed decisions of
// the shaping scenario.
const shapeQueueDecisions = `rls_decisions_total{domain="algo",outcome="ok",rule="shape-queue"}`

// shapedCall is one call of the shaping scenario, its instants measured
// from the scenario's start.
type shapedCall struct {
	resp       *rlsv3.RateLimitResponse
	err        error
	sent, done time.Duration
}

// callShaped calls with a deadline of d and measures from start.
func (s *server) callShaped(start time.Time, d time.Duration, req *rlsv3.RateLimitRequest) shapedCall {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	c := shapedCall{sent: time.Since(start)}
	c.resp, c.err = s.rls.ShouldRateLimit(ctx, req)
	c.done = time.Since(start)
	return c
}

// testLeakyShaping: three calls at once with a generous deadline are
// answered at their turns, 0, 1 and 2 turns after the first is decided,
// with 2, 1 and 0 places left in the queue; a fourth, while the queue is
// full, is refused at once. It assumes that the three are decided within
// half a turn (a second), and the fourth sent within three quarters.
func testLeakyShaping(t *testing.T, s *server) {
	lim := shapingLimit("shape-queue")
	req := request("algo", desc("shape_queue", "a"))
	decided, _ := s.metric(t, shapeQueueDecisions)
	start := time.Now()
	answers := make(chan shapedCall, 3)
	for range 3 {
		go func() { answers <- s.callShaped(start, shapeDeadline, req) }()
	}
	// Once the three are decided (the answers of two of them wait for
	// their turns), the queue is full for one turn.
	if !poll(shapeTurn/2, func() bool {
		n, _ := s.metric(t, shapeQueueDecisions)
		return n >= decided+3
	}) {
		t.Fatalf("the three calls were not all decided within %s: the scenario needs them decided well within a turn (%s)", shapeTurn/2, shapeTurn)
	}
	fourth := s.callShaped(start, shapeDeadline, req)
	calls := []shapedCall{<-answers, <-answers, <-answers}

	for _, c := range append(calls, fourth) {
		if c.err != nil {
			t.Fatalf("ShouldRateLimit: got error %v after %s, want an answer", c.err, c.done-c.sent)
		}
	}
	if fourth.sent > shapeTurn*3/4 {
		t.Fatalf("the fourth call was sent %s after the start, want within %s: the queue would no longer be full", fourth.sent, shapeTurn*3/4)
	}
	checkResponse(t, fourth.resp, codeOver, want{codeOver, lim, 0})
	if waited := fourth.done - fourth.sent; waited >= shapeTurn/2 {
		t.Errorf("fourth call, refused: answered after %s, want at once (well under a turn, %s)", waited, shapeTurn)
	}
	// Refused: the wait is until a place frees, at most a turn.
	checkResetWithin(t, "fourth call", fourth.resp.Statuses[0].DurationUntilReset, 0, shapeTurn)

	// The k-th call decided (k = 0, 1, 2) has shapeQueue − k places left
	// and its turn k turns after the first decision, which came after the
	// start: it cannot be answered sooner than k turns after the start.
	seen := map[uint32]bool{}
	for _, c := range calls {
		if c.resp.GetOverallCode() != codeOK {
			continue
		}
		rem := c.resp.GetStatuses()[0].GetLimitRemaining()
		checkResponse(t, c.resp, codeOK, want{codeOK, lim, rem})
		if rem > shapeQueue || seen[rem] {
			t.Errorf("limit_remaining of the allowed calls: got %d twice or above %d, want each of 2, 1, 0 once", rem, shapeQueue)
			continue
		}
		seen[rem] = true
		k := time.Duration(shapeQueue - rem)
		if lo := k*shapeTurn - delaySlack; c.done < lo {
			t.Errorf("allowed call with %d places left: answered %s after the start, want at least %s (its turn)", rem, c.done, k*shapeTurn)
		}
		if hi := k*shapeTurn + shapeTurn/2; c.done > hi {
			t.Errorf("allowed call with %d places left: answered %s after the start, want about %s (at most %s)", rem, c.done, k*shapeTurn, hi)
		}
		// Back to a full queue (2 places) once only the call in service is
		// left: k turns after the first decision, less the time since it.
		hi := k * shapeTurn
		checkResetWithin(t, fmt.Sprintf("allowed call with %d places left", rem),
			c.resp.Statuses[0].DurationUntilReset, max(0, hi-shapeTurn), hi)
	}
	if len(seen) != shapeQueue+1 {
		var got []string
		for _, c := range append(calls, fourth) {
			got = append(got, fmt.Sprintf("%v remaining %d after %s", c.resp.GetOverallCode(),
				c.resp.GetStatuses()[0].GetLimitRemaining(), c.done))
		}
		sort.Strings(got)
		t.Errorf("calls: got %s; want three allowed with 2, 1 and 0 places left, one refused", strings.Join(got, ", "))
	}
}

// testLeakyDeadline: a call whose turn would come after its gRPC deadline
// is refused at once (OVER_LIMIT, not DeadlineExceeded) and takes no turn.
// It assumes that the second call is sent with its turn still more than its
// deadline away (within a second of the first).
func testLeakyDeadline(t *testing.T, s *server) {
	const short = 500 * time.Millisecond
	req := request("algo", desc("shape", "deadline"))
	start := time.Now()
	first := s.callShaped(start, callBound, req)
	if first.err != nil {
		t.Fatalf("first call: %v", first.err)
	}
	checkResponse(t, first.resp, codeOK, want{codeOK, shapeLimit, shapeQueue})

	// The next turn is a turn after the first decision.
	early := s.callShaped(start, short, req)
	if limit := shapeTurn - short - time.Second/2; early.sent > limit {
		t.Fatalf("the second call was sent %s after the first, want within %s: its turn must be more than its deadline (%s) away", early.sent, limit, short)
	}
	if early.err != nil {
		t.Fatalf("call with a %s deadline, its turn %s away: got error %v after %s, want OVER_LIMIT at once",
			short, shapeTurn-early.sent, early.err, early.done-early.sent)
	}
	// Refused: the queue keeps its places; the wait is until the turn is
	// within a deadline as short.
	checkResponse(t, early.resp, codeOver, want{codeOver, shapeLimit, shapeQueue})
	checkResetWithin(t, "refused call", early.resp.Statuses[0].DurationUntilReset,
		shapeTurn-early.done-short, shapeTurn+first.done-early.sent)

	// It took no turn: the next call, with time to wait, gets the turn a
	// turn after the first decision, with one place left (two turns, and
	// no place, if the refused call had taken one).
	next := s.callShaped(start, shapeDeadline, req)
	if next.err != nil {
		t.Fatalf("call after the refusal: %v", next.err)
	}
	checkResponse(t, next.resp, codeOK, want{codeOK, shapeLimit, shapeQueue - 1})
	if next.done < shapeTurn-delaySlack {
		t.Errorf("call after the refusal: answered %s after the first call, want at least its turn, %s", next.done, shapeTurn)
	}
	if next.done >= 2*shapeTurn {
		t.Errorf("call after the refusal: answered %s after the first call, want about %s (one turn; two would mean the refused call took one)", next.done, shapeTurn)
	}
}

// testLeakyCost: a cost c takes c turns and fits when its last turn is in
// the queue (c ≤ burst + 1); it waits only for its first turn. It assumes
// that the second hit is answered within half a turn of the first.
func testLeakyCost(t *testing.T, s *server) {
	start := time.Now()
	all := s.decideTimed(t, hits(shapeQueue+1, "shape", "cost"))
	one := s.decideTimed(t, request("algo", desc("shape", "cost")))
	if one.after.Sub(start) > shapeTurn/2 {
		t.Fatalf("the second hit was answered %s after the first was sent, want within %s: the queue would no longer be full", one.after.Sub(start), shapeTurn/2)
	}

	checkResponse(t, all.resp, codeOK, want{codeOK, shapeLimit, 0})
	if waited := all.after.Sub(start); waited >= shapeTurn/2 {
		t.Errorf("hit of %d on an empty queue: answered after %s, want at once", shapeQueue+1, waited)
	}
	// Back to a full queue when the last of its 3 turns starts.
	checkSince(t, "hit of 3", all.reset(), shapeQueue*shapeTurn, all, all)

	checkResponse(t, one.resp, codeOver, want{codeOver, shapeLimit, 0})
	if waited := one.after.Sub(one.before); waited >= shapeTurn/2 {
		t.Errorf("refused hit: answered after %s, want at once", waited)
	}
	// A place frees when the first of the 3 turns is over.
	checkSince(t, "refused hit", one.reset(), shapeTurn, all, one)

	// More turns than the queue holds never fit, and leave it untouched.
	checkResponse(t, s.decide(t, hits(shapeQueue+2, "shape", "never")), codeOver, want{codeOver, shapeLimit, shapeQueue})
	first := s.decideTimed(t, request("algo", desc("shape", "never")))
	checkResponse(t, first.resp, codeOK, want{codeOK, shapeLimit, shapeQueue})
	checkResetWithin(t, "first hit after a never-fit", first.reset(), 0, 0)
}

// testRateLimitsList: token_bucket 2 per 5 s and fixed_window 3/year on
// one descriptor. It passes only if both allow; the status shows the limit
// with the least remaining when allowed, the refusing one with the longest
// wait when refused; a refusal charges neither. It assumes that its first
// four calls fit in a token's refill (2.5 s).
func testRateLimitsList(t *testing.T, s *server) {
	burst, limitCap := limit("both-burst", 2, unitSecond), limit("both-cap", 3, unitYear)
	burst.UnitMultiplier = wrapperspb.UInt32(5)
	const refill = 2500 * time.Millisecond // one token
	untilYearEnd := func(e time.Duration) time.Duration { return year - e }
	req := request("algo", desc("both", "a"))

	first := s.decideTimed(t, req)
	two := s.decideTimed(t, hits(2, "both", "a"))
	p := s.decideTimed(t, peek("both", "a"))
	third := s.decideTimed(t, req)
	if took := third.after.Sub(first.before); took >= refill-clockSlack {
		t.Fatalf("hit 1 to hit 3 took %s, want them within the %s refill of a token (what they answer depends on it)", took, refill)
	}

	// burst 1 left, cap 2: the least remaining is the burst's.
	checkResponse(t, first.resp, codeOK, want{codeOK, burst, 1})
	checkSince(t, "hit 1", first.reset(), refill, first, first)
	// The burst refuses a hit of 2 that the cap would allow: the status is
	// the burst's, though the cap's reset (a year) is longer.
	checkResponse(t, two.resp, codeOver, want{codeOver, burst, 1})
	checkSince(t, "refused hit of 2", two.reset(), refill, first, two)
	// Neither was charged: a peek is allowed (the burst still has its
	// token, the cap is not at 3 of 3), and shows the burst's 1.
	checkResponse(t, p.resp, codeOK, want{codeOK, burst, 1})
	// burst 0, cap 1 left.
	checkResponse(t, third.resp, codeOK, want{codeOK, burst, 0})
	if t.Failed() {
		return
	}

	// Once the burst is back at 2, the cap's 1 is the least remaining: the
	// refused hit of 2 was not counted there either.
	var last *rlsv3.RateLimitResponse
	if !poll(4*refill, func() bool {
		last = s.decide(t, peek("both", "a"))
		return last.GetStatuses()[0].GetCurrentLimit().GetName() == "both-cap"
	}) {
		t.Fatalf("peek: no status of both-cap within %s (the burst back at 2 of 2); last response %v", 4*refill, last)
	}
	checkResponse(t, last, codeOK, want{codeOK, limitCap, 1})

	// The cap refuses a hit of 2 that the burst would allow: the status is
	// the cap's, and the burst keeps its tokens, as a peek shows (the cap's
	// 1 is still the least).
	before := time.Now()
	capped := s.decide(t, hits(2, "both", "a"))
	checkResponse(t, capped, codeOver, want{codeOver, limitCap, 1})
	checkWindowReset(t, "hit of 2 refused by the cap", capped.Statuses[0].DurationUntilReset, year, before, untilYearEnd)
	checkResponse(t, s.decide(t, peek("both", "a")), codeOK, want{codeOK, limitCap, 1})

	// burst 1 left, cap 0.
	checkResponse(t, s.decide(t, req), codeOK, want{codeOK, limitCap, 0})
	// Both refuse a hit of 2 (the burst until a token refills, the cap for
	// the rest of the year): the status is the longest wait's.
	before = time.Now()
	both := s.decide(t, hits(2, "both", "a"))
	checkResponse(t, both, codeOver, want{codeOver, limitCap, 0})
	checkWindowReset(t, "hit of 2 refused by both", both.Statuses[0].DurationUntilReset, year, before, untilYearEnd)
}

// testRateLimitsListCountRefused: a refused list charges its count_refused
// limits, and only them.
func testRateLimitsListCountRefused(t *testing.T, s *server) {
	counted, plain := limit("bc-counted", 4, unitYear), limit("bc-plain", 3, unitYear)
	req := func(n uint64) *rlsv3.RateLimitRequest { return hits(n, "both_counted", "a") }
	// counted 2 left, plain 1.
	checkResponse(t, s.decide(t, req(2)), codeOK, want{codeOK, plain, 1})
	// plain refuses; counted would allow, and is charged anyway: 0 left.
	checkResponse(t, s.decide(t, req(2)), codeOver, want{codeOver, plain, 1})
	checkResponse(t, s.decide(t, req(0)), codeOver, want{codeOver, counted, 0})
	// plain was not charged: after refunding 1 to both, counted has 1 and
	// plain 2 (not 0 for a charged plain, whose count would be 4 − 1 = 3).
	refund := withHits(desc("both_counted", "a"), 1)
	refund.IsNegativeHits = true
	checkResponse(t, s.decide(t, request("algo", refund)), codeOK, want{codeOK, counted, 1})
	checkResponse(t, s.decide(t, req(1)), codeOK, want{codeOK, counted, 0})
	checkResponse(t, s.decide(t, req(0)), codeOver, want{codeOver, counted, 0})
}

// testCountRefused: with count_refused, refused hits consume too, down to
// at most one period's worth of debt; without it they do not.
func testCountRefused(t *testing.T, s *server) {
	untilYearEnd := func(e time.Duration) time.Duration { return year - e }
	t.Run("count_refused", func(t *testing.T) {
		lim := limit("refused-counted", 5, unitYear)
		for i, step := range []struct {
			hits uint64
			w    want
		}{
			{3, want{codeOK, lim, 2}},
			{4, want{codeOver, lim, 0}}, // refused, and counted: 7 of 5
			{1, want{codeOver, lim, 0}}, // 8 of 5
			{0, want{codeOver, lim, 0}}, // a peek consumes nothing
			{5, want{codeOver, lim, 0}}, // 13, capped at 2 × 5
		} {
			before := time.Now()
			resp := s.decide(t, hits(step.hits, "refused", "counted"))
			checkResponse(t, resp, step.w.code, step.w)
			checkWindowReset(t, "step "+strconv.Itoa(i+1), resp.Statuses[0].DurationUntilReset, year, before, untilYearEnd)
		}
		// The debt was capped at 10: refunding 6 leaves 4 of 5 used.
		refund := withHits(desc("refused", "counted"), 6)
		refund.IsNegativeHits = true
		checkResponse(t, s.decide(t, request("algo", refund)), codeOK, want{codeOK, lim, 1})
		checkResponse(t, s.decide(t, hits(1, "refused", "counted")), codeOK, want{codeOK, lim, 0})
	})
	t.Run("default", func(t *testing.T) {
		lim := limit("refused-free", 5, unitYear)
		checkResponse(t, s.decide(t, hits(3, "refused", "free")), codeOK, want{codeOK, lim, 2})
		checkResponse(t, s.decide(t, hits(4, "refused", "free")), codeOver, want{codeOver, lim, 2})
		awaitUndo(t, s, "algo", 2, "refused", "free")
		checkResponse(t, s.decide(t, hits(1, "refused", "free")), codeOK, want{codeOK, lim, 1})
	})
}

// testUnitMultiplier: 4 per 30 seconds is reported as 4 per second with
// unit_multiplier 30, and counted over 30 s.
func testUnitMultiplier(t *testing.T, s *server) {
	const period = 30 * time.Second
	multiplied := func(name string) *rlsv3.RateLimitResponse_RateLimit {
		l := limit(name, 4, unitSecond)
		l.UnitMultiplier = wrapperspb.UInt32(30)
		return l
	}
	t.Run("sliding_window", func(t *testing.T) {
		lim := multiplied("mult-window")
		req := request("algo", desc("mult", "window"))
		start := time.Now()
		for i, rem := range []uint32{3, 2, 1, 0} {
			before := time.Now()
			resp := s.decide(t, req)
			checkResponse(t, resp, codeOK, want{codeOK, lim, rem})
			checkWindowReset(t, "hit "+strconv.Itoa(i+1), resp.Statuses[0].DurationUntilReset, period, before,
				func(e time.Duration) time.Duration { return 2*period - e })
		}
		before := time.Now()
		resp := s.decide(t, req)
		checkResponse(t, resp, codeOver, want{codeOver, lim, 0})
		if windowElapsed(start, period) > windowElapsed(before, period) {
			t.Logf("a %s window boundary passed during the hits; the refusal's duration_until_reset is not checked", period)
			return
		}
		// Next window, once 4 × (1 − e'/T) + 1 ≤ 4: e' = T/4.
		checkWindowReset(t, "refused hit 5", resp.Statuses[0].DurationUntilReset, period, before,
			func(e time.Duration) time.Duration { return period - e + period/4 })
	})
	t.Run("sliding_log", func(t *testing.T) {
		lim := multiplied("mult-log")
		req := request("algo", desc("mult", "log"))
		var first timed
		for i, rem := range []uint32{3, 2, 1, 0} {
			c := s.decideTimed(t, req)
			if i == 0 {
				first = c
			}
			checkResponse(t, c.resp, codeOK, want{codeOK, lim, rem})
			checkSince(t, "hit "+strconv.Itoa(i+1), c.reset(), period, c, c)
		}
		r := s.decideTimed(t, req)
		checkResponse(t, r.resp, codeOver, want{codeOver, lim, 0})
		checkSince(t, "refused hit 5", r.reset(), period, first, r)
	})
}

// TestMaxDelay: a leaky bucket whose worst wait, burst × period /
// requests_per_unit, is above -max-delay does not load: the server exits
// non-zero with one plain line naming the file, the line and burst;
// check-config with a -max-delay that covers it accepts it.
func TestMaxDelay(t *testing.T) {
	t.Parallel()
	// A queue of 20 at 10 per second: 2 s.
	const slow = "domain: slow\ndescriptors:\n  - key: k\n    rate_limit:\n      algorithm: leaky_bucket\n" +
		"      unit: second\n      requests_per_unit: 10\n      burst: 20\n"
	const burstLine = 8
	path := writeConfig(t, slow)
	words := []string{"burst", "2s", "-max-delay 1s"}

	t.Run("server", func(t *testing.T) {
		t.Parallel()
		_, stderr, code := runBinary(t, nil, "-config", path, "-grpc-addr", freeAddr(t), "-http-addr", freeAddr(t), "-debug-addr", "")
		if code == 0 {
			t.Errorf("exit status: got 0, want non-zero")
		}
		msg := checkErrorLine(t, "start", stderr, path, burstLine, words)
		_, checkErr, checkCode := runBinary(t, nil, "check-config", path)
		if checkCode != 1 {
			t.Errorf("check-config: got status %d, want 1", checkCode)
		}
		if got := strings.TrimSpace(checkErr); got != msg {
			t.Errorf("check-config error: got %q, want the start's %q", got, msg)
		}
	})
	t.Run("check-config -max-delay", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			maxDelay string
			ok       bool
		}{{"5s", true}, {"2s", true}, {"1999ms", false}} {
			stdout, stderr, code := runBinary(t, nil, "check-config", "-max-delay", tc.maxDelay, path)
			switch {
			case tc.ok:
				if want := path + ": OK, 1 domain, 1 limit (0 unlimited) on 1 descriptor\n"; code != 0 || stdout != want {
					t.Errorf("check-config -max-delay %s: got status %d, stdout %q, stderr %q; want 0 and %q", tc.maxDelay, code, stdout, stderr, want)
				}
			default:
				if code != 1 {
					t.Errorf("check-config -max-delay %s: got status %d, want 1", tc.maxDelay, code)
				}
				checkErrorLine(t, "check-config -max-delay "+tc.maxDelay, stderr, path, burstLine, []string{"burst", "2s", "-max-delay 1.999s"})
			}
		}
	})
	t.Run("server -max-delay", func(t *testing.T) {
		t.Parallel()
		s := startServer(t, path, "-max-delay", "5s")
		lim := limit("", 10, unitSecond)
		checkResponse(t, s.decide(t, request("slow", desc("k", "a"))), codeOK, want{codeOK, lim, 20})
	})
}
