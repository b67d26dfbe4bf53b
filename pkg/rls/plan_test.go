package rls

import (
	"context"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// A request that can never fit (cost above what the limit can ever allow)
// is told to wait at least a whole period: never 0, which a client that
// obeys would read as "retry now", forever.
func TestNeverFitsNeverInvitesAnImmediateRetry(t *testing.T) {
	f := newFixture(t, nil, Options{Headers: []HeaderDialect{IETFHeaders}})
	for _, tt := range []struct {
		entries []string
		period  time.Duration
	}{
		{[]string{"remote_address", "x"}, time.Minute},       // sliding_window 3/minute
		{[]string{"api_key", "k"}, time.Second},              // token_bucket 1/s, burst 2
		{[]string{"path", "/login", "user", "u"}, time.Hour}, // fixed_window 2/hour
		{[]string{"logged", "l"}, time.Minute},               // sliding_log 2/minute
		{[]string{"shaped", "s"}, time.Second},               // leaky_bucket 10/s, burst 2
		{[]string{"windowed", "w"}, 30 * time.Second},        // 4 per 30 s
		{[]string{"pair", "p"}, time.Second},                 // rate_limits: 2/s and 3/hour
	} {
		d := desc(tt.entries...)
		d.HitsAddend = wrapperspb.UInt64(1000)
		resp := f.call(t, d)
		st := resp.Statuses[0]
		if st.Code != over {
			t.Errorf("%v: code %v, want OVER_LIMIT", tt.entries, st.Code)
			continue
		}
		if got := st.DurationUntilReset.AsDuration(); got < tt.period {
			t.Errorf("%v: duration_until_reset %v, want at least the period %v", tt.entries, got, tt.period)
		}
		retry := header(resp, HeaderRetryAfter)
		if retry == "" || retry == "0" {
			t.Errorf("%v: Retry-After %q, want a positive wait", tt.entries, retry)
		}
	}
}

func header(resp *rlsv3.RateLimitResponse, key string) string {
	for _, h := range resp.GetResponseHeadersToAdd() {
		if h.GetKey() == key {
			return h.GetValue()
		}
	}
	return ""
}

// Failure mode error answers UNAVAILABLE with a plain message: what the
// store said (addresses, Redis's own error text) is for the log alone.
func TestFailureErrorHidesTheStoreError(t *testing.T) {
	f := newFixture(t, func(limits.Store) limits.Store { return failingStore{} }, Options{FailureMode: config.FailError})
	_, err := f.svc.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "edge",
		Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("remote_address", "x")}})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("err = %v, want UNAVAILABLE", err)
	}
	if msg := status.Convert(err).Message(); strings.Contains(msg, "connection refused") {
		t.Errorf("message %q shows the store's error", msg)
	}
}

