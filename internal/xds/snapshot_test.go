package xds

import (
	"testing"

	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// limit is a RateLimitConfig of one descriptor key with one limit.
func limit(name, domain, key string, perUnit uint32, unit rlsconfv3.RateLimitUnit) *rlsconfv3.RateLimitConfig {
	return &rlsconfv3.RateLimitConfig{Name: name, Domain: domain, Descriptors: []*rlsconfv3.RateLimitDescriptor{{
		Key:       key,
		RateLimit: &rlsconfv3.RateLimitPolicy{Unit: unit, RequestsPerUnit: perUnit},
	}}}
}

func TestNewConfig(t *testing.T) {
	o := config.Options{DefaultAlgorithm: limits.FixedWindow, CountRefused: true}
	c, err := NewConfig(o, []*rlsconfv3.RateLimitConfig{
		limit("b", "api", "path", 5, rlsconfv3.RateLimitUnit_SECOND),
		limit("a", "web", "ip", 100, rlsconfv3.RateLimitUnit_MINUTE),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Domains) != 2 || c.Domains["api"] == nil || c.Domains["web"] == nil {
		t.Fatalf("domains: got %v, want api and web", c.Domains)
	}
	d := c.Domains["api"]
	if d.File != "b" {
		t.Errorf("api's File: got %q, want its resource, b", d.File)
	}
	r := d.Descriptors[0].Rules[0]
	if r.Limit.Algorithm != limits.FixedWindow || !r.Limit.CountRefused || r.Limit.Requests != 5 {
		t.Errorf("api's limit: got %+v, want the options' defaults (fixed_window, count_refused) and 5", r.Limit)
	}

	empty, err := NewConfig(o, nil)
	if err != nil || len(empty.Domains) != 0 {
		t.Errorf("no resources: got %v, %v, want an empty config", empty, err)
	}
}

func TestNewConfigMergeDomains(t *testing.T) {
	two := []*rlsconfv3.RateLimitConfig{
		limit("b", "api", "path", 5, rlsconfv3.RateLimitUnit_SECOND),
		limit("a", "api", "ip", 100, rlsconfv3.RateLimitUnit_MINUTE),
	}
	c, err := NewConfig(config.Options{MergeDomains: true}, two)
	if err != nil {
		t.Fatal(err)
	}
	d := c.Domains["api"]
	if len(c.Domains) != 1 || len(d.Descriptors) != 2 || d.Descriptors[0].Key != "ip" || d.Descriptors[1].Key != "path" {
		t.Fatalf("got %v, want api with ip (resource a) then path (resource b)", c.Domains)
	}
	twice := append(two, limit("c", "api", "path", 7, rlsconfv3.RateLimitUnit_SECOND))
	want := "c: api.path: duplicate descriptor of a merged domain, first in b"
	if _, err := NewConfig(config.Options{MergeDomains: true}, twice); err == nil || err.Error() != want {
		t.Errorf("a top-level descriptor twice: got %v, want %s", err, want)
	}
}

func TestNewConfigErrors(t *testing.T) {
	unknown := limit("edge", "api", "path", 5, rlsconfv3.RateLimitUnit_SECOND)
	// A field number the module does not have, as a newer server's
	// quota_mode would arrive.
	unknown.Descriptors[0].ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 1))
	for _, tc := range []struct {
		name string
		in   []*rlsconfv3.RateLimitConfig
		want string
	}{
		{"a limit with no unit", []*rlsconfv3.RateLimitConfig{limit("edge", "api", "path", 5, rlsconfv3.RateLimitUnit_UNKNOWN)},
			"edge: descriptors[0].rate_limit: has no unit"},
		{"a domain twice, named by both, in name order", []*rlsconfv3.RateLimitConfig{
			limit("zz", "api", "path", 5, rlsconfv3.RateLimitUnit_SECOND),
			limit("aa", "api", "ip", 5, rlsconfv3.RateLimitUnit_SECOND),
		}, "zz: api: duplicate domain, first in aa"},
		{"no domain, no name", []*rlsconfv3.RateLimitConfig{{}}, "resources[0]: no domain"},
		{"a field this build does not know", []*rlsconfv3.RateLimitConfig{unknown},
			"edge: descriptors[0]: has fields this build of envoy-rls does not know (a newer RateLimitConfig): upgrade envoy-rls"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewConfig(config.Options{}, tc.in)
			if err == nil || err.Error() != tc.want {
				t.Errorf("got %v, want %s", err, tc.want)
			}
		})
	}
}

