package rls

import (
	"context"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
	"github.com/envoy-rls/envoy-rls/pkg/limits/memory"
)

// soonCtx always has a deadline 20 ms away, as a request from Envoy (its
// default timeout) has, without the timer of a real one.
type soonCtx struct{ context.Context }

func (soonCtx) Deadline() (time.Time, bool) { return time.Now().Add(20 * time.Millisecond), true }

func allocService(tb testing.TB) (*Service, *rlsv3.RateLimitRequest) {
	tb.Helper()
	d, err := config.Parse("limits.yaml", []byte(testLimits))
	if err != nil {
		tb.Fatal(err)
	}
	store := memory.New(memory.Options{})
	tb.Cleanup(func() { store.Close() })
	svc, err := New(descriptors.NewIndex(&config.Config{Domains: map[string]*config.Domain{d.Name: d}}), Options{Store: store, StoreInProcess: true})
	if err != nil {
		tb.Fatal(err)
	}
	return svc, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("api_key", "bench")}}
}

// TestDecisionAllocs pins the allocations of one decision of a request with
// a deadline before -store-timeout: the key string and the response's
// protobuf messages (response, statuses, status, current_limit,
// duration_until_reset), nothing else.
func TestDecisionAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items")
	}
	svc, req := allocService(t)
	var ctx context.Context = soonCtx{context.Background()}
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := svc.ShouldRateLimit(ctx, req); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 6 {
		t.Errorf("%.1f allocations per decision, want at most 6 (key + 5 protobuf)", allocs)
	}
}

// BenchmarkShouldRateLimitDeadline is BenchmarkShouldRateLimit with a
// request deadline before -store-timeout, as Envoy's 20 ms default is.
func BenchmarkShouldRateLimitDeadline(b *testing.B) {
	svc, req := allocService(b)
	var ctx context.Context = soonCtx{context.Background()}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := svc.ShouldRateLimit(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}