// Explain settles the very plan a request gets: for every descriptor of the
// test config, before and after the limit is used up, Explain's reported
// limit, remaining and verdict are those of a request of cost 1 made right
// after it.
func TestExplainAgreesWithDecisions(t *testing.T) {
	for _, entries := range [][]string{
		{"remote_address", "x"},
		{"api_key", "k"},
		{"path", "/login", "user", "u"},
		{"shadow", "s"},
		{"quota", "q"},
		{"tenant", "t-1"},
		{"plan", "gold"},
		{"windowed", "w"},
		{"pair", "p"},
		{"charged", "c"},
		{"logged", "l"},
		{"path", "/healthz"},
		{"nothing", "here"},
	} {
		f := newFixture(t, nil, Options{})
		var es []descriptors.Entry
		for i := 0; i+1 < len(entries); i += 2 {
			es = append(es, descriptors.Entry{Key: entries[i], Value: entries[i+1]})
		}
		for round := 0; round < 4; round++ {
			ex, err := f.svc.Explain(context.Background(), "edge", es)
			if err != nil {
				t.Fatalf("%v: %v", entries, err)
			}
			// A peek and a hit of cost 1 agree on whether it is allowed; the
			// hit then reports what is left after it.
			st := f.call(t, desc(entries...)).Statuses[0]
			var rep *ExplainedLimit
			for i := range ex.Limits {
				if ex.Limits[i].Reported {
					rep = &ex.Limits[i]
				}
			}
			if rep == nil {
				if st.CurrentLimit != nil {
					t.Errorf("%v round %d: Explain reports no limit (%s), the decision %s", entries, round, ex.Outcome, st.CurrentLimit.GetName())
				}
				continue
			}
			if st.CurrentLimit.GetName() != rep.Name {
				t.Errorf("%v round %d: Explain reports %q, the decision %q", entries, round, rep.Name, st.CurrentLimit.GetName())
			}
			refused := strings.Contains(ex.Outcome, "refused")
			if refused != (st.Code == over) {
				t.Errorf("%v round %d: Explain says %q, the decision is %v", entries, round, ex.Outcome, st.Code)
			}
			if rep.State.Allowed && int64(st.LimitRemaining) != max(rep.State.Remaining-1, 0) {
				t.Errorf("%v round %d: Explain remaining %d, the decision left %d", entries, round, rep.State.Remaining, st.LimitRemaining)
			}
		}
	}
}

// A request that lists one counter twice is charged for both listings in
// one step: allowed together or refused together, so a refused request
// consumes nothing on that counter.
func TestDuplicateDescriptorsDecidedTogether(t *testing.T) {
	f := newFixture(t, nil, Options{})
	ip := func() *ratelimitv3.RateLimitDescriptor { return desc("remote_address", "dup") }
	// per-ip allows 3 a minute: two listings take 2, both report 1 left.
	resp := f.call(t, ip(), ip())
	for i, st := range resp.Statuses {
		check(t, st, want{ok, "per-ip", 1, 100 * time.Second})
		if i > 0 && st.LimitRemaining != resp.Statuses[0].LimitRemaining {
			t.Errorf("status %d differs from the first: %v", i, st)
		}
	}
	// Two more do not fit in the 1 left: both refused, nothing consumed.
	resp = f.call(t, ip(), ip())
	if resp.OverallCode != over || resp.Statuses[0].Code != over || resp.Statuses[1].Code != over {
		t.Fatalf("two listings over the limit: %v", resp)
	}
	check(t, f.call(t, ip()).Statuses[0], want{ok, "per-ip", 0, 100 * time.Second})
	// Values that share_threshold puts under one counter are one counter
	// too: tenants allows 2 an hour for all t-* together.
	resp = f.call(t, desc("tenant", "t-1"), desc("tenant", "t-2"), desc("tenant", "t-3"))
	if resp.OverallCode != over {
		t.Fatalf("three tenants sharing a counter of 2: %v", resp)
	}
	check(t, f.call(t, desc("tenant", "t-4"), desc("tenant", "t-5")).Statuses[1], want{ok, "tenants", 0, time.Hour + 46*time.Minute + 40*time.Second})
	// A refund beside a hit of the same counter is decided on its own.
	refund := ip()
	refund.IsNegativeHits = true
	resp = f.call(t, refund, ip())
	if resp.OverallCode != ok {
		t.Errorf("a refund then a hit: %v", resp)
	}
}

// In envoyproxy/ratelimit's form each listing is decided on its own, in
// order, as it decides them.
func TestDuplicateDescriptorsCompat(t *testing.T) {
	f := newFixture(t, nil, Options{Profile: RatelimitProfile})
	ip := func() *ratelimitv3.RateLimitDescriptor { return desc("remote_address", "dup") }
	f.call(t, ip(), ip()) // 2 of 3
	resp := f.call(t, ip(), ip())
	if resp.Statuses[0].Code != ok || resp.Statuses[1].Code != over {
		t.Errorf("the third and fourth listing: %v, %v; want OK then OVER_LIMIT", resp.Statuses[0].Code, resp.Statuses[1].Code)
	}
}
