package forwardauth

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"
)

// requestOf is a forwarded request from client with the headers given
// (name, value, ...); method and uri "" leave them unforwarded.
func requestOf(method, uri, client string, header ...string) Request {
	h := http.Header{}
	for i := 0; i+1 < len(header); i += 2 {
		h.Add(header[i], header[i+1])
	}
	if method != "" {
		h.Set("X-Forwarded-Method", method)
	}
	if uri != "" {
		h.Set("X-Original-URI", uri)
	}
	var addr netip.Addr
	if client != "" {
		addr = netip.MustParseAddr(client)
	}
	return ForwardedRequest(h, addr)
}

func policyOf(t *testing.T, rateLimits string) *Policy {
	t.Helper()
	c, err := Parse("t.yaml", []byte("policies:\n  - name: p\n    domain: d\n    rate_limits:\n"+rateLimits))
	if err != nil {
		t.Fatal(err)
	}
	return c.Policy("p")
}

// shapes writes descriptors as [k=v, k=v] [k=v], with +N for hits.
func shapes(p *Policy, req Request) (string, *Refusal) {
	ds, refusal := p.Descriptors(&req)
	var parts []string
	for _, d := range ds {
		var es []string
		for _, e := range d.GetEntries() {
			es = append(es, e.GetKey()+"="+e.GetValue())
		}
		s := "[" + strings.Join(es, ", ") + "]"
		if d.GetHitsAddend() != nil {
			s += fmt.Sprintf("+%d", d.GetHitsAddend().GetValue())
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " "), refusal
}

// TestDescriptors: each action builds Envoy's entry, and an entry an
// action cannot fill drops its whole descriptor, as in Envoy.
func TestDescriptors(t *testing.T) {
	rules := `
      - actions: [{remote_address: {}}]
      - actions: [{masked_remote_address: {v4_prefix_mask_len: 24, v6_prefix_mask_len: 64}}]
      - actions:
          - request_headers: {header_name: X-Api-Key, descriptor_key: api_key}
      - actions:
          - generic_key: {descriptor_value: all}
          - request_headers: {header_name: x-plan, descriptor_key: plan, skip_if_absent: true}
      - actions:
          - header_value_match:
              descriptor_key: path
              descriptor_value: /login
              headers: [{name: ":path", string_match: {prefix: /login}}, {name: ":method", exact_match: POST}]
          - remote_address: {}
        hits_addend: {number: 5}
      - actions:
          - query_parameters: {query_parameter_name: page, descriptor_key: page}
      - actions:
          - header_value_match: {descriptor_value: not-get, expect_match: false, headers: [{name: ":method", exact_match: GET}]}
`
	p := policyOf(t, rules)
	cases := []struct {
		name string
		req  Request
		want string
	}{
		{"address only", requestOf("GET", "/", "10.1.2.3"),
			"[remote_address=10.1.2.3] [masked_remote_address=10.1.2.0/24] [generic_key=all]"},
		{"ipv6 subnet", requestOf("GET", "/", "2001:db8::1"),
			"[remote_address=2001:db8::1] [masked_remote_address=2001:db8::/64] [generic_key=all]"},
		{"api key and plan", requestOf("GET", "/", "10.1.2.3", "x-api-key", "k1", "X-Plan", "pro"),
			"[remote_address=10.1.2.3] [masked_remote_address=10.1.2.0/24] [api_key=k1] [generic_key=all, plan=pro]"},
		{"login post", requestOf("POST", "/login?next=/", "10.1.2.3"),
			"[remote_address=10.1.2.3] [masked_remote_address=10.1.2.0/24] [generic_key=all] [path=/login, remote_address=10.1.2.3]+5 [header_match=not-get]"},
		{"login get does not match", requestOf("GET", "/login", "10.1.2.3"),
			"[remote_address=10.1.2.3] [masked_remote_address=10.1.2.0/24] [generic_key=all]"},
		{"query parameter", requestOf("GET", "/list?page=3&x=1", "10.1.2.3"),
			"[remote_address=10.1.2.3] [masked_remote_address=10.1.2.0/24] [generic_key=all] [page=3]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, refusal := shapes(p, c.req)
			if refusal != nil {
				t.Fatalf("refused: %v", refusal)
			}
			if got != c.want {
				t.Fatalf("got  %s\nwant %s", got, c.want)
			}
		})
	}
}

