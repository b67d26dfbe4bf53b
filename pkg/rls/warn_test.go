package rls

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/envoy-rls/envoy-rls/internal/metrics"
	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
	"github.com/envoy-rls/envoy-rls/pkg/limits/memory"
)

const warnLimits = `
domain: llm
descriptors:
  - key: tenant
    rate_limit: {name: budget, algorithm: fixed_window, unit: hour, requests_per_unit: 10, warn_at: [0.5, 0.8]}
  - key: plain
    rate_limit: {name: plain, algorithm: fixed_window, unit: hour, requests_per_unit: 10}
  - key: pair
    rate_limits:
      - {name: burst, algorithm: token_bucket, unit: second, requests_per_unit: 4, warn_at: [0.5]}
      - {name: daily, algorithm: fixed_window, unit: day, requests_per_unit: 100, warn_at: [0.25, 0.9]}
  - key: slots
    rate_limit: {name: slots, algorithm: concurrency, requests_per_unit: 4, warn_at: [0.75]}
`

// warnService is a service of limits on the embedded store at a fixed
// instant, its metrics and its options as given.
func warnService(t *testing.T, limits string, opts Options) (*Service, *metrics.Metrics) {
	t.Helper()
	d, err := config.Parse("limits.yaml", []byte(limits))
	if err != nil {
		t.Fatal(err)
	}
	var clock atomic.Int64
	clock.Store(instant)
	store := memory.New(memory.Options{Now: clock.Load, SweepInterval: -1})
	t.Cleanup(func() { store.Close() })
	m := metrics.New()
	opts.Store, opts.Metrics, opts.StoreInProcess = store, m, true
	svc, err := New(descriptors.NewIndex(&config.Config{Domains: map[string]*config.Domain{d.Name: d}}), opts)
	if err != nil {
		t.Fatal(err)
	}
	return svc, m
}

func warnCall(t *testing.T, svc *Service, hits uint32, ds ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitResponse {
	t.Helper()
	resp, err := svc.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "llm", Descriptors: ds, HitsAddend: hits})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// warnOf is the answer's "warn" metadata as compact JSON, "" without one.
func warnOf(t *testing.T, resp *rlsv3.RateLimitResponse) string {
	t.Helper()
	w := resp.GetDynamicMetadata().GetFields()["warn"]
	if w == nil {
		return ""
	}
	b, err := protojson.MarshalOptions{}.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(b), " ", "")
}

func crossed(t *testing.T, m *metrics.Metrics, want string) {
	t.Helper()
	if want != "" {
		want = "# HELP rls_warn_crossed_total Admitted hits that moved a limit's usage (its capacity less what remains) from below a warn_at threshold to it or above, by domain, rule and threshold.\n# TYPE rls_warn_crossed_total counter\n" + want
	}
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(want), "rls_warn_crossed_total"); err != nil {
		t.Error(err)
	}
}

// TestWarnAtThresholds: the answer says the highest threshold the usage
// has reached, on every answer from then on (a refusal and a peek too);
// each threshold is counted once, by the hit that crossed it.
func TestWarnAtThresholds(t *testing.T) {
	svc, m := warnService(t, warnLimits, Options{})
	tenant := desc("tenant", "t1")
	for i := 1; i <= 4; i++ {
		if w := warnOf(t, warnCall(t, svc, 1, tenant)); w != "" {
			t.Fatalf("hit %d (usage %d of 10): warn %s, want none", i, i, w)
		}
	}
	crossed(t, m, "")
	half := `{"descriptors":[{"capacity":10,"index":0,"rule":"budget","threshold":0.5,"used":5}],"threshold":0.5}`
	if w := warnOf(t, warnCall(t, svc, 1, tenant)); w != half {
		t.Errorf("hit 5: warn %s, want %s", w, half)
	}
	warnCall(t, svc, 2, tenant) // 7 of 10
	crossed(t, m, `rls_warn_crossed_total{domain="llm",rule="budget",threshold="0.5"} 1`+"\n")
	eight := `{"descriptors":[{"capacity":10,"index":0,"rule":"budget","threshold":0.8,"used":8}],"threshold":0.8}`
	if w := warnOf(t, warnCall(t, svc, 1, tenant)); w != eight {
		t.Errorf("hit 8: warn %s, want %s", w, eight)
	}
	// Refused (8 + 3 > 10): nothing charged, nothing crossed, still 0.8.
	resp := warnCall(t, svc, 3, tenant)
	if resp.OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT || warnOf(t, resp) != eight {
		t.Errorf("refused hit: code %v, warn %s; want OVER_LIMIT, %s", resp.OverallCode, warnOf(t, resp), eight)
	}
	peek := desc("tenant", "t1")
	peek.HitsAddend = wrapperspb.UInt64(0)
	if w := warnOf(t, warnCall(t, svc, 1, peek)); w != eight {
		t.Errorf("peek: warn %s, want %s", w, eight)
	}
	// One hit that jumps over both thresholds counts both.
	warnCall(t, svc, 9, desc("tenant", "t2"))
	crossed(t, m, `rls_warn_crossed_total{domain="llm",rule="budget",threshold="0.5"} 2
rls_warn_crossed_total{domain="llm",rule="budget",threshold="0.8"} 2
`)
}

