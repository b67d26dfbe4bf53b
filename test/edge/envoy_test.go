package edge

import (
	"slices"
	"sort"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	ratelimitfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// validator is what protoc-gen-validate generates on every Envoy message.
type validator interface{ ValidateAll() error }

func TestBootstrapValidates(t *testing.T) {
	e := loadEdge(t)
	if err := e.bootstrap.ValidateAll(); err != nil {
		t.Fatalf("Bootstrap.ValidateAll: %v", err)
	}
}

// TestTypedConfigsResolve unpacks every Any in the bootstrap, at any depth
// (the HCM inside the listener, the HTTP filters and per-route configs
// inside the HCM, the cluster's protocol options, the access log), and
// validates what it holds: ValidateAll does not look inside an Any.
func TestTypedConfigsResolve(t *testing.T) {
	e := loadEdge(t)
	seen := map[string]int{}
	resolveAnys(t, e.bootstrap.ProtoReflect(), "bootstrap", seen)
	for _, want := range []string{
		"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
		"envoy.extensions.filters.http.ratelimit.v3.RateLimit",
		"envoy.extensions.filters.http.ratelimit.v3.RateLimitPerRoute",
		"envoy.extensions.filters.http.router.v3.Router",
		"envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
		"envoy.config.route.v3.FilterConfig",
		"envoy.extensions.access_loggers.stream.v3.StdoutAccessLog",
	} {
		if seen[want] == 0 {
			t.Errorf("no typed_config of type %s", want)
		}
	}
	if t.Failed() {
		var got []string
		for k := range seen {
			got = append(got, k)
		}
		sort.Strings(got)
		t.Logf("typed configs found: %v", got)
	}
}

func resolveAnys(t *testing.T, m protoreflect.Message, path string, seen map[string]int) {
	t.Helper()
	if a, ok := m.Interface().(*anypb.Any); ok {
		inner, err := a.UnmarshalNew()
		if err != nil {
			t.Errorf("%s: %s: %v", path, a.GetTypeUrl(), err)
			return
		}
		name := string(inner.ProtoReflect().Descriptor().FullName())
		seen[name]++
		if v, ok := inner.(validator); ok {
			if err := v.ValidateAll(); err != nil {
				t.Errorf("%s (%s): %v", path, name, err)
			}
		}
		resolveAnys(t, inner.ProtoReflect(), path+"("+name+")", seen)
		return
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		p := path + "." + string(fd.Name())
		switch {
		case fd.IsList() && fd.Message() != nil:
			for i := 0; i < v.List().Len(); i++ {
				resolveAnys(t, v.List().Get(i).Message(), p, seen)
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				resolveAnys(t, mv.Message(), p+"["+k.String()+"]", seen)
				return true
			})
		case !fd.IsList() && !fd.IsMap() && fd.Message() != nil:
			resolveAnys(t, v.Message(), p, seen)
		}
		return true
	})
}

// validateWithTypes validates bootstrap b, and every typed_config in it at
// any depth (resolveAnys), and wants a typed_config of each of types.
func validateWithTypes(t *testing.T, b *bootstrapv3.Bootstrap, types ...string) {
	t.Helper()
	if err := b.ValidateAll(); err != nil {
		t.Fatalf("Bootstrap.ValidateAll: %v", err)
	}
	seen := map[string]int{}
	resolveAnys(t, b.ProtoReflect(), "bootstrap", seen)
	for _, want := range types {
		if seen[want] == 0 {
			t.Errorf("no typed_config of type %s", want)
		}
	}
}

// checkRLSPort wants b's envoy-rls cluster on envoy-rls's default gRPC
// port.
func checkRLSPort(t *testing.T, b *bootstrapv3.Bootstrap) {
	t.Helper()
	for _, c := range b.GetStaticResources().GetClusters() {
		if c.GetName() != rlsCluster {
			continue
		}
		addr := c.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
		if want := defaultPort(t, flagDefaults(t), "grpc-addr"); addr.GetPortValue() != want {
			t.Errorf("cluster %s port %d, envoy-rls's -grpc-addr default port %d", rlsCluster, addr.GetPortValue(), want)
		}
		return
	}
	t.Errorf("no cluster %s", rlsCluster)
}

