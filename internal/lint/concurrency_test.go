package lint

import (
	"strings"
	"testing"

	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

const concurrencyLimits = `
domain: edge
descriptors:
  - key: api_key
    rate_limit: {algorithm: concurrency, requests_per_unit: 10, lease: 30s, count_refused: true}
`

// perRouteLimits is a route named name whose RateLimitPerRoute holds the
// entries (YAML at column 0).
func perRouteLimits(name, entries string) string {
	return `
- name: ` + name + `
  match: {prefix: /` + name + `}
  route: {cluster: c}
  typed_per_filter_config:
    envoy.filters.http.ratelimit:
      "@type": type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimitPerRoute
      rate_limits:
` + indent(entries, 8)
}

const (
	acquire = `- actions: [{request_headers: {header_name: x-api-key, descriptor_key: api_key}}]`
	release = `- actions: [{request_headers: {header_name: x-api-key, descriptor_key: api_key}}]
  apply_on_stream_done: true
  hits_addend: {number: 1, is_negative_hits: true}`
)

// routeConfig is a route_config of one virtual host, "vh", whose routes
// are written at column 0 (perRouteLimits writes one).
func routeConfig(routes string) string {
	return `
route_config:
  name: rc
  virtual_hosts:
    - name: vh
      domains: ["*"]
      routes:
` + indent(routes, 8)
}

// TestConcurrencyReleases: a route that takes slots and gives them back on
// stream done is clean (the release is neither unmatched nor wrong); one
// that never gives them back, one that gives back what it never takes, a
// release on the request path, a hit on stream done, and a release where
// Envoy ignores hits_addend are each reported.
func TestConcurrencyReleases(t *testing.T) {
	routes := routeConfig(perRouteLimits("ok", acquire+"\n"+release) +
		perRouteLimits("leak", acquire) +
		perRouteLimits("only-release", release) +
		perRouteLimits("early", acquire+"\n"+`- actions: [{request_headers: {header_name: x-api-key, descriptor_key: api_key}}]
  hits_addend: {number: 1, is_negative_hits: true}`) +
		perRouteLimits("charge-after", acquire+"\n"+`- actions: [{request_headers: {header_name: x-api-key, descriptor_key: api_key}}]
  apply_on_stream_done: true`) + `
- name: route-level
  match: {prefix: /route-level}
  route:
    cluster: c
    rate_limits:
` + indent(acquire+"\n"+release, 6))
	got := check(t, bootstrap(routes, rateLimitFilter("")), concurrencyLimits)
	wantFindings(t, got,
		`concurrency: vhost "vh" route "early" typed_per_filter_config rate_limits[1]: edge.api_key: a release of the concurrency limit (limits.yaml:5) on the request path gives the slot back before the request is served: set apply_on_stream_done: true`,
		`concurrency: vhost "vh" route "charge-after" typed_per_filter_config rate_limits[1]: edge.api_key: a hit on stream done takes a slot of the concurrency limit (limits.yaml:5) that nothing gives back: set hits_addend {number: 1, is_negative_hits: true} to release`,
		`concurrency: vhost "vh" route "route-level" rate_limits[1]: edge.api_key: hits_addend is honoured only in a RateLimitPerRoute's rate_limits (typed_per_filter_config): here Envoy sends a plain hit, which takes a slot of the concurrency limit (limits.yaml:5) instead of giving one back`,
		`concurrency: vhost "vh" route "leak" typed_per_filter_config rate_limits[0]: edge.api_key: takes slots of the concurrency limit (limits.yaml:5) and never gives them back: each stays held for the whole lease (30s); add the same actions with apply_on_stream_done: true and hits_addend {number: 1, is_negative_hits: true}`,
		`concurrency: vhost "vh" route "only-release" typed_per_filter_config rate_limits[0]: edge.api_key: gives back slots of the concurrency limit (limits.yaml:5) that this route never takes: each release frees another request's slot early`,
		`concurrency: vhost "vh" route "early" typed_per_filter_config rate_limits[0]: edge.api_key: takes slots of the concurrency limit (limits.yaml:5) and never gives them back: each stays held for the whole lease (30s); add the same actions with apply_on_stream_done: true and hits_addend {number: 1, is_negative_hits: true}`,
		`concurrency: vhost "vh" route "charge-after" typed_per_filter_config rate_limits[0]: edge.api_key: takes slots of the concurrency limit (limits.yaml:5) and never gives them back: each stays held for the whole lease (30s); add the same actions with apply_on_stream_done: true and hits_addend {number: 1, is_negative_hits: true}`,
		`concurrency: vhost "vh" route "route-level" rate_limits[0]: edge.api_key: takes slots of the concurrency limit (limits.yaml:5) and never gives them back: each stays held for the whole lease (30s); add the same actions with apply_on_stream_done: true and hits_addend {number: 1, is_negative_hits: true}`,
	)
}

// TestConcurrencyWithoutCountRefused: a release beside a limit that does
// not count refused hits is reported, since Envoy sends it for the
// requests it refused too.
func TestConcurrencyWithoutCountRefused(t *testing.T) {
	routes := routeConfig(perRouteLimits("ok", acquire+"\n"+release))
	limits := "domain: edge\ndescriptors:\n  - key: api_key\n    rate_limit: {algorithm: concurrency, requests_per_unit: 10}\n"
	wantFindings(t, check(t, bootstrap(routes, rateLimitFilter("")), limits),
		`concurrency: vhost "vh" route "ok" typed_per_filter_config rate_limits[1]: edge.api_key: Envoy sends this release for refused requests too, and the concurrency limit (limits.yaml:4) does not count refused hits: each refused request frees a slot of one still in flight; set count_refused: true`)
}

// TestConcurrencyOverRLQS: a bucket that reaches a concurrency limit is
// reported: RLQS does not enforce it.
func TestConcurrencyOverRLQS(t *testing.T) {
	b, err := ParseBootstrap([]byte(bootstrap(`
route_config:
  name: rc
  virtual_hosts:
    - name: vh
      domains: ["*"]
      routes: [{match: {prefix: /}, route: {cluster: c}}]
`, `- name: envoy.filters.http.rate_limit_quota
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.filters.http.rate_limit_quota.v3.RateLimitQuotaFilterConfig
    rlqs_server: {envoy_grpc: {cluster_name: rls}}
    domain: edge
    bucket_matchers:
      matcher_list:
        matchers:
          - predicate:
              single_predicate:
                input:
                  name: key
                  typed_config: {"@type": type.googleapis.com/envoy.type.matcher.v3.HttpRequestHeaderMatchInput, header_name: x-api-key}
                value_match: {contains: "k"}
            on_match:
              action:
                name: bucket
                typed_config:
                  "@type": type.googleapis.com/envoy.extensions.filters.http.rate_limit_quota.v3.RateLimitQuotaBucketSettings
                  bucket_id_builder:
                    bucket_id_builder:
                      api_key:
                        custom_value:
                          name: key
                          typed_config: {"@type": type.googleapis.com/envoy.type.matcher.v3.HttpRequestHeaderMatchInput, header_name: x-api-key}
                  reporting_interval: 5s
`)))
	if err != nil {
		t.Fatal(err)
	}
	d, err := config.Parse("limits.yaml", []byte(concurrencyLimits))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range Check(b, &config.Config{Domains: map[string]*config.Domain{d.Name: d}}) {
		if f.Kind == Concurrency {
			got = append(got, f.String())
		}
	}
	if len(got) != 1 || !strings.Contains(got[0], "RLQS does not enforce the concurrency limit (limits.yaml:5)") {
		t.Errorf("findings %q, want one that RLQS does not enforce the concurrency limit", got)
	}
}