// TestWarnAtDescriptors: one entry per descriptor that reached a
// threshold, by its place in the request; of several limits, the highest
// threshold reached; slots held for a concurrency limit.
func TestWarnAtDescriptors(t *testing.T) {
	svc, m := warnService(t, warnLimits, Options{})
	warnCall(t, svc, 26, desc("pair", "p")) // refused by the bucket of 4: nothing
	// 2 of 4 tokens (0.5), 2 of 100 daily: the bucket's 0.5.
	resp := warnCall(t, svc, 2, desc("plain", "x"), desc("pair", "p"), desc("slots", "s"))
	want := `{"descriptors":[{"capacity":4,"index":1,"rule":"burst","threshold":0.5,"used":2}],"threshold":0.5}`
	if w := warnOf(t, resp); w != want {
		t.Errorf("warn %s\nwant %s", w, want)
	}
	resp = warnCall(t, svc, 1, desc("slots", "s"), desc("tenant", "t"))
	want = `{"descriptors":[{"capacity":4,"index":0,"rule":"slots","threshold":0.75,"used":3}],"threshold":0.75}`
	if w := warnOf(t, resp); w != want {
		t.Errorf("warn %s\nwant %s", w, want)
	}
	crossed(t, m, `rls_warn_crossed_total{domain="llm",rule="burst",threshold="0.5"} 1
rls_warn_crossed_total{domain="llm",rule="slots",threshold="0.75"} 1
`)
}

// TestWarnAtBesideMetadata: with -dynamic-metadata, "warn" sits beside
// envoyproxy/ratelimit's fields, which are unchanged.
func TestWarnAtBesideMetadata(t *testing.T) {
	svc, _ := warnService(t, warnLimits, Options{DynamicMetadata: true})
	resp := warnCall(t, svc, 6, desc("tenant", "t"))
	f := resp.GetDynamicMetadata().GetFields()
	if f["domain"].GetStringValue() != "llm" || f["descriptors"] == nil || f["hitsAddend"].GetNumberValue() != 6 || f["warn"] == nil {
		t.Errorf("dynamic metadata %v: want domain, descriptors, hitsAddend and warn", f)
	}
}

// TestWarnAtNone: a request whose limits have no warn_at gets the answer
// and the metrics it got before warn_at existed, even in a domain where
// other limits have it.
func TestWarnAtNone(t *testing.T) {
	plain := strings.ReplaceAll(warnLimits, ", warn_at: [0.5, 0.8]", "")
	for _, dm := range []bool{false, true} {
		with, m := warnService(t, warnLimits, Options{DynamicMetadata: dm})
		without, _ := warnService(t, plain, Options{DynamicMetadata: dm})
		for i := range 12 {
			a := warnCall(t, with, 1, desc("plain", "x"))
			b := warnCall(t, without, 1, desc("plain", "x"))
			if !proto.Equal(a, b) {
				t.Fatalf("metadata %v, hit %d: answers differ:\n%v\n%v", dm, i, a, b)
			}
			if !dm && a.DynamicMetadata != nil {
				t.Fatalf("hit %d: dynamic metadata %v, want none", i, a.DynamicMetadata)
			}
		}
		crossed(t, m, "")
	}
}
