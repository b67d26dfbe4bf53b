package edge

import (
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rate_limit_quota/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	// The types of the matcher inputs in the bucket matchers.
	_ "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
)

const (
	envoyRLQSYAMLPath = "config/envoy-rlqs.yaml"
	quotaFilter       = "envoy.filters.http.rate_limit_quota"
)

// loadRLQS parses config/envoy-rlqs.yaml into a Bootstrap strictly, as
// loadEdge does config/envoy.yaml, and returns its quota filter's config.
func loadRLQS(t *testing.T) (*bootstrapv3.Bootstrap, *rlqsv3.RateLimitQuotaFilterConfig) {
	t.Helper()
	b := parseBootstrap(t, envoyRLQSYAMLPath)
	var q *rlqsv3.RateLimitQuotaFilterConfig
	for _, l := range b.GetStaticResources().GetListeners() {
		for _, fc := range l.GetFilterChains() {
			for _, f := range fc.GetFilters() {
				hcm := &hcmv3.HttpConnectionManager{}
				if f.GetTypedConfig().UnmarshalTo(hcm) != nil {
					continue
				}
				for _, hf := range hcm.GetHttpFilters() {
					if hf.GetName() != quotaFilter {
						continue
					}
					q = &rlqsv3.RateLimitQuotaFilterConfig{}
					if err := hf.GetTypedConfig().UnmarshalTo(q); err != nil {
						t.Fatalf("%s: %v", quotaFilter, err)
					}
				}
			}
		}
	}
	if q == nil {
		t.Fatalf("%s: no %s", envoyRLQSYAMLPath, quotaFilter)
	}
	return b, q
}

// TestRLQSBootstrapValidates: the bootstrap and every typed_config in it,
// at any depth (the bucket settings and matcher inputs inside the filter),
// pass Envoy's own constraints.
func TestRLQSBootstrapValidates(t *testing.T) {
	b, _ := loadRLQS(t)
	validateWithTypes(t, b,
		"envoy.extensions.filters.http.rate_limit_quota.v3.RateLimitQuotaFilterConfig",
		"envoy.extensions.filters.http.rate_limit_quota.v3.RateLimitQuotaBucketSettings",
		"envoy.type.matcher.v3.HttpRequestHeaderMatchInput",
	)
}

// TestRLQSFilterPointsAtEnvoyRLS: the filter reports to the envoy-rls
// cluster, on envoy-rls's gRPC port, in the limits' domain, and every
// bucket says what Envoy does before an assignment and when it denies.
func TestRLQSFilterPointsAtEnvoyRLS(t *testing.T) {
	b, q := loadRLQS(t)
	_, d := loadLimits(t)
	if q.GetDomain() != d.Name {
		t.Errorf("filter domain %q, limits domain %q", q.GetDomain(), d.Name)
	}
	if c := q.GetRlqsServer().GetEnvoyGrpc().GetClusterName(); c != rlsCluster {
		t.Errorf("rlqs_server cluster %q, want %q", c, rlsCluster)
	}
	checkRLSPort(t, b)
	expired := 0
	for i, m := range q.GetBucketMatchers().GetMatcherList().GetMatchers() {
		s := &rlqsv3.RateLimitQuotaBucketSettings{}
		if err := m.GetOnMatch().GetAction().GetTypedConfig().UnmarshalTo(s); err != nil {
			t.Fatalf("matchers[%d]: %v", i, err)
		}
		if s.GetNoAssignmentBehavior().GetFallbackRateLimit().GetBlanketRule() != typev3.RateLimitStrategy_ALLOW_ALL {
			t.Errorf("matchers[%d]: no_assignment_behavior %v, want ALLOW_ALL", i, s.GetNoAssignmentBehavior())
		}
		if s.GetDenyResponseSettings().GetHttpStatus().GetCode() != typev3.StatusCode_TooManyRequests {
			t.Errorf("matchers[%d]: deny_response_settings %v, want 429", i, s.GetDenyResponseSettings())
		}
		if s.GetExpiredAssignmentBehavior() != nil {
			expired++
		}
	}
	if expired == 0 {
		t.Error("no bucket has an expired_assignment_behavior")
	}
}

// TestRLQSBucketsMatchLimits: every bucket id the matchers build (from a
// header, from a literal path) matches a limit of config/limits.yaml, as
// `envoy-rls lint` judges it. The per-IP limits stay unreachable (RLQS
// bucket ids in this example hold no client address), and so do the
// plan the limits do not name (config/envoy-rlqs.yaml says why) and the
// in-flight limit, which RLQS does not enforce (docs/rlqs.md).
func TestRLQSBucketsMatchLimits(t *testing.T) {
	b, _ := loadRLQS(t)
	c, _ := loadLimits(t)
	unreachable := lintUnreachable(t, b, c)
	want := "edge.remote_address edge.masked_remote_address edge.plan.api_key edge.path_/login.remote_address edge.login_failed.remote_address edge.path_/api/reports.api_key"
	if got := strings.Join(unreachable, " "); got != want {
		t.Errorf("unreachable limits %q, want %q (the per-IP ones, other-plan-*, the in-flight one, which RLQS does not enforce, and config/envoy-login.yaml's lockout)", got, want)
	}
}
