package lint

import (
	"slices"
	"strings"
	"testing"

	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// TestHoldsTestdata: in a domain with holds, a route that reserves and
// settles each limit (the id from x-request-id, the settle entry on
// stream done) is clean, and so is a peek with a charge after the
// response (it holds nothing); a settle on the request path, a settle
// without the id, an id of one fixed value and an id on stream done
// without the settle are each reported, and so is every reservation that
// is left unsettled on its route. The id and settle entries are not
// matched: no descriptor is reported unmatched for carrying them, and the
// concurrency limit's settles are not taken for releases that need
// count_refused.
func TestHoldsTestdata(t *testing.T) {
	fs, err := Lint("testdata/holds/envoy.yaml", "testdata/holds/limits.yaml", config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const (
		route     = `holds: vhost "llm" route `
		perRoute  = ` typed_per_filter_config rate_limits`
		unsettled = `under the call's id and never settles it: each call holds its cost for the whole lease (10m0s); add the same actions with the settle entry, apply_on_stream_done: true and the actual cost as hits_addend`
		tokens    = `: llm.budget_tokens.api_key: reserves the limit (testdata/holds/limits.yaml:10) ` + unsettled
	)
	want := []string{
		route + `"settle-early"` + perRoute + `[1]: llm: a settle (entry "settle") on the request path ends the call's hold before the call is served, and charges its hits_addend as the actual cost: set apply_on_stream_done: true`,
		route + `"settle-without-id"` + perRoute + `[1]: llm: a settle (entry "settle") without the id entry "request_id" ends no hold: envoy-rls charges it as a plain hit after the response; add request_headers {header_name: x-request-id, descriptor_key: request_id}`,
		route + `"fixed-id"` + perRoute + `[0]: llm: the id entry "request_id" has the one value "r1" on every call: each reserve after the first is taken as a retry of it and charged nothing; take it from x-request-id (request_headers)`,
		route + `"id-on-done"` + perRoute + `[1]: llm: an id entry "request_id" on stream done without the settle entry "settle" reserves after the call has ended, and nothing settles it: add generic_key {descriptor_key: settle, descriptor_value: "true"}`,
		route + `"never-settled"` + perRoute + `[0]` + tokens,
		route + `"never-settled"` + perRoute + `[1]: llm.in_flight.api_key: reserves the limit (testdata/holds/limits.yaml:16) ` + strings.Replace(unsettled, "its cost", "its slots", 1),
		route + `"settle-early"` + perRoute + `[0]` + tokens,
		route + `"settle-without-id"` + perRoute + `[0]` + tokens,
		route + `"id-on-done"` + perRoute + `[0]` + tokens,
	}
	if got := strs(fs); !slices.Equal(got, want) {
		t.Errorf("findings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

const holdsLimits = `
domain: edge
holds: {id: request_id, settle: settle}
descriptors:
  - key: api_key
    rate_limit: {unit: day, requests_per_unit: 1000, algorithm: fixed_window}
`

// TestHoldsWithoutAnID: a domain with holds to which no route sends the
// id (a charge after the response, as before holds) is reported once, at
// the domain: nothing is reserved. A domain with holds that no filter
// uses is reported unreachable only, and one whose routes send the id
// somewhere is not reported.
func TestHoldsWithoutAnID(t *testing.T) {
	key := `{request_headers: {header_name: x-api-key, descriptor_key: api_key}}`
	rid := `{request_headers: {header_name: x-request-id, descriptor_key: request_id}}`
	peek := `- actions: [` + key + `]
  hits_addend: {number: 0}`
	after := `- actions: [` + key + `, {generic_key: {descriptor_key: settle, descriptor_value: "true"}}]
  hits_addend: {format: "%DYNAMIC_METADATA(m:cost)%"}
  apply_on_stream_done: true`
	got := check(t, bootstrap(routeConfig(perRouteLimits("old", peek)), rateLimitFilter("")), holdsLimits)
	wantFindings(t, got,
		`holds: edge: declares holds (limits.yaml:3) but no route sends the id entry "request_id": nothing is reserved, and a settle is a plain charge after the response; add request_headers {header_name: x-request-id, descriptor_key: request_id} to the reserve and the settle`)

	got = check(t, bootstrap(routeConfig(perRouteLimits("old", peek+"\n"+after)), rateLimitFilter("")), holdsLimits)
	wantFindings(t, got,
		`holds: vhost "vh" route "old" typed_per_filter_config rate_limits[1]: edge: a settle (entry "settle") without the id entry "request_id" ends no hold: envoy-rls charges it as a plain hit after the response; add request_headers {header_name: x-request-id, descriptor_key: request_id}`,
		`holds: edge: declares holds (limits.yaml:3) but no route sends the id entry "request_id": nothing is reserved, and a settle is a plain charge after the response; add request_headers {header_name: x-request-id, descriptor_key: request_id} to the reserve and the settle`)

	other := strings.Replace(rateLimitFilter(""), "domain: edge", "domain: other", 1)
	got = check(t, bootstrap(routeConfig(perRouteLimits("old", peek)), other), holdsLimits)
	wantFindings(t, got,
		`domain: listener "ingress" filter "envoy.filters.http.ratelimit": other: the filter's domain "other" is not in the limits (domains: edge)`,
		`unreachable: edge: no rate limit filter uses domain "edge": its 1 limit can never be reached`)

	reserve := `- actions: [` + key + `, ` + rid + `]
  hits_addend: {number: 10}`
	settle := `- actions: [` + key + `, ` + rid + `, {generic_key: {descriptor_key: settle, descriptor_value: "true"}}]
  hits_addend: {format: "%DYNAMIC_METADATA(m:cost)%"}
  apply_on_stream_done: true`
	got = check(t, bootstrap(routeConfig(perRouteLimits("new", reserve+"\n"+settle)+perRouteLimits("old", peek)), rateLimitFilter("")), holdsLimits)
	wantFindings(t, got)
}

// TestHoldsOutsidePerRoute: outside a RateLimitPerRoute Envoy sends no
// hits_addend, so a settle there charges 1, which is reported; its
// reserve, a hit of 1, is still settled.
func TestHoldsOutsidePerRoute(t *testing.T) {
	routes := routeConfig(`
- name: r
  match: {prefix: /}
  route:
    cluster: c
    rate_limits:
      - actions: [{request_headers: {header_name: x-api-key, descriptor_key: api_key}}, {request_headers: {header_name: x-request-id, descriptor_key: request_id}}]
      - actions: [{request_headers: {header_name: x-api-key, descriptor_key: api_key}}, {request_headers: {header_name: x-request-id, descriptor_key: request_id}}, {generic_key: {descriptor_key: settle, descriptor_value: "true"}}]
        hits_addend: {format: "%DYNAMIC_METADATA(m:cost)%"}
        apply_on_stream_done: true
`)
	wantFindings(t, check(t, bootstrap(routes, rateLimitFilter("")), holdsLimits),
		`holds: vhost "vh" route "r" rate_limits[1]: edge: hits_addend is honoured only in a RateLimitPerRoute's rate_limits (typed_per_filter_config): here the settle charges 1 as the call's actual cost`)
}

// TestHoldsOnlyInTheirDomain: in a domain without holds, an entry named
// like an id is an entry like any other, matched against the limits
// (here it meets none), and a concurrency release is judged as before.
func TestHoldsOnlyInTheirDomain(t *testing.T) {
	rid := `- actions: [{request_headers: {header_name: x-api-key, descriptor_key: api_key}}, {request_headers: {header_name: x-request-id, descriptor_key: request_id}}]`
	got := check(t, bootstrap(routeConfig(perRouteLimits("r", acquire+"\n"+release+"\n"+rid)), rateLimitFilter("")), concurrencyLimits)
	wantFindings(t, got,
		`unmatched: vhost "vh" route "r" typed_per_filter_config rate_limits[2]: edge: descriptor (api_key=*, request_id=*) matches no limit: no descriptor under edge.api_key matches request_id=*; Envoy sends it only when header "x-api-key" is present and header "x-request-id" is present`)
}