// TestDescriptorsRefused: what the rules cannot read safely is refused
// with its status, never keyed on a guess.
func TestDescriptorsRefused(t *testing.T) {
	long := strings.Repeat("k", MaxValueBytes+1)
	cases := []struct {
		name, rules string
		req         Request
		status      int
		outcome     string
	}{
		{"path not forwarded", "      - actions: [{request_headers: {header_name: ':path', descriptor_key: path}}]\n",
			requestOf("GET", "", "10.0.0.1"), 400, OutcomeMissingForward},
		{"method not forwarded", "      - actions: [{header_value_match: {descriptor_value: x, headers: [{name: ':method', exact_match: GET}]}}]\n",
			requestOf("", "/", "10.0.0.1"), 400, OutcomeMissingForward},
		{"query without uri", "      - actions: [{query_parameters: {query_parameter_name: q, descriptor_key: q}}]\n",
			requestOf("GET", "", "10.0.0.1"), 400, OutcomeMissingForward},
		{"repeated header", "      - actions: [{request_headers: {header_name: x-api-key, descriptor_key: api_key}}]\n",
			requestOf("GET", "/", "10.0.0.1", "X-Api-Key", "a", "X-Api-Key", "b"), 400, OutcomeRepeatedHeader},
		{"repeated query", "      - actions: [{query_parameters: {query_parameter_name: q, descriptor_key: q}}]\n",
			requestOf("GET", "/?q=1&q=2", "10.0.0.1"), 400, OutcomeRepeatedHeader},
		{"long header", "      - actions: [{request_headers: {header_name: x-api-key, descriptor_key: api_key}}]\n",
			requestOf("GET", "/", "10.0.0.1", "X-Api-Key", long), 431, OutcomeTooLong},
		{"long path", "      - actions: [{request_headers: {header_name: ':path', descriptor_key: path}}]\n",
			requestOf("GET", "/"+long, "10.0.0.1"), 431, OutcomeTooLong},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, refusal := shapes(policyOf(t, c.rules), c.req)
			if refusal == nil {
				t.Fatalf("got %s, want a refusal %d %s", got, c.status, c.outcome)
			}
			if refusal.Status != c.status || refusal.Outcome != c.outcome {
				t.Fatalf("got %d %s (%s), want %d %s", refusal.Status, refusal.Outcome, refusal.Reason, c.status, c.outcome)
			}
		})
	}
	// The host, forwarded or not.
	p := policyOf(t, "      - actions: [{request_headers: {header_name: ':authority', descriptor_key: host}}]\n")
	if got, refusal := shapes(p, requestOf("", "", "10.0.0.1", "X-Forwarded-Host", "example.com")); refusal != nil || got != "[host=example.com]" {
		t.Fatalf("got %s %v, want [host=example.com]", got, refusal)
	}
	if _, refusal := shapes(p, requestOf("GET", "/", "10.0.0.1")); refusal == nil || refusal.Outcome != OutcomeMissingForward {
		t.Fatalf("got %v, want %s", refusal, OutcomeMissingForward)
	}
	// A rule that does not read the repeated header does not refuse.
	p = policyOf(t, "      - actions: [{remote_address: {}}]\n")
	if got, refusal := shapes(p, requestOf("", "", "10.0.0.1", "X-Api-Key", "a", "X-Api-Key", "b")); refusal != nil || got != "[remote_address=10.0.0.1]" {
		t.Fatalf("got %s %v, want [remote_address=10.0.0.1]", got, refusal)
	}
}