func TestFilterChain(t *testing.T) {
	e := loadEdge(t)
	var names []string
	for _, hf := range e.hcm.GetHttpFilters() {
		names = append(names, hf.GetName())
	}
	// header_to_metadata carries the app's x-login-failed response header
	// to the login charge (TestLoginChargeReadsTheResponse).
	if want := []string{"envoy.filters.http.header_to_metadata", rateLimitFilter, routerFilter}; !slices.Equal(names, want) {
		t.Errorf("HTTP filters %v, want %v (the router last)", names, want)
	}
	if !e.hcm.GetUseRemoteAddress().GetValue() {
		t.Error("use_remote_address is off: remote_address would come from a header the client controls")
	}
}

// TestRateLimitFilter checks the filter's settings against config/limits.yaml
// and envoy-rls's defaults.
func TestRateLimitFilter(t *testing.T) {
	e := loadEdge(t)
	_, domain := loadLimits(t)
	f := e.filter

	if f.GetDomain() != domain.Name {
		t.Errorf("filter domain %q, %s domain %q", f.GetDomain(), limitsYAMLPath, domain.Name)
	}
	if f.GetEnableXRatelimitHeaders() != ratelimitfilterv3.RateLimit_DRAFT_VERSION_03 {
		t.Errorf("enable_x_ratelimit_headers %v, want DRAFT_VERSION_03", f.GetEnableXRatelimitHeaders())
	}
	// failure_mode_deny must be written out, whichever way: false and
	// absent are the same to protobuf, not to the reader.
	if !hasRateLimitKey(e.raw, "failure_mode_deny") {
		t.Error("failure_mode_deny is not set explicitly in the rate limit filter")
	}

	svc := f.GetRateLimitService()
	if svc.GetTransportApiVersion() != corev3.ApiVersion_V3 {
		t.Errorf("rate_limit_service transport_api_version %v, want V3", svc.GetTransportApiVersion())
	}
	if got := svc.GetGrpcService().GetEnvoyGrpc().GetClusterName(); got != rlsCluster {
		t.Errorf("rate_limit_service cluster %q, want %q", got, rlsCluster)
	}

	// The timeout must outlast envoy-rls's slowest answer: the longest
	// leaky bucket wait in the limits plus a store call. A shorter one
	// turns every queued request into a timeout, which failure_mode_deny
	// then decides.
	defaults := flagDefaults(t)
	storeTimeout, err := time.ParseDuration(defaults["store-timeout"])
	if err != nil {
		t.Fatalf("-store-timeout default %q: %v", defaults["store-timeout"], err)
	}
	var worst time.Duration
	var worstName string
	walkRules(domain, func(path string, r ruleInfo) {
		if w := r.limit.MaxWait(); w > worst {
			worst, worstName = w, r.name
		}
	})
	timeout := f.GetTimeout().AsDuration()
	if timeout < worst+storeTimeout {
		t.Errorf("filter timeout %v < %v (leaky bucket %s's worst wait) + %v (-store-timeout)", timeout, worst, worstName, storeTimeout)
	}
	if worst == 0 {
		t.Log("no leaky bucket in the limits: any timeout above -store-timeout fits")
	}
	maxDelay, err := time.ParseDuration(defaults["max-delay"])
	if err != nil {
		t.Fatalf("-max-delay default %q: %v", defaults["max-delay"], err)
	}
	if worst > maxDelay {
		t.Errorf("leaky bucket %s waits up to %v, above -max-delay %v: envoy-rls refuses the file", worstName, worst, maxDelay)
	}

	// Every rate_limits entry must be in the filter's stage, or the filter
	// never sends it.
	stage := f.GetStage()
	for i, rl := range e.vhost.GetRateLimits() {
		if rl.GetStage().GetValue() != stage {
			t.Errorf("virtual host rate_limits[%d]: stage %d, filter stage %d", i, rl.GetStage().GetValue(), stage)
		}
	}
	for _, r := range e.vhost.GetRoutes() {
		for i, rl := range r.GetRoute().GetRateLimits() {
			if rl.GetStage().GetValue() != stage {
				t.Errorf("route %s rate_limits[%d]: stage %d, filter stage %d", routeName(r), i, rl.GetStage().GetValue(), stage)
			}
		}
	}
}

