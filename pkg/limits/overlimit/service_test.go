package overlimit_test

import (
	"context"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
	"github.com/envoy-rls/envoy-rls/pkg/limits/overlimit"
	"github.com/envoy-rls/envoy-rls/pkg/limits/redisstore"
	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

const hotLimits = `
domain: edge
descriptors:
  - key: hot
    rate_limit: {name: hot, algorithm: fixed_window, unit: second, requests_per_unit: 3}
`

// TestServiceSameDecisions sends the same requests for a hot key to two
// services on one Redis, one with the cache and one without (each with its
// own key prefix, so each has its own counter), and checks that they decide
// alike: refused once the window is full (the cached one answering locally),
// allowed again in the next window.
func TestServiceSameDecisions(t *testing.T) {
	srv := redistest.Start(t)
	client, err := redisstore.NewClient(redisstore.ClientOptions{URL: srv.URL(), Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() }) //nolint:errcheck // test cleanup
	store := redisstore.New(client, redisstore.Options{})
	d, err := config.Parse("limits.yaml", []byte(hotLimits))
	if err != nil {
		t.Fatal(err)
	}
	ix := func() *descriptors.Index {
		return descriptors.NewIndex(&config.Config{Domains: map[string]*config.Domain{d.Name: d}})
	}
	cache := overlimit.New(store, overlimit.Options{})
	cached, err := rls.New(ix(), rls.Options{Store: cache, KeyPrefix: "cached:", OnConfigChange: cache.Clear, StoreTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := rls.New(ix(), rls.Options{Store: store, KeyPrefix: "plain:", StoreTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	req := &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{{
		Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "hot", Value: "k"}},
	}}}
	call := func(svc *rls.Service) *rlsv3.RateLimitResponse_DescriptorStatus {
		t.Helper()
		resp, err := svc.ShouldRateLimit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Statuses[0]
	}
	// compare sends the request to both services and checks that they
	// agree; the cached reset may be shorter by the time between the calls
	// and a store call's latency, and longer only by the Redis store's
	// clock uncertainty (its estimate of Redis's TIME is good to half a
	// round trip, and a later call may use a better sample).
	compare := func(step string, wantCode rlsv3.RateLimitResponse_Code) {
		t.Helper()
		p := call(plain)
		c := call(cached)
		if p.Code != wantCode || c.Code != p.Code || c.LimitRemaining != p.LimitRemaining {
			t.Fatalf("%s: plain %v remaining %d, cached %v remaining %d, want both %v",
				step, p.Code, p.LimitRemaining, c.Code, c.LimitRemaining, wantCode)
		}
		pr, cr := p.DurationUntilReset.AsDuration(), c.DurationUntilReset.AsDuration()
		if cr > pr+5*time.Millisecond || cr < pr-100*time.Millisecond {
			t.Fatalf("%s: reset plain %v, cached %v", step, pr, cr)
		}
	}
	// Start early in a window (fixed windows are epoch-aligned, and Redis
	// runs on this host's clock) so that the window does not turn mid-run.
	untilWindow := func() {
		now := time.Now()
		time.Sleep(now.Truncate(time.Second).Add(time.Second + 20*time.Millisecond).Sub(now))
	}
	// A store just made decides its first calls at a provisional instant,
	// and estimates Redis's clock from the samples its pipelines carry:
	// calls on another key first, so that what is compared below is the
	// cache, not a clock estimate still settling.
	warm := &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{{
		Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "hot", Value: "warm"}},
	}}}
	for range 20 {
		if _, err := plain.ShouldRateLimit(context.Background(), warm); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	for round := range 2 {
		untilWindow()
		before := cache.LocalAnswers()
		for range 3 {
			compare("allowed", rlsv3.RateLimitResponse_OK)
		}
		for range 10 {
			compare("refused", rlsv3.RateLimitResponse_OVER_LIMIT)
		}
		if n := cache.LocalAnswers() - before; n != 9 {
			t.Fatalf("round %d: %d refusals answered locally, want 9 (the first asks Redis)", round, n)
		}
	}
	// A config change forgets the cached refusals: the next hit asks Redis.
	before := cache.LocalAnswers()
	cached.SetIndex(ix())
	if cache.Len() != 0 {
		t.Fatalf("cache holds %d keys after SetIndex", cache.Len())
	}
	compare("after SetIndex", rlsv3.RateLimitResponse_OVER_LIMIT)
	if cache.LocalAnswers() != before {
		t.Fatal("answered locally right after a config change")
	}
	// Next window: allowed again by both, the cache having expired at the
	// turn.
	untilWindow()
	compare("next window", rlsv3.RateLimitResponse_OK)
}
