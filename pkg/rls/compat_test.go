package rls

import (
	"context"
	"math"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
	"github.com/envoy-rls/envoy-rls/pkg/limits/memory"
)

const metadataLimits = `
domain: md
descriptors:
  - key: a
    metadata: {team: {name: alpha, tags: [x]}, tier: 1}
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: b
    metadata: {team: {name: beta, owner: bo}, tier: 2, extra: true}
    rate_limit: {unit: hour, requests_per_unit: 5}
  - key: c
    metadata: {only: c}
    rate_limit: {unit: hour, requests_per_unit: 5}
`

func mdService(t *testing.T, o config.Options, opts Options) *Service {
	t.Helper()
	d, err := o.Parse("md.yaml", []byte(metadataLimits))
	if err != nil {
		t.Fatal(err)
	}
	store := memory.New(memory.Options{SweepInterval: -1})
	t.Cleanup(func() { store.Close() })
	opts.Store = store
	svc, err := New(descriptors.NewIndex(&config.Config{Domains: map[string]*config.Domain{d.Name: d}}), opts)
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

func mdCall(t *testing.T, svc *Service, req *rlsv3.RateLimitRequest) *rlsv3.RateLimitResponse {
	t.Helper()
	resp, err := svc.ShouldRateLimit(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// Dynamic metadata as envoyproxy/ratelimit writes it: the domain, every
// descriptor's entries (and override and hits where set), the request's
// hits, and the metadata of the descriptors that passed, merged with the
// first value winning; the config's own metadata never changes.
func TestDynamicMetadata(t *testing.T) {
	svc := mdService(t, config.DefaultOptions(), Options{DynamicMetadata: true})
	d := func(k string) *ratelimitv3.RateLimitDescriptor { return desc(k, "v") }
	mdCall(t, svc, &rlsv3.RateLimitRequest{Domain: "md", Descriptors: []*ratelimitv3.RateLimitDescriptor{d("a")}})
	// a is now over: its metadata is left out; b's and c's merge.
	withHits := d("c")
	withHits.HitsAddend = wrapperspb.UInt64(2)
	req := &rlsv3.RateLimitRequest{Domain: "md", HitsAddend: 1,
		Descriptors: []*ratelimitv3.RateLimitDescriptor{d("a"), d("b"), withHits, d("a")}}
	resp := mdCall(t, svc, req)
	got, err := protojson.Marshal(resp.GetDynamicMetadata())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"descriptors":[{"entries":["a=v"]},{"entries":["b=v"]},{"entries":["c=v"],"hitsAddend":2},{"entries":["a=v"]}],` +
		`"domain":"md","hitsAddend":1,"metadata":{"extra":true,"only":"c","team":{"name":"beta","owner":"bo"},"tier":2}}`
	if !jsonEqual(t, string(got), want) {
		t.Errorf("dynamic_metadata\n%s\nwant\n%s", got, want)
	}
	// Two passing descriptors: mappings merge key by key, the first wins.
	svc2 := mdService(t, config.DefaultOptions(), Options{DynamicMetadata: true})
	resp = mdCall(t, svc2, &rlsv3.RateLimitRequest{Domain: "md", Descriptors: []*ratelimitv3.RateLimitDescriptor{d("a"), d("b")}})
	md := resp.GetDynamicMetadata().GetFields()["metadata"].GetStructValue()
	team := md.GetFields()["team"].GetStructValue().GetFields()
	if team["name"].GetStringValue() != "alpha" || team["owner"].GetStringValue() != "bo" || md.GetFields()["tier"].GetNumberValue() != 1 {
		t.Errorf("merged metadata %v", md)
	}
	// The merge did not write into the config.
	cfgTeam := svc2.Index().Config().Domains["md"].Descriptors[0].Metadata.GetFields()["team"].GetStructValue().GetFields()
	if _, touched := cfgTeam["owner"]; touched {
		t.Error("merging changed the config's metadata")
	}
	// Without -dynamic-metadata there is none.
	if mdCall(t, mdService(t, config.DefaultOptions(), Options{}), req).GetDynamicMetadata() != nil {
		t.Error("dynamic_metadata without -dynamic-metadata")
	}
}

func jsonEqual(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y structpb.Struct
	if err := protojson.Unmarshal([]byte(a), &x); err != nil {
		t.Fatal(err)
	}
	if err := protojson.Unmarshal([]byte(b), &y); err != nil {
		t.Fatal(err)
	}
	return proto.Equal(&x, &y)
}

// envoyproxy/ratelimit's headers describe the descriptor with the least
// remaining, or the last one over.
func TestRatelimitHeaders(t *testing.T) {
	svc := mdService(t, config.DefaultOptions(), Options{Headers: []HeaderDialect{RatelimitHeaders(DefaultRatelimitHeaderNames)}})
	resp := mdCall(t, svc, &rlsv3.RateLimitRequest{Domain: "md", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("b", "h"), desc("c", "h")}})
	if got := header(resp, "RateLimit-Limit") + " " + header(resp, "RateLimit-Remaining"); got != "5 4" {
		t.Errorf("limit and remaining %q, want \"5 4\"", got)
	}
	mdCall(t, svc, &rlsv3.RateLimitRequest{Domain: "md", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("a", "h")}})
	resp = mdCall(t, svc, &rlsv3.RateLimitRequest{Domain: "md", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("a", "h"), desc("b", "h")}})
	if got := header(resp, "RateLimit-Limit") + " " + header(resp, "RateLimit-Remaining"); got != "1 0" {
		t.Errorf("with one over: %q, want the over one's \"1 0\"", got)
	}
	if r := header(resp, "RateLimit-Reset"); r == "" || r == "0" {
		t.Errorf("reset %q on a refusal", r)
	}
	names := RatelimitHeaderNames{Limit: "X-L", Remaining: "X-R", Reset: "X-T"}
	svc = mdService(t, config.DefaultOptions(), Options{Headers: []HeaderDialect{RatelimitHeaders(names)}})
	resp = mdCall(t, svc, &rlsv3.RateLimitRequest{Domain: "md", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("b", "h")}})
	if header(resp, "X-L") != "5" || header(resp, "X-R") != "4" || header(resp, "X-T") == "" {
		t.Errorf("custom names: %v", resp.GetResponseHeadersToAdd())
	}
}

// envoyproxy/ratelimit's form: whole-second resets, a fixed window's reset
// at its end even before anything is counted, global shadow mode keeping
// the statuses, an unlimited descriptor reporting all it can remaining.
func TestRatelimitCompat(t *testing.T) {
	dropIn := RatelimitProfile.Limits.Apply(config.DefaultOptions())
	svc := mdService(t, dropIn, Options{Profile: RatelimitProfile, ShadowMode: true})
	peek := desc("b", "p")
	peek.HitsAddend = wrapperspb.UInt64(0)
	st := mdCall(t, svc, &rlsv3.RateLimitRequest{Domain: "md", Descriptors: []*ratelimitv3.RateLimitDescriptor{peek}}).Statuses[0]
	d := st.GetDurationUntilReset().AsDuration()
	if d <= 0 || d > time.Hour || d%time.Second != 0 {
		t.Errorf("a peek on a new fixed window: reset %v, want whole seconds to the end of the hour", d)
	}
	mdCall(t, svc, &rlsv3.RateLimitRequest{Domain: "md", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("a", "s")}})
	resp := mdCall(t, svc, &rlsv3.RateLimitRequest{Domain: "md", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("a", "s")}})
	if resp.OverallCode != ok || resp.Statuses[0].Code != over {
		t.Errorf("global shadow mode in envoyproxy/ratelimit's form: overall %v, status %v; want OK, OVER_LIMIT", resp.OverallCode, resp.Statuses[0].Code)
	}
	// envoy-rls's own form turns the status OK too.
	own := mdService(t, dropIn, Options{ShadowMode: true})
	mdCall(t, own, &rlsv3.RateLimitRequest{Domain: "md", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("a", "s")}})
	resp = mdCall(t, own, &rlsv3.RateLimitRequest{Domain: "md", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("a", "s")}})
	if resp.OverallCode != ok || resp.Statuses[0].Code != ok {
		t.Errorf("global shadow mode: overall %v, status %v; want OK, OK", resp.OverallCode, resp.Statuses[0].Code)
	}
}

func TestUnlimitedRemaining(t *testing.T) {
	f := newFixture(t, nil, Options{})
	st := f.call(t, desc("path", "/healthz")).Statuses[0]
	if st.LimitRemaining != math.MaxUint32 || st.CurrentLimit != nil {
		t.Errorf("unlimited: %v, want limit_remaining %d and no current_limit", st, uint32(math.MaxUint32))
	}
}
