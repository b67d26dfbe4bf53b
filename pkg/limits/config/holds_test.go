package config

import (
	"strings"
	"testing"
	"time"

	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
)

// A domain's holds load as written, readable from the Config by the
// domain's name; a domain without holds has none.
func TestLoadHolds(t *testing.T) {
	c, err := Load("testdata/good/holds.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := &Holds{ID: "request_id", Settle: "settle", Lease: 2 * time.Minute, Line: 2}
	if got := c.Holds("llm"); got == nil || *got != *want {
		t.Errorf("Holds(llm): got %+v, want %+v", got, want)
	}
	if got := c.Holds("other"); got != nil {
		t.Errorf("Holds(other): got %+v, want nil", got)
	}
	if got := (*Config)(nil).Holds("llm"); got != nil {
		t.Errorf("nil Config: got %+v, want nil", got)
	}
	plain, err := Load("testdata/good/envoy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := plain.Holds("edge_proxy"); got != nil {
		t.Errorf("a file without holds: got %+v, want nil", got)
	}
}

// The lease defaults to DefaultHoldLease, and may be as long as
// limits.MaxLease; a descriptor's value may be a holds key.
func TestParseHolds(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       Holds
	}{
		{"default lease", "domain: a\nholds: {id: rid, settle: done}\n",
			Holds{ID: "rid", Settle: "done", Lease: DefaultHoldLease, Line: 2}},
		{"longest lease", "domain: a\nholds:\n  id: rid\n  settle: done\n  lease: 24h\n",
			Holds{ID: "rid", Settle: "done", Lease: 24 * time.Hour, Line: 2}},
		{"shortest lease", "domain: a\nholds: {id: rid, settle: done, lease: 1ns}\n",
			Holds{ID: "rid", Settle: "done", Lease: time.Nanosecond, Line: 2}},
		{"keys a descriptor's values may hold", "domain: a\nholds: {id: rid, settle: done}\ndescriptors:\n  - key: k\n    value: rid\n    rate_limit: {unit: second, requests_per_unit: 1}\n",
			Holds{ID: "rid", Settle: "done", Lease: DefaultHoldLease, Line: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Parse("x.yaml", []byte(tc.data))
			if err != nil {
				t.Fatal(err)
			}
			if d.Holds == nil || *d.Holds != tc.want {
				t.Errorf("got %+v, want %+v", d.Holds, tc.want)
			}
		})
	}
}

// The files of a merged domain declare the same holds or none: a domain
// whose descriptors took different entries out by file would be two.
func TestLoadMergeHolds(t *testing.T) {
	const a = "domain: llm\nholds: {id: rid, settle: done}\ndescriptors:\n  - key: user\n    value: a\n    rate_limit: {unit: minute, requests_per_unit: 1}\n"
	for _, tc := range []struct {
		name, b, want string
	}{
		{"same", "domain: llm\nholds: {settle: done, lease: 10m, id: rid}\ndescriptors:\n  - key: user\n    value: b\n    rate_limit: {unit: minute, requests_per_unit: 1}\n", ""},
		{"other lease", "domain: llm\n\nholds: {id: rid, settle: done, lease: 1m}\n", "b.yaml:3: holds: not those of the domain's first file, DIR/a.yaml (the files of a merged domain declare the same holds, or none)"},
		{"none", "domain: llm\ndescriptors:\n  - key: user\n    value: b\n    rate_limit: {unit: minute, requests_per_unit: 1}\n", "b.yaml: holds: not those of the domain's first file, DIR/a.yaml (the files of a merged domain declare the same holds, or none)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{"a.yaml": a, "b.yaml": tc.b})
			c, err := Options{MergeDomains: true}.Load(dir)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got := len(c.Domains["llm"].Descriptors); got != 2 || c.Holds("llm") == nil {
					t.Errorf("got %d descriptors, holds %+v; want 2 and the holds", got, c.Holds("llm"))
				}
				return
			}
			checkError(t, "Load", err, dir+"/"+strings.ReplaceAll(tc.want, "DIR", dir))
		})
	}
}

// A RateLimitConfig has no field for holds: a domain over xDS has none.
func TestFromProtoNoHolds(t *testing.T) {
	d, err := FromProto("llm", &rlsconfv3.RateLimitConfig{Domain: "llm", Descriptors: []*rlsconfv3.RateLimitDescriptor{{
		Key: "request_id", RateLimit: &rlsconfv3.RateLimitPolicy{Unit: rlsconfv3.RateLimitUnit_SECOND, RequestsPerUnit: 1},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	if d.Holds != nil {
		t.Errorf("got holds %+v, want none", d.Holds)
	}
}