func TestUnpack(t *testing.T) {
	good, err := anypb.New(limit("edge", "api", "path", 5, rlsconfv3.RateLimitUnit_SECOND))
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := unpack([]*anypb.Any{good})
	if err != nil || len(msgs) != 1 || msgs[0].GetDomain() != "api" {
		t.Fatalf("got %v, %v, want the one resource", msgs, err)
	}
	other, err := anypb.New(&rlsconfv3.RateLimitPolicy{})
	if err != nil {
		t.Fatal(err)
	}
	want := "resources[1]: type type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitPolicy, want " + TypeURL
	if _, err := unpack([]*anypb.Any{good, other}); err == nil || err.Error() != want {
		t.Errorf("another type: got %v, want %s", err, want)
	}
}

func TestSameResources(t *testing.T) {
	a := limit("a", "api", "path", 5, rlsconfv3.RateLimitUnit_SECOND)
	b := limit("b", "web", "ip", 5, rlsconfv3.RateLimitUnit_SECOND)
	b2 := limit("b", "web", "ip", 6, rlsconfv3.RateLimitUnit_SECOND)
	if !sameResources([]*rlsconfv3.RateLimitConfig{a, b}, []*rlsconfv3.RateLimitConfig{b, a}) {
		t.Error("the same resources in another order: got different, want the same")
	}
	if sameResources([]*rlsconfv3.RateLimitConfig{a, b}, []*rlsconfv3.RateLimitConfig{a, b2}) {
		t.Error("a changed limit: got the same, want different")
	}
	if sameResources([]*rlsconfv3.RateLimitConfig{a}, []*rlsconfv3.RateLimitConfig{a, b}) {
		t.Error("one more resource: got the same, want different")
	}
}

// TestNewConfigNewerFields: the fields Envoy Gateway's module has beside
// the first release's, the units week, month and year, quota_mode and
// metadata, reach the Domain.
func TestNewConfigNewerFields(t *testing.T) {
	md, err := structpb.NewStruct(map[string]any{"team": "a", "tier": map[string]any{"n": 1}})
	if err != nil {
		t.Fatal(err)
	}
	m := &rlsconfv3.RateLimitConfig{Name: "eg", Domain: "eg", Descriptors: []*rlsconfv3.RateLimitDescriptor{
		{Key: "w", RateLimit: &rlsconfv3.RateLimitPolicy{Unit: rlsconfv3.RateLimitUnit_WEEK, RequestsPerUnit: 1}, QuotaMode: true, Metadata: md},
		{Key: "m", RateLimit: &rlsconfv3.RateLimitPolicy{Unit: rlsconfv3.RateLimitUnit_MONTH, RequestsPerUnit: 2}},
		{Key: "y", RateLimit: &rlsconfv3.RateLimitPolicy{Unit: rlsconfv3.RateLimitUnit_YEAR, RequestsPerUnit: 3}},
	}}
	c, err := NewConfig(config.Options{}, []*rlsconfv3.RateLimitConfig{m})
	if err != nil {
		t.Fatal(err)
	}
	ds := c.Domains["eg"].Descriptors
	for i, want := range []config.Unit{config.Week, config.Month, config.Year} {
		if got := ds[i].Rules[0].Unit; got != want {
			t.Errorf("%s: unit %v, want %v", ds[i].Key, got, want)
		}
	}
	if !ds[0].QuotaMode || !proto.Equal(ds[0].Metadata, md) {
		t.Errorf("w: quota mode %v, metadata %v, want true and %v", ds[0].QuotaMode, ds[0].Metadata, md)
	}
	if ds[1].QuotaMode || ds[1].Metadata != nil {
		t.Errorf("m: quota mode %v, metadata %v, want neither", ds[1].QuotaMode, ds[1].Metadata)
	}
}
