package forwardauth

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

const minimal = `
policies:
  - name: p
    domain: d
    rate_limits:
      - actions: [{remote_address: {}}]
`

func TestParseExample(t *testing.T) {
	c, err := Load("../../config/forward-auth.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := c.Policy("edge")
	if p == nil || p.Domain != "edge" || p.RefusedStatus != 429 || len(p.descriptors) != 4 {
		t.Fatalf("got %+v, want policy edge of domain edge with 4 descriptors", p)
	}
}

// TestParseErrors: each bad file gets an error naming the file, the line
// and the field or action at fault.
func TestParseErrors(t *testing.T) {
	cases := []struct{ name, yaml, want string }{
		{"empty", ``, "f.yaml: empty file: policies are required"},
		{"no policies", "trusted_proxies: [10.0.0.0/8]\n", "f.yaml: policies: at least one policy is required"},
		{"unknown field", "policies:\n  - name: p\n    domian: d\n", "f.yaml:3: field domian not found"},
		{"unknown top field", "policy: []\n", "f.yaml:1: field policy not found"},
		{"bad proxy", "trusted_proxies: [10.0.0.0/8, nope]\n" + minimal, `f.yaml:1: trusted_proxies: "nope" is not an address`},
		{"no name", "policies:\n  - domain: d\n    rate_limits: [{actions: [{remote_address: {}}]}]\n", "name: a policy needs a name"},
		{"bad name", "policies:\n  - name: a/b\n    domain: d\n", `f.yaml:2: name: a policy needs a name`},
		{"no domain", "policies:\n  - name: p\n    rate_limits: [{actions: [{remote_address: {}}]}]\n", `f.yaml:2: domain: policy "p" needs the domain`},
		{"no rules", "policies:\n  - name: p\n    domain: d\n", `f.yaml:2: rate_limits: policy "p" builds no descriptor`},
		{"twice", strings.TrimPrefix(minimal, "\n") + minimal[len("\npolicies:\n"):], `f.yaml:6: name: policy "p" is defined twice`},
		{"refused status", "policies:\n  - name: p\n    domain: d\n    refused_status: 500\n    rate_limits: [{actions: [{remote_address: {}}]}]\n", `f.yaml:4: refused_status: "500": want 429, or 403`},
		{"not envoy", "policies:\n  - name: p\n    domain: d\n    rate_limits:\n      - actions: [{remote_adress: {}}]\n", `f.yaml:5: rate_limits: not an Envoy RateLimit: `},
		{"invalid", "policies:\n  - name: p\n    domain: d\n    rate_limits:\n      - actions: []\n", `f.yaml:5: rate_limits: invalid RateLimit.Actions`},
		{"envoy only", "policies:\n  - name: p\n    domain: d\n    rate_limits:\n      - actions:\n          - remote_address: {}\n          - destination_cluster: {}\n", `f.yaml:7: destination_cluster: not available behind forward-auth`},
		{"metadata", "policies:\n  - name: p\n    domain: d\n    rate_limits:\n      - actions:\n          - metadata: {descriptor_key: k, metadata_key: {key: a, path: [{key: b}]}}\n", `f.yaml:6: metadata: not available`},
		{"limit override", "policies:\n  - name: p\n    domain: d\n    rate_limits:\n      - actions: [{remote_address: {}}]\n        limit: {dynamic_metadata: {metadata_key: {key: a, path: [{key: b}]}}}\n", `f.yaml:5: limit: limit overrides`},
		{"hits format", "policies:\n  - name: p\n    domain: d\n    rate_limits:\n      - actions: [{remote_address: {}}]\n        hits_addend: {format: \"%BYTES_RECEIVED%\"}\n", `f.yaml:5: hits_addend: format`},
		{"negative hits", "policies:\n  - name: p\n    domain: d\n    rate_limits:\n      - actions: [{remote_address: {}}]\n        hits_addend: {number: 2, is_negative_hits: true}\n", `f.yaml:5: is_negative_hits: a refund`},
		{"stream done", "policies:\n  - name: p\n    domain: d\n    rate_limits:\n      - actions: [{remote_address: {}}]\n        apply_on_stream_done: true\n", `f.yaml:5: apply_on_stream_done: forward-auth asks once`},
		{"bad regex", "policies:\n  - name: p\n    domain: d\n    rate_limits:\n      - actions:\n          - header_value_match: {descriptor_value: x, headers: [{name: a, safe_regex_match: {regex: \"(\"}}]}\n", `f.yaml:6: header_value_match: header "a": error parsing regexp`},
		{"yaml syntax", "policies: [\n", "f.yaml:"},
		{"too many actions", "policies:\n  - name: p\n    domain: d\n    rate_limits:\n      - actions: [" + strings.Repeat("{remote_address: {}}, ", rls.MaxEntries) + "{remote_address: {}}]\n", fmt.Sprintf("f.yaml:5: actions: %d actions", rls.MaxEntries+1)},
		{"too many descriptors", "policies:\n  - name: p\n    domain: d\n    rate_limits:\n" + strings.Repeat("      - actions: [{remote_address: {}}]\n", rls.MaxDescriptors+1), "f.yaml:69: rate_limits: policy \"p\" has 65 entries"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("f.yaml", []byte(c.yaml))
			if err == nil {
				t.Fatalf("no error, want %q", c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %q, want it to contain %q", err, c.want)
			}
			var e *Error
			if !errors.As(err, &e) || e.File != "f.yaml" {
				t.Fatalf("got %T %v, want an *Error of f.yaml", err, err)
			}
		})
	}
}

func TestLoadMissing(t *testing.T) {
	_, err := Load(t.TempDir() + "/none.yaml")
	if err == nil || !strings.Contains(err.Error(), "none.yaml") {
		t.Fatalf("got %v, want an error naming the file", err)
	}
}

// FuzzParse: no input makes the parser panic, and what it accepts builds
// descriptors for any request without panicking either.
func FuzzParse(f *testing.F) {
	example, err := os.ReadFile("../../config/forward-auth.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(example))
	f.Add(minimal)
	f.Add("policies:\n  - {name: p, domain: d, rate_limits: [{actions: [{query_parameters: {query_parameter_name: q, descriptor_key: q}}], hits_addend: {number: 3}}]}\n")
	f.Add("policies:\n  - {name: p, domain: d, rate_limits: [{actions: [{header_value_match: {descriptor_value: v, expect_match: false, headers: [{name: ':method', string_match: {exact: GET, ignore_case: true}}]}}]}]}\n")
	f.Add("trusted_proxies: ['::1', 10.0.0.0/8]\npolicies: [{name: p, domain: d, rate_limits: [{actions: [{masked_remote_address: {v4_prefix_mask_len: 8}}]}]}]\n")
	f.Fuzz(func(t *testing.T, data string) {
		c, err := Parse("f.yaml", []byte(data))
		if err != nil {
			return
		}
		for _, p := range c.policies {
			req := requestOf("GET", "/a?q=1", "1.2.3.4", "x-api-key", "k")
			p.Descriptors(&req)
		}
	})
}
