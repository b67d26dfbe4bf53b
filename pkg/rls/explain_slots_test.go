package rls

import (
	"context"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
	"github.com/envoy-rls/envoy-rls/pkg/limits/memory"
	"github.com/envoy-rls/envoy-rls/pkg/limits/overlimit"
)

// TestExplainSlots: explain shows a concurrency limit's slots held, oldest
// first, with their expiries, through the over-limit cache as in
// production; a release takes the oldest away.
func TestExplainSlots(t *testing.T) {
	d, err := config.Parse("limits.yaml", []byte("domain: edge\ndescriptors:\n  - key: api_key\n    rate_limit: {name: in-flight, algorithm: concurrency, requests_per_unit: 3, lease: 30s}\n"))
	if err != nil {
		t.Fatal(err)
	}
	now := instant
	store := memory.New(memory.Options{Now: func() int64 { return now }, SweepInterval: -1})
	t.Cleanup(func() { store.Close() })
	svc, err := New(descriptors.NewIndex(&config.Config{Domains: map[string]*config.Domain{d.Name: d}}), Options{Store: overlimit.New(store, overlimit.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	call := func(cost uint64, negative bool) {
		t.Helper()
		rd := &ratelimitv3.RateLimitDescriptor{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "api_key", Value: "k1"}},
			HitsAddend: wrapperspb.UInt64(cost), IsNegativeHits: negative}
		if _, err := svc.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{rd}}); err != nil {
			t.Fatal(err)
		}
	}
	call(1, false)
	now += 10 * time.Second.Microseconds()
	call(1, false)
	now += 5 * time.Second.Microseconds()
	ex := explain(t, svc, "edge", "api_key", "k1")
	got := ex.Limits[0].Slots
	if len(got) != 2 || got[0].Count != 1 || got[0].ExpiresIn != "15s" || got[1].ExpiresIn != "25s" ||
		!got[0].Expires.Equal(time.UnixMicro(instant+30*time.Second.Microseconds())) {
		t.Fatalf("slots %+v, want one expiring in 15s and one in 25s", got)
	}
	if st := ex.Limits[0].State; st.Remaining != 1 || st.Reset != "25s" {
		t.Errorf("state %+v, want 1 free slot, all free in 25s", *st)
	}
	var text strings.Builder
	if err := ex.WriteText(&text); err != nil || !strings.Contains(text.String(), "slots: 2 held, oldest first: 1 expiring in 15s") ||
		!strings.Contains(text.String(), "in-flight: concurrency, 3 slots, lease 30s") {
		t.Errorf("text (%v):\n%s\nwant the slots line", err, text.String())
	}
	call(1, true)
	if got := explain(t, svc, "edge", "api_key", "k1").Limits[0].Slots; len(got) != 1 || got[0].ExpiresIn != "25s" {
		t.Errorf("after a release: %+v, want the newer slot alone", got)
	}
}