// hasRateLimitKey reports whether the rate limit filter's typed_config in
// the raw YAML sets key.
func hasRateLimitKey(raw any, key string) bool {
	found := false
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if v["name"] == rateLimitFilter {
				if tc, ok := v["typed_config"].(map[string]any); ok {
					if _, ok := tc[key]; ok {
						found = true
					}
				}
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(raw)
	return found
}

// TestClusters checks the rate limit cluster speaks HTTP/2 to envoy-rls's
// default gRPC port, and that every route's cluster exists.
func TestClusters(t *testing.T) {
	e := loadEdge(t)
	defaults := flagDefaults(t)

	rls := e.clusters[rlsCluster]
	if rls == nil {
		t.Fatalf("no cluster %q", rlsCluster)
	}
	addr := e.endpoint(t, rlsCluster)
	if want := defaultPort(t, defaults, "grpc-addr"); addr.GetPortValue() != want {
		t.Errorf("cluster %s port %d, envoy-rls's -grpc-addr default port %d", rlsCluster, addr.GetPortValue(), want)
	}
	if addr.GetAddress() != rlsCluster {
		t.Errorf("cluster %s address %q, want the compose service %q", rlsCluster, addr.GetAddress(), rlsCluster)
	}
	opts := rls.GetTypedExtensionProtocolOptions()["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]
	if opts == nil {
		t.Fatalf("cluster %s: no envoy.extensions.upstreams.http.v3.HttpProtocolOptions (gRPC needs HTTP/2)", rlsCluster)
	}
	hpo := &httpv3.HttpProtocolOptions{}
	if err := opts.UnmarshalTo(hpo); err != nil {
		t.Fatal(err)
	}
	if hpo.GetExplicitHttpConfig().GetHttp2ProtocolOptions() == nil {
		t.Errorf("cluster %s: not explicit HTTP/2: %v", rlsCluster, hpo)
	}
	if rls.GetType() != clusterv3.Cluster_STRICT_DNS {
		t.Errorf("cluster %s: type %v, want STRICT_DNS (a compose service name)", rlsCluster, rls.GetType())
	}

	app := e.endpoint(t, appCluster)
	if app.GetAddress() != appCluster {
		t.Errorf("cluster %s address %q, want the compose service %q", appCluster, app.GetAddress(), appCluster)
	}
	for _, r := range e.vhost.GetRoutes() {
		if c := r.GetRoute().GetCluster(); e.clusters[c] == nil {
			t.Errorf("route %s: cluster %q is not defined", routeName(r), c)
		}
	}
}

// ruleInfo is one limit of the limits file.
type ruleInfo struct {
	name  string
	limit limits.Limit
}

// walkRules calls f for every counted limit in d, with its descriptor path.
func walkRules(d *config.Domain, f func(path string, r ruleInfo)) {
	var walk func(ds []*config.Descriptor, parent string)
	walk = func(ds []*config.Descriptor, parent string) {
		for _, x := range ds {
			p := x.Key
			if x.Value != "" {
				p += "=" + x.Value
			}
			if parent != "" {
				p = parent + ", " + p
			}
			for _, r := range x.Rules {
				if !r.Unlimited {
					f(p, ruleInfo{name: r.Name, limit: r.Limit})
				}
			}
			walk(x.Descriptors, p)
		}
	}
	walk(d.Descriptors, "")
}
