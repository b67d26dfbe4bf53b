package edge

import (
	"regexp"
	"strings"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	headertometadatav3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/header_to_metadata/v3"
	ratelimitfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/envoy-rls/envoy-rls/internal/lint"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

const (
	envoyLLMYAMLPath  = "config/envoy-llm.yaml"
	limitsLLMYAMLPath = "config/limits-llm.yaml"
	// llmRoute is the route of config/envoy-llm.yaml that reserves and
	// settles.
	llmRoute = "call"
)

// llm is config/envoy-llm.yaml, parsed, with the parts the tests look at.
type llm struct {
	bootstrap *bootstrapv3.Bootstrap
	hcm       *hcmv3.HttpConnectionManager
	route     *routev3.Route
	per       *ratelimitfilterv3.RateLimitPerRoute
	// filters are the HTTP filters' names in order; h2m is the
	// header_to_metadata filter's config.
	filters []string
	h2m     *headertometadatav3.Config
}

// loadLLM parses config/envoy-llm.yaml into a Bootstrap, strictly.
func loadLLM(t *testing.T) *llm {
	t.Helper()
	l := &llm{bootstrap: parseBootstrap(t, envoyLLMYAMLPath), hcm: &hcmv3.HttpConnectionManager{}}
	if err := l.bootstrap.GetStaticResources().GetListeners()[0].GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(l.hcm); err != nil {
		t.Fatal(err)
	}
	for _, r := range l.hcm.GetRouteConfig().GetVirtualHosts()[0].GetRoutes() {
		if r.GetName() == llmRoute {
			l.route = r
		}
	}
	if l.route == nil {
		t.Fatalf("%s: no route %q", envoyLLMYAMLPath, llmRoute)
	}
	l.per = &ratelimitfilterv3.RateLimitPerRoute{}
	if err := l.route.GetTypedPerFilterConfig()[rateLimitFilter].UnmarshalTo(l.per); err != nil {
		t.Fatalf("route %q's %s: %v", llmRoute, rateLimitFilter, err)
	}
	for _, f := range l.hcm.GetHttpFilters() {
		l.filters = append(l.filters, f.GetName())
		if f.GetName() == "envoy.filters.http.header_to_metadata" {
			l.h2m = &headertometadatav3.Config{}
			if err := f.GetTypedConfig().UnmarshalTo(l.h2m); err != nil {
				t.Fatal(err)
			}
		}
	}
	return l
}

// loadLLMLimits loads config/limits-llm.yaml as envoy-rls does, and
// returns its one domain.
func loadLLMLimits(t *testing.T) (*config.Config, *config.Domain) {
	t.Helper()
	c, err := config.Load(repoFile(t, limitsLLMYAMLPath))
	if err != nil {
		t.Fatal(err)
	}
	d := c.Domains["llm"]
	if len(c.Domains) != 1 || d == nil {
		t.Fatalf("%s: domains %v, want llm alone", limitsLLMYAMLPath, c.Domains)
	}
	return c, d
}

// TestLLMBootstrapValidates: config/envoy-llm.yaml and every typed_config
// in it pass Envoy's own constraints, and it calls envoy-rls on its gRPC
// port in the limits' domain.
func TestLLMBootstrapValidates(t *testing.T) {
	l := loadLLM(t)
	validateWithTypes(t, l.bootstrap,
		"envoy.extensions.filters.http.ratelimit.v3.RateLimit",
		"envoy.extensions.filters.http.ratelimit.v3.RateLimitPerRoute",
		"envoy.extensions.filters.http.header_to_metadata.v3.Config",
	)
	_, d := loadLLMLimits(t)
	for _, f := range l.hcm.GetHttpFilters() {
		if f.GetName() != rateLimitFilter {
			continue
		}
		rl := &ratelimitfilterv3.RateLimit{}
		if err := f.GetTypedConfig().UnmarshalTo(rl); err != nil {
			t.Fatal(err)
		}
		if rl.GetDomain() != d.Name {
			t.Errorf("filter domain %q, limits domain %q", rl.GetDomain(), d.Name)
		}
		if c := rl.GetRateLimitService().GetGrpcService().GetEnvoyGrpc().GetClusterName(); c != rlsCluster {
			t.Errorf("rate_limit_service cluster %q, want %q", c, rlsCluster)
		}
	}
	checkRLSPort(t, l.bootstrap)
}

// TestLLMLintsClean: `envoy-rls lint` finds nothing in the recipe against
// its limits, which it serves whole: every descriptor meets a limit, every
// limit is reached, every reservation is settled on stream done.
func TestLLMLintsClean(t *testing.T) {
	findings, err := lint.Lint(repoFile(t, envoyLLMYAMLPath), repoFile(t, limitsLLMYAMLPath), config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range findings {
		t.Errorf("lint: %s", f)
	}
}

// TestLLMReservesAndSettles: the call route sends each descriptor twice,
// as a reserve on the request path (the id from x-request-id, no settle
// entry) and as a settle on stream done (the same actions and the settle
// entry), with the entry keys the limits' holds name; a reserve's
// hits_addend is a request header the route's match requires to be a
// number Envoy sends, and a settle's is one the header_to_metadata filter
// writes, ahead of the rate limit filter, on every answer.
func TestLLMReservesAndSettles(t *testing.T) {
	l := loadLLM(t)
	_, d := loadLLMLimits(t)
	h := d.Holds
	if h == nil || h.ID != "request_id" || h.Settle != "settle" || h.Lease != 10*time.Minute {
		t.Fatalf("%s: holds %+v, want {request_id settle 10m}", limitsLLMYAMLPath, h)
	}
	rl := l.per.GetRateLimits()
	if len(rl) != 6 {
		t.Fatalf("route %q: %d rate_limits, want a reserve and a settle for each of 3 limits", llmRoute, len(rl))
	}
	for i := 0; i < len(rl); i += 2 {
		reserve, settle := rl[i], rl[i+1]
		rs, ss := llmShape(reserve, h), llmShape(settle, h)
		if reserve.GetApplyOnStreamDone() || !strings.Contains(rs, " id") || strings.Contains(rs, " settle") {
			t.Errorf("rate_limits[%d] %q: want a reserve, with the id from x-request-id, on the request path", i, rs)
		}
		if !settle.GetApplyOnStreamDone() || ss != rs+" settle" {
			t.Errorf("rate_limits[%d] %q: want the reserve's actions %q and the settle entry, on stream done", i+1, ss, rs)
		}
		checkReserveBound(t, l, i, reserve)
		checkSettleCost(t, l, i+1, settle)
	}
	if got := l.route.GetRoute().GetTimeout().AsDuration(); got <= 0 || got >= h.Lease {
		t.Errorf("route %q timeout %v: want one shorter than the holds' lease %v, so that a settle comes before its hold lapses", llmRoute, got, h.Lease)
	}
	// The id is Envoy's: a client's own x-request-id is replaced at the
	// edge, so no client can reuse one id for several calls.
	if !l.hcm.GetUseRemoteAddress().GetValue() || l.hcm.GetPreserveExternalRequestId() ||
		(l.hcm.GetGenerateRequestId() != nil && !l.hcm.GetGenerateRequestId().GetValue()) {
		t.Errorf("connection manager: use_remote_address %v, preserve_external_request_id %v, generate_request_id %v: want Envoy's own x-request-id on every external call",
			l.hcm.GetUseRemoteAddress(), l.hcm.GetPreserveExternalRequestId(), l.hcm.GetGenerateRequestId())
	}
}

// llmShape renders a rate_limits entry's actions, the id and settle
// entries as "id" and "settle" (the id only from x-request-id).
func llmShape(r *routev3.RateLimit, h *config.Holds) string {
	var parts []string
	for _, a := range r.GetActions() {
		g, rh := a.GetGenericKey(), a.GetRequestHeaders()
		switch {
		case g != nil && g.GetDescriptorKey() == h.Settle:
			parts = append(parts, "settle")
		case g != nil:
			parts = append(parts, g.GetDescriptorKey()+"="+g.GetDescriptorValue())
		case rh != nil && rh.GetDescriptorKey() == h.ID && strings.EqualFold(rh.GetHeaderName(), "x-request-id"):
			parts = append(parts, "id")
		case rh != nil:
			parts = append(parts, rh.GetDescriptorKey()+"<"+rh.GetHeaderName())
		default:
			parts = append(parts, "?")
		}
	}
	return strings.Join(parts, " ")
}

var (
	reqFormat      = regexp.MustCompile(`^%REQ\(([a-z0-9-]+)\)%$`)
	metadataFormat = regexp.MustCompile(`^%DYNAMIC_METADATA\(([a-z0-9.-]+):([a-z_]+)\)%$`)
)

// checkReserveBound checks that the reserve's hits_addend is fixed, or a
// request header that the route's match requires to be a positive
// number of at most 9 digits: a bound Envoy cannot format would drop the
// reserve, and the call would pass unbudgeted.
func checkReserveBound(t *testing.T, l *llm, i int, r *routev3.RateLimit) {
	t.Helper()
	ha := r.GetHitsAddend()
	if ha.GetFormat() == "" {
		if ha.GetNumber().GetValue() == 0 {
			t.Errorf("rate_limits[%d]: hits_addend %v, want a positive bound", i, ha)
		}
		return
	}
	m := reqFormat.FindStringSubmatch(ha.GetFormat())
	if m == nil {
		t.Errorf("rate_limits[%d]: hits_addend format %q, want %%REQ(header)%%", i, ha.GetFormat())
		return
	}
	for _, hm := range l.route.GetMatch().GetHeaders() {
		if hm.GetName() == m[1] {
			if re := hm.GetStringMatch().GetSafeRegex().GetRegex(); re != "[1-9][0-9]{0,8}" {
				t.Errorf("route %q matches %s with %q, want [1-9][0-9]{0,8}", llmRoute, m[1], re)
			}
			return
		}
	}
	t.Errorf("route %q does not require %s, the bound of rate_limits[%d]", llmRoute, m[1], i)
}

// checkSettleCost checks that the settle's hits_addend is fixed, or the
// dynamic metadata a header_to_metadata response rule, ahead of the rate
// limit filter, writes as a number whether the header is there or not.
func checkSettleCost(t *testing.T, l *llm, i int, r *routev3.RateLimit) {
	t.Helper()
	ha := r.GetHitsAddend()
	if ha.GetFormat() == "" {
		return
	}
	m := metadataFormat.FindStringSubmatch(ha.GetFormat())
	if m == nil {
		t.Errorf("rate_limits[%d]: hits_addend format %q, want %%DYNAMIC_METADATA(ns:key)%%", i, ha.GetFormat())
		return
	}
	if strings.Join(l.filters, " ") != "envoy.filters.http.header_to_metadata "+rateLimitFilter+" "+routerFilter {
		t.Errorf("HTTP filters %v: want header_to_metadata ahead of the rate limit filter", l.filters)
	}
	for _, rule := range l.h2m.GetResponseRules() {
		p, miss := rule.GetOnHeaderPresent(), rule.GetOnHeaderMissing()
		if p.GetMetadataNamespace() != m[1] || p.GetKey() != m[2] {
			continue
		}
		if p.GetType() != headertometadatav3.Config_NUMBER || miss.GetMetadataNamespace() != m[1] || miss.GetKey() != m[2] ||
			miss.GetValue() != "0" || miss.GetType() != headertometadatav3.Config_NUMBER {
			t.Errorf("%s: present %v, missing %v: want a NUMBER, and 0 when the header is missing", rule.GetHeader(), p, miss)
		}
		return
	}
	t.Errorf("rate_limits[%d]: no header_to_metadata response rule writes %s:%s", i, m[1], m[2])
}
