package rls

import (
	"context"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// instant is 13 min 20 s into an hour: the hour's fixed window ends in
// 46 min 40 s.
const hourLeft = 46*time.Minute + 40*time.Second

func TestSeveralLimitsOnOneDescriptor(t *testing.T) {
	f := newFixture(t, nil, Options{})
	pair := desc("pair", "p")
	// Both allow: the status shows the limit with the least remaining.
	check(t, f.call(t, pair).Statuses[0], want{ok, "per-second", 1, 500 * time.Millisecond})
	check(t, f.call(t, pair).Statuses[0], want{ok, "per-second", 0, time.Second})
	// The token bucket refuses: nothing is charged, the hour keeps 1.
	check(t, f.call(t, pair).Statuses[0], want{over, "per-second", 0, 500 * time.Millisecond})
	f.clock.Add(time.Second.Microseconds())
	check(t, f.call(t, pair).Statuses[0], want{ok, "per-hour", 0, hourLeft - time.Second})
	// Now the hour refuses, with the longest wait, and the bucket is not
	// charged: a peek still sees its one token.
	f.clock.Add(time.Second.Microseconds())
	check(t, f.call(t, pair).Statuses[0], want{over, "per-hour", 0, hourLeft - 2*time.Second})
	peek := desc("pair", "p")
	peek.HitsAddend = wrapperspb.UInt64(0)
	st := f.call(t, peek).Statuses[0]
	if st.Code != over || st.CurrentLimit.GetName() != "per-hour" {
		t.Errorf("peek: %v, want OVER_LIMIT by per-hour", st)
	}
}

func TestLeakyBucketShapes(t *testing.T) {
	f := newFixture(t, nil, Options{})
	shaped := desc("shaped", "s")
	// 10 per second with a queue of 2: the first goes at once, the next two
	// wait their turns (100 ms apart), the fourth finds the queue full.
	var waits []time.Duration
	for i := 0; i < 3; i++ {
		start := time.Now()
		resp := f.call(t, shaped)
		waits = append(waits, time.Since(start))
		if resp.OverallCode != ok {
			t.Fatalf("request %d: %v, want OK", i, resp.OverallCode)
		}
	}
	// The answers are delayed: a lower bound (a correctness check), never an
	// upper one.
	if waits[1] < 100*time.Millisecond || waits[2] < 200*time.Millisecond {
		t.Errorf("answers came after %v, want at least 0, 100ms, 200ms", waits)
	}
	start := time.Now()
	resp := f.call(t, shaped)
	if resp.OverallCode != over {
		t.Errorf("fourth request: %v, want OVER_LIMIT", resp.OverallCode)
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("a refusal waited %v; it must answer at once", d)
	}
	check(t, resp.Statuses[0], want{over, "shaped", 0, 100 * time.Millisecond})
}

func TestLeakyBucketDeadline(t *testing.T) {
	f := newFixture(t, nil, Options{})
	shaped := desc("shaped", "d")
	f.call(t, shaped)
	f.call(t, shaped) // queue: this one waits 100 ms
	// The next turn is 200 ms away, beyond a 50 ms deadline: refused at
	// once rather than timed out, and not charged.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	resp, err := f.svc.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{shaped}})
	if err != nil {
		t.Fatalf("err = %v, want a refusal", err)
	}
	if resp.OverallCode != over {
		t.Errorf("turn beyond the deadline: %v, want OVER_LIMIT", resp.OverallCode)
	}
	// A request refused elsewhere does not wait for its turn.
	f.call(t, desc("path", "/login", "user", "w"))
	f.call(t, desc("path", "/login", "user", "w"))
	start := time.Now()
	resp = f.call(t, desc("shaped", "d2"), desc("shaped", "d2"), desc("path", "/login", "user", "w"))
	if resp.OverallCode != over || time.Since(start) > 80*time.Millisecond {
		t.Errorf("refused request with a queued descriptor: %v after %v, want OVER_LIMIT at once", resp.OverallCode, time.Since(start))
	}
}

func TestCountRefused(t *testing.T) {
	f := newFixture(t, nil, Options{})
	charge := func(n uint64) *rlsv3.RateLimitResponse_DescriptorStatus {
		d := desc("charged", "c")
		d.HitsAddend = wrapperspb.UInt64(n)
		return f.call(t, d).Statuses[0]
	}
	check(t, charge(3), want{ok, "charged", 2, hourLeft})
	// Refused, but charged: an after-the-fact charge (Envoy's
	// apply_on_stream_done) consumes even beyond what is left.
	check(t, charge(4), want{over, "charged", 0, hourLeft})
	check(t, charge(1), want{over, "charged", 0, hourLeft})
}

func TestSlidingLog(t *testing.T) {
	f := newFixture(t, nil, Options{})
	logged := desc("logged", "l")
	check(t, f.call(t, logged).Statuses[0], want{ok, "logged", 1, time.Minute})
	f.clock.Add(10 * time.Second.Microseconds())
	check(t, f.call(t, logged).Statuses[0], want{ok, "logged", 0, time.Minute})
	f.clock.Add(10 * time.Second.Microseconds())
	// The oldest hit leaves the window 40 s from now.
	check(t, f.call(t, logged).Statuses[0], want{over, "logged", 0, 40 * time.Second})
}

func TestLeakyBucketOverrideBoundedByMaxDelay(t *testing.T) {
	f := newFixture(t, nil, Options{MaxDelay: 300 * time.Millisecond})
	// An override slows the bucket to 1 per hour: its queue of 2 would wait
	// hours. -max-delay bounds it even for a request without a deadline.
	d := desc("shaped", "override")
	d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_HOUR}
	f.call(t, d)
	start := time.Now()
	resp := f.call(t, d)
	if resp.OverallCode != over {
		t.Errorf("a turn an hour away under -max-delay 300ms: %v, want OVER_LIMIT", resp.OverallCode)
	}
	if el := time.Since(start); el > 250*time.Millisecond {
		t.Errorf("answered after %v; a refusal must not wait", el)
	}
}
