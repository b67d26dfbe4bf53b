package lint

import (
	"slices"
	"strings"
	"testing"

	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// TestTestdata runs each pair under testdata and compares every finding,
// line for line.
func TestTestdata(t *testing.T) {
	for _, tc := range []struct {
		dir, limits string
		want        []string
	}{
		{dir: "clean"},
		{dir: "unmatched", want: []string{
			`unmatched: vhost "backend" route "login" rate_limits[1]: edge: descriptor (path="/login") matches no limit: it ends at edge.path_/login, which has no rate_limit`,
			`unmatched: vhost "backend" route "login" rate_limits[2]: edge: descriptor (path="/login", user=*) matches no limit: no descriptor under edge.path_/login matches user=*; Envoy sends it only when header "x-user" is present`,
			`unmatched: vhost "backend" route "search" rate_limits[0]: edge: descriptor (path="/search") matches no limit: no top-level descriptor of domain edge matches path="/search"`,
			`unmatched: vhost "backend" route "api" rate_limits[1]: edge: descriptor (user=*) matches no limit: no top-level descriptor of domain edge matches user=*; Envoy sends it only when header "x-user" is present`,
			`unmatched: vhost "backend" route "api" rate_limits[1]: edge: descriptor () is empty: envoy-rls refuses a request that holds one (InvalidArgument), so Envoy's failure mode decides it; Envoy sends it only when header "x-user" is absent`,
			`unmatched: vhost "backend" rate_limits[0]: edge: descriptor (remote_address=*) matches a limit only for values remote_address="10.0.0.1", remote_address="10.0.0.2"`,
		}},
		{dir: "unreachable", limits: "testdata/unreachable/limits", want: []string{
			`unreachable: edge.path_/login.user: no route sends a descriptor that reaches this limit (testdata/unreachable/limits/edge.yaml:10)`,
			`unreachable: edge.path_/v1/*: no route sends a descriptor that reaches this limit (testdata/unreachable/limits/edge.yaml:15)`,
			`unreachable: edge.path_/admin: no route sends a descriptor that reaches this limit (testdata/unreachable/limits/edge.yaml:18)`,
			`unreachable: internal: no rate limit filter uses domain "internal": its 1 limit can never be reached`,
		}},
		{dir: "domain", want: []string{
			`domain: listener "ingress" filter "envoy.filters.http.ratelimit": edge-prod: the filter's domain "edge-prod" is not in the limits (domains: edge)`,
			`domain: vhost "backend" route "admin" typed_per_filter_config: edge-admin: the per-route domain "edge-admin" is not in the limits (domains: edge)`,
			`unreachable: edge: no rate limit filter uses domain "edge": its 1 limit can never be reached`,
		}},
		{dir: "rlqs", want: []string{
			`unmatched: listener "ingress" filter "envoy.filters.http.rate_limit_quota" bucket "login": edge: bucket id {path="/login"} matches no limit: it ends at edge.path_/login, which has no rate_limit`,
			`unmatched: listener "ingress" filter "envoy.filters.http.rate_limit_quota" bucket "regional": edge: bucket id {path="/search", region=*} matches no limit: no descriptor under edge.path_/search takes any of region=*`,
			`unmatched: listener "ingress" filter "envoy.filters.http.rate_limit_quota" bucket "user": edge: bucket id {user=*} matches a limit only for values user="alice"`,
			`unreachable: edge.never: no route sends a descriptor that reaches this limit (testdata/rlqs/limits.yaml:16)`,
		}},
		{dir: "leaky", want: []string{
			`leaky-timeout: listener "ingress" filter "envoy.filters.http.ratelimit": edge.generic_key_uploads: leaky_bucket "uploads" (testdata/leaky/limits.yaml:7) may delay a request 500ms, longer than the filter's default timeout 20ms (it sets none): a request whose turn is further away is refused instead of delayed; set the filter's timeout above 500ms`,
		}},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			limits := tc.limits
			if limits == "" {
				limits = "testdata/" + tc.dir + "/limits.yaml"
			}
			fs, err := Lint("testdata/"+tc.dir+"/envoy.yaml", limits, config.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got := strs(fs); !slices.Equal(got, tc.want) {
				t.Errorf("findings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestLintErrors(t *testing.T) {
	if _, err := Lint("testdata/missing.yaml", "testdata/clean/limits.yaml", config.Options{}); err == nil {
		t.Error("a missing bootstrap: no error")
	}
	if _, err := Lint("testdata/clean/envoy.yaml", "testdata/missing.yaml", config.Options{}); err == nil {
		t.Error("missing limits: no error")
	}
	// The leaky bucket's 500 ms is beyond a -max-delay of 100 ms: the
	// limits do not load, as the server would refuse them.
	if _, err := Lint("testdata/leaky/envoy.yaml", "testdata/leaky/limits.yaml", config.Options{MaxDelay: 100e6}); err == nil {
		t.Error("a leaky bucket beyond -max-delay: no error")
	}
}

func TestFindingString(t *testing.T) {
	for _, tc := range []struct {
		f    Finding
		want string
	}{
		{Finding{Unmatched, "r", "l", "m"}, "unmatched: r: l: m"},
		{Finding{Unreachable, "", "l", "m"}, "unreachable: l: m"},
		{Finding{Unchecked, "r", "", "m"}, "unchecked: r: m"},
	} {
		if got := tc.f.String(); got != tc.want {
			t.Errorf("%#v: %q, want %q", tc.f, got, tc.want)
		}
	}
}

func strs(fs []Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.String())
	}
	return out
}

// bootstrap is a bootstrap with one listener whose connection manager
// holds routes (the YAML of its route_config, or of rds) and filters
// (http_filters without the router), both written at column 0.
func bootstrap(routes, filters string) string {
	return `node: {id: n1, cluster: edge-proxy}
static_resources:
  listeners:
    - name: ingress
      address: {socket_address: {address: 0.0.0.0, port_value: 10000}}
      filter_chains:
        - filters:
            - name: envoy.filters.network.http_connection_manager
              typed_config:
                "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
                stat_prefix: ingress
` + indent(routes, 16) + `
                http_filters:
` + indent(filters, 18) + `
                  - name: envoy.filters.http.router
                    typed_config:
                      "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
`
}

// rateLimitFilter is the filter with domain edge and more fields.
func rateLimitFilter(more string) string {
	return `- name: envoy.filters.http.ratelimit
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit
    domain: edge
    rate_limit_service: {transport_api_version: V3, grpc_service: {envoy_grpc: {cluster_name: rls}}}
` + indent(more, 4)
}

func indent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	lines := strings.Split(strings.Trim(s, "\n"), "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = pad + l
		}
	}
	return strings.Join(lines, "\n")
}

// check lints the bootstrap against one limits file.
func check(t *testing.T, envoy, limits string) []string {
	t.Helper()
	b, err := ParseBootstrap([]byte(envoy))
	if err != nil {
		t.Fatalf("bootstrap: %v\n%s", err, envoy)
	}
	d, err := config.Parse("limits.yaml", []byte(limits))
	if err != nil {
		t.Fatalf("limits: %v", err)
	}
	return strs(Check(b, &config.Config{Domains: map[string]*config.Domain{d.Name: d}}))
}

func wantFindings(t *testing.T, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("findings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

const remoteAddressLimits = `
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 10}
`

// A route's entries apply when their stage is the filter's; the virtual
// host's apply (by default) only to a route without rate_limits of any
// stage.
func TestStage(t *testing.T) {
	routes := `
route_config:
  virtual_hosts:
    - name: vh
      domains: ["*"]
      rate_limits:
        - stage: 1
          actions: [{generic_key: {descriptor_value: from-vh}}]
      routes:
        - name: staged
          match: {prefix: /a}
          route:
            cluster: c
            rate_limits:
              - stage: 1
                actions: [{remote_address: {}}]
              - actions: [{generic_key: {descriptor_value: stage0}}]
        - name: stage0-only
          match: {prefix: /b}
          route:
            cluster: c
            rate_limits:
              - actions: [{generic_key: {descriptor_value: stage0}}]
        - name: none
          match: {prefix: /}
          route: {cluster: c}
`
	got := check(t, bootstrap(routes, rateLimitFilter("stage: 1")), remoteAddressLimits)
	wantFindings(t, got,
		`unmatched: vhost "vh" rate_limits[0]: edge: descriptor (generic_key="from-vh") matches no limit: no top-level descriptor of domain edge matches generic_key="from-vh"`)
}

func TestVirtualHostOptions(t *testing.T) {
	routes := `
route_config:
  virtual_hosts:
    - name: vh
      domains: ["*"]
      rate_limits:
        - actions: [{generic_key: {descriptor_value: vh}}]
      routes:
        - name: include
          match: {prefix: /a}
          route:
            cluster: c
            include_vh_rate_limits: true
            rate_limits: [{actions: [{remote_address: {}}]}]
        - name: include-per-route
          match: {prefix: /b}
          route:
            cluster: c
            rate_limits: [{actions: [{remote_address: {}}]}]
          typed_per_filter_config:
            envoy.filters.http.ratelimit:
              "@type": type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimitPerRoute
              vh_rate_limits: INCLUDE
        - name: ignore
          match: {prefix: /c}
          route: {cluster: c}
          typed_per_filter_config:
            envoy.filters.http.ratelimit:
              "@type": type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimitPerRoute
              vh_rate_limits: IGNORE
        - name: override
          match: {prefix: /d}
          route:
            cluster: c
            rate_limits: [{actions: [{remote_address: {}}]}]
`
	limits := remoteAddressLimits + `
  - key: generic_key
    value: vh
    rate_limit: {unit: second, requests_per_unit: 10}
`
	// Every limit is reached: the vh entry through the routes that
	// include it.
	wantFindings(t, check(t, bootstrap(routes, rateLimitFilter("")), limits))

	// Without the including routes, the vh limit is unreachable: IGNORE
	// and a route's own rate_limits keep it out.
	var kept []string
	for _, r := range strings.SplitAfter(routes, "\n        - name: ") {
		if !strings.HasPrefix(r, "include") {
			kept = append(kept, r)
		}
	}
	routes = strings.Join(kept, "")
	wantFindings(t, check(t, bootstrap(routes, rateLimitFilter("")), limits),
		`unreachable: edge.generic_key_vh: no route sends a descriptor that reaches this limit (limits.yaml:7)`)
}

// The filter's own rate_limits replace the routes'; a per-route config's
// replace both.
func TestFilterAndPerRouteRateLimits(t *testing.T) {
	routes := `
route_config:
  name: rc
  virtual_hosts:
    - name: vh
      domains: ["*"]
      rate_limits: [{actions: [{generic_key: {descriptor_value: ignored}}]}]
      routes:
        - name: own
          match: {prefix: /own}
          route: {cluster: c}
          typed_per_filter_config:
            envoy.filters.http.ratelimit:
              "@type": type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimitPerRoute
              rate_limits: [{actions: [{generic_key: {descriptor_value: per-route}}]}]
        - name: other
          match: {prefix: /}
          route:
            cluster: c
            rate_limits: [{actions: [{generic_key: {descriptor_value: ignored}}]}]
`
	got := check(t, bootstrap(routes, rateLimitFilter(`rate_limits: [{actions: [{generic_key: {descriptor_value: filter}}]}]`)), remoteAddressLimits)
	wantFindings(t, got,
		`unmatched: vhost "vh" route "own" typed_per_filter_config rate_limits[0]: edge: descriptor (generic_key="per-route") matches no limit: no top-level descriptor of domain edge matches generic_key="per-route"`,
		`unmatched: listener "ingress" filter "envoy.filters.http.ratelimit" rate_limits[0]: edge: descriptor (generic_key="filter") matches no limit: no top-level descriptor of domain edge matches generic_key="filter"`,
		`unreachable: edge.remote_address: no route sends a descriptor that reaches this limit (limits.yaml:4)`)
}

// A filter disabled by default applies only where a per-route config
// enables it; a route may disable an enabled filter; a redirect is never
// rate limited.
func TestDisabledAndNonForwarding(t *testing.T) {
	routes := `
route_config:
  virtual_hosts:
    - name: vh
      domains: ["*"]
      routes:
        - name: enabled
          match: {prefix: /a}
          route:
            cluster: c
            rate_limits: [{actions: [{generic_key: {descriptor_value: a}}]}]
          typed_per_filter_config:
            envoy.filters.http.ratelimit:
              "@type": type.googleapis.com/envoy.config.route.v3.FilterConfig
              config:
                "@type": type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimitPerRoute
        - name: default
          match: {prefix: /b}
          route:
            cluster: c
            rate_limits: [{actions: [{generic_key: {descriptor_value: b}}]}]
        - name: redirect
          match: {prefix: /}
          redirect: {path_redirect: /a}
`
	got := check(t, bootstrap(routes, rateLimitFilter("")+"\n  disabled: true"), remoteAddressLimits)
	wantFindings(t, got,
		`unmatched: vhost "vh" route "enabled" rate_limits[0]: edge: descriptor (generic_key="a") matches no limit: no top-level descriptor of domain edge matches generic_key="a"`,
		`unreachable: edge.remote_address: no route sends a descriptor that reaches this limit (limits.yaml:4)`)

	routes = strings.Replace(routes, `"@type": type.googleapis.com/envoy.config.route.v3.FilterConfig`,
		`"@type": type.googleapis.com/envoy.config.route.v3.FilterConfig
              disabled: true`, 1)
	got = check(t, bootstrap(routes, rateLimitFilter("")), remoteAddressLimits)
	wantFindings(t, got,
		`unmatched: vhost "vh" route "default" rate_limits[0]: edge: descriptor (generic_key="b") matches no limit: no top-level descriptor of domain edge matches generic_key="b"`,
		`unreachable: edge.remote_address: no route sends a descriptor that reaches this limit (limits.yaml:4)`)
}

// Values the route fixes: clusters, headers and query parameters its match
// requires, the node's cluster.
func TestKnownValues(t *testing.T) {
	routes := `
route_config:
  virtual_hosts:
    - name: vh
      domains: ["*"]
      routes:
        - name: split
          match:
            prefix: /
            headers: [{name: x-tenant, string_match: {exact: acme}}]
            query_parameters: [{name: v, string_match: {prefix: "2"}}]
          route:
            weighted_clusters:
              clusters: [{name: blue, weight: 90}, {name: green, weight: 10}]
            rate_limits:
              - actions:
                  - source_cluster: {}
                  - destination_cluster: {}
              - actions:
                  - request_headers: {header_name: X-Tenant, descriptor_key: tenant}
                  - query_parameters: {query_parameter_name: v, descriptor_key: version}
              - actions:
                  - header_value_match: {descriptor_value: bot, headers: [{name: user-agent, string_match: {contains: bot}}]}
`
	limits := `
domain: edge
descriptors:
  - key: source_cluster
    value: edge-proxy
    descriptors:
      - key: destination_cluster
        value: blue
        rate_limit: {unit: second, requests_per_unit: 10}
  - key: tenant
    value: acme
    descriptors:
      - key: version
        value: "1*"
        rate_limit: {unit: second, requests_per_unit: 10}
      - key: version
        value: "2.0"
        rate_limit: {unit: second, requests_per_unit: 10}
  - key: tenant
    value: other
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: header_match
    value: bot
    rate_limit: {unit: second, requests_per_unit: 1}
`
	got := check(t, bootstrap(routes, rateLimitFilter("")), limits)
	wantFindings(t, got,
		`unmatched: vhost "vh" route "split" rate_limits[0]: edge: descriptor (source_cluster="edge-proxy", destination_cluster="green") matches no limit: no descriptor under edge.source_cluster_edge-proxy matches destination_cluster="green"`,
		`unmatched: vhost "vh" route "split" rate_limits[1]: edge: descriptor (tenant="acme", version="2"*) matches a limit only for values version="2.0"`,
		`unreachable: edge.tenant_acme.version_1*: no route sends a descriptor that reaches this limit (limits.yaml:13)`,
		`unreachable: edge.tenant_other: no route sends a descriptor that reaches this limit (limits.yaml:19)`)
}

// Conditions: a descriptor is only sent when every action appends its entry.
func TestConditions(t *testing.T) {
	routes := `
route_config:
  virtual_hosts:
    - name: vh
      domains: ["*"]
      routes:
        - match: {safe_regex: {regex: "/x.*"}}
          route:
            cluster: c
            rate_limits:
              - actions:
                  - header_value_match: {descriptor_key: admin, descriptor_value: "yes", expect_match: false, headers: [{name: x-admin}]}
                  - query_parameters: {query_parameter_name: q, descriptor_key: q}
                  - metadata: {descriptor_key: user, metadata_key: {key: envoy.filters.http.jwt_authn, path: [{key: sub}]}}
`
	got := check(t, bootstrap(routes, rateLimitFilter("")), remoteAddressLimits)
	wantFindings(t, got,
		`unmatched: vhost "vh" route safe_regex "/x.*" rate_limits[0]: edge: descriptor (admin="yes", q=*, user=*) matches no limit: no top-level descriptor of domain edge matches admin="yes"; Envoy sends it only when the headers x-admin do not match and query parameter "q" is present and dynamic metadata "envoy.filters.http.jwt_authn.sub" is set`,
		`unreachable: edge.remote_address: no route sends a descriptor that reaches this limit (limits.yaml:4)`)
}

// skip_if_absent leaves the entry out and sends the rest: two descriptors
// to check, with and without it.
func TestSkipIfAbsent(t *testing.T) {
	routes := `
route_config:
  virtual_hosts:
    - name: vh
      domains: ["*"]
      rate_limits:
        - actions:
            - request_headers: {header_name: x-plan, descriptor_key: plan, skip_if_absent: true}
            - request_headers: {header_name: x-api-key, descriptor_key: api_key}
      routes:
        - match: {prefix: /}
          route: {cluster: c}
`
	withPlan := `
domain: edge
descriptors:
  - key: plan
    descriptors:
      - key: api_key
        rate_limit: {unit: second, requests_per_unit: 10}
`
	wantFindings(t, check(t, bootstrap(routes, rateLimitFilter("")), withPlan),
		`unmatched: vhost "vh" rate_limits[0]: edge: descriptor (api_key=*) matches no limit: no top-level descriptor of domain edge matches api_key=*; Envoy sends it only when header "x-plan" is absent and header "x-api-key" is present`)
	wantFindings(t, check(t, bootstrap(routes, rateLimitFilter("")), withPlan+`
  - key: api_key
    rate_limit: {unit: second, requests_per_unit: 10}
`))
}

// An extension that is a matcher input sends an entry named after it.
func TestMatcherInputExtension(t *testing.T) {
	routes := `
route_config:
  virtual_hosts:
    - name: vh
      domains: ["*"]
      routes:
        - match: {prefix: /}
          route:
            cluster: c
            rate_limits:
              - actions:
                  - extension:
                      name: remote_address
                      typed_config:
                        "@type": type.googleapis.com/envoy.type.matcher.v3.HttpRequestHeaderMatchInput
                        header_name: x-real-ip
`
	wantFindings(t, check(t, bootstrap(routes, rateLimitFilter("")), remoteAddressLimits))
}

// A limit override is applied by envoy-rls even where no limit matches.
func TestLimitOverride(t *testing.T) {
	routes := `
route_config:
  virtual_hosts:
    - name: vh
      domains: ["*"]
      routes:
        - match: {prefix: /}
          route:
            cluster: c
            rate_limits:
              - actions: [{remote_address: {}}]
              - actions: [{generic_key: {descriptor_value: tenant}}]
                limit: {dynamic_metadata: {metadata_key: {key: m, path: [{key: limit}]}}}
`
	wantFindings(t, check(t, bootstrap(routes, rateLimitFilter("")), remoteAddressLimits))
}

// What cannot be checked is reported, and the limits of its domain are not
// judged unreachable.
func TestUnchecked(t *testing.T) {
	rds := `
rds:
  route_config_name: edge-routes
  config_source: {ads: {}, resource_api_version: V3}
`
	wantFindings(t, check(t, bootstrap(rds, rateLimitFilter("")), remoteAddressLimits),
		`unchecked: listener "ingress" filter "envoy.filters.http.ratelimit": routes come from RDS (route_config_name "edge-routes"): only a static route_config can be checked; unreachable limits of domain "edge" are not reported`)
	// Which limits RDS routes reach is unknown: every leaky bucket of the
	// domain is held against the timeout.
	leaky := remoteAddressLimits + `
  - key: upload
    rate_limit: {algorithm: leaky_bucket, unit: second, requests_per_unit: 10, burst: 1}
`
	wantFindings(t, check(t, bootstrap(rds, rateLimitFilter("")), leaky),
		`unchecked: listener "ingress" filter "envoy.filters.http.ratelimit": routes come from RDS (route_config_name "edge-routes"): only a static route_config can be checked; unreachable limits of domain "edge" are not reported`,
		`leaky-timeout: listener "ingress" filter "envoy.filters.http.ratelimit": edge.upload: leaky_bucket (limits.yaml:8) may delay a request 100ms, longer than the filter's default timeout 20ms (it sets none): a request whose turn is further away is refused instead of delayed; set the filter's timeout above 100ms`)

	lds := "dynamic_resources:\n  lds_config: {path_config_source: {path: /etc/envoy/lds.yaml}}\n" +
		bootstrap(`route_config: {virtual_hosts: [{name: vh, domains: ["*"], routes: [{match: {prefix: /}, route: {cluster: c}}]}]}`, rateLimitFilter(""))
	wantFindings(t, check(t, lds, remoteAddressLimits),
		`unchecked: dynamic_resources: listeners come from LDS: only static listeners can be checked; unreachable limits are not reported`)

	routes := `
route_config:
  virtual_hosts:
    - name: vh
      domains: ["*"]
      routes:
        - match: {prefix: /}
          route:
            cluster: c
            rate_limits:
              - actions:
                  - extension:
                      name: envoy.rate_limit_descriptors.expr
                      typed_config:
                        "@type": type.googleapis.com/envoy.extensions.rate_limit_descriptors.expr.v3.Descriptor
                        descriptor_key: remote_address
                        text: source.address
              - actions:
                  - extension:
                      name: custom
                      typed_config:
                        "@type": type.googleapis.com/example.Custom
                        anything: goes
`
	wantFindings(t, check(t, bootstrap(routes, rateLimitFilter("")), remoteAddressLimits),
		`unchecked: vhost "vh" route prefix "/" rate_limits[1]: edge: actions[0]: extension "custom": its descriptor entry cannot be derived; unreachable limits of this domain are not reported`)
}

func TestLeakyTimeouts(t *testing.T) {
	routes := `
route_config:
  virtual_hosts:
    - name: vh
      domains: ["*"]
      routes:
        - match: {prefix: /}
          route:
            cluster: c
            rate_limits: [{actions: [{remote_address: {}}]}]
`
	limits := `
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {algorithm: leaky_bucket, unit: second, requests_per_unit: 10, burst: 2}
`
	wantFindings(t, check(t, bootstrap(routes, rateLimitFilter("timeout: 0.2s")), limits))
	wantFindings(t, check(t, bootstrap(routes, rateLimitFilter("timeout: 0s")), limits)) // no timeout
	wantFindings(t, check(t, bootstrap(routes, rateLimitFilter("timeout: 0.15s")), limits),
		`leaky-timeout: listener "ingress" filter "envoy.filters.http.ratelimit": edge.remote_address: leaky_bucket (limits.yaml:5) may delay a request 200ms, longer than the filter's timeout 150ms: a request whose turn is further away is refused instead of delayed; set the filter's timeout above 200ms`)
}

func TestParseBootstrap(t *testing.T) {
	ok := bootstrap(`route_config: {virtual_hosts: [{name: vh, domains: ["*"], routes: [{match: {prefix: /}, route: {cluster: c}}]}]}`,
		rateLimitFilter(""))
	if _, err := ParseBootstrap([]byte(ok)); err != nil {
		t.Fatal(err)
	}
	// Extensions this build does not know are skipped.
	unknown := strings.Replace(ok, "                http_filters:\n", `                http_filters:
                  - name: custom
                    typed_config: {"@type": type.googleapis.com/example.Unknown, field: 1}
`, 1)
	if _, err := ParseBootstrap([]byte(unknown)); err != nil {
		t.Errorf("an unknown extension: %v", err)
	}
	// So are those lint does not read, whose configs are Envoy's to check:
	// a CORS filter with a field CORS has not.
	cors := strings.Replace(ok, "                http_filters:\n", `                http_filters:
                  - name: envoy.filters.http.cors
                    typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors, no_such_field: 1}
`, 1)
	if _, err := ParseBootstrap([]byte(cors)); err != nil {
		t.Errorf("an extension lint does not read: %v", err)
	}
	// JSON is YAML.
	if _, err := ParseBootstrap([]byte(`{"node": {"id": "n", "cluster": "c"}}`)); err != nil {
		t.Errorf("JSON: %v", err)
	}
	for name, bad := range map[string]string{
		"empty":                 "",
		"not YAML":              "node: [",
		"unknown field":         strings.Replace(ok, "stat_prefix:", "stat_prefx:", 1),
		"unknown nested field":  strings.Replace(ok, "domain: edge", "domian: edge", 1),
		"invalid: empty domain": strings.Replace(ok, "domain: edge", "domain: ''", 1),
		"invalid: no vh name":   strings.Replace(ok, "name: vh, ", "", 1),
		"a list for a message":  "node: []",
	} {
		if _, err := ParseBootstrap([]byte(bad)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestCanMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		v       value
		want    bool
	}{
		{"/api/*", value{prefixed, "/api/"}, true},
		{"/api/*", value{prefixed, "/api/v1/"}, true},
		{"/api/*", value{prefixed, "/"}, true},
		{"/api/*", value{prefixed, "/v1/"}, false},
		{"/a*/x", value{prefixed, "/abc/y"}, true}, // /abc/y/x
		{"*.json", value{prefixed, "/api/"}, true},
		{"/api/*", value{known, "/api/x"}, true},
		{"/api/*", value{known, "/ap"}, false},
		{"/api/*", value{kind: anyValue}, true},
	} {
		if got := canMatch(tc.pattern, tc.v); got != tc.want {
			t.Errorf("canMatch(%q, %v) = %v, want %v", tc.pattern, tc.v, got, tc.want)
		}
	}
}
