package guides

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	ratelimitconfv3 "github.com/envoyproxy/go-control-plane/envoy/config/ratelimit/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	ratelimitfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	contourv1 "github.com/projectcontour/contour/apis/projectcontour/v1"
	contourv1alpha1 "github.com/projectcontour/contour/apis/projectcontour/v1alpha1"
	contourconfig "github.com/projectcontour/contour/pkg/config"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
)

const (
	contourExtFile    = "contour-extensionservice.yaml"
	contourConfigFile = "contour-config.yaml"
	contourProxyFile  = "contour-httpproxy.yaml"
	contourLimitsFile = "contour-limits.yaml"
)

func loadExtensionService(t *testing.T) *contourv1alpha1.ExtensionService {
	t.Helper()
	var es contourv1alpha1.ExtensionService
	decodeStrict(t, contourExtFile, guide(t, contourExtFile), &es)
	if es.APIVersion != "projectcontour.io/v1alpha1" || es.Kind != "ExtensionService" {
		t.Fatalf("%s: %s %s, want projectcontour.io/v1alpha1 ExtensionService", contourExtFile, es.APIVersion, es.Kind)
	}
	return &es
}

// loadContourConfig parses Contour's configuration file as Contour does
// (its own parser, which refuses unknown fields) and validates it.
func loadContourConfig(t *testing.T) *contourconfig.Parameters {
	t.Helper()
	_, data := configMap(t, contourConfigFile, "contour.yaml")
	p, err := contourconfig.Parse(strings.NewReader(data))
	if err != nil {
		t.Fatalf("%s: contour.yaml: %v", contourConfigFile, err)
	}
	if err := p.Validate(); err != nil {
		t.Fatalf("%s: contour.yaml: %v", contourConfigFile, err)
	}
	return p
}

// TestContourExtensionService: the extension reaches envoy-rls's Service on
// its gRPC port over HTTP/2 with the v3 API, waits longer than envoy-rls's
// store does, and is the one Contour's configuration names.
func TestContourExtensionService(t *testing.T) {
	es := loadExtensionService(t)
	p := loadContourConfig(t)

	if es.Namespace != rlsNamespace {
		t.Errorf("%s: namespace %q, want %q: an ExtensionService names Services of its own namespace", contourExtFile, es.Namespace, rlsNamespace)
	}
	if want := uint32(grpcPort(t)); len(es.Spec.Services) != 1 || es.Spec.Services[0].Name != rlsService || uint32(es.Spec.Services[0].Port) != want {
		t.Errorf("%s: services %+v, want only %s:%d (-grpc-addr's port)", contourExtFile, es.Spec.Services, rlsService, want)
	}
	if pr := es.Spec.Protocol; pr == nil || (*pr != "h2c" && *pr != "h2") {
		t.Errorf("%s: protocol %v, want h2c (or h2 with TLS): gRPC needs HTTP/2", contourExtFile, pr)
	}
	if v := es.Spec.ProtocolVersion; v != "" && v != contourv1alpha1.SupportProtocolVersion3 {
		t.Errorf("%s: protocolVersion %q: envoy-rls serves v3", contourExtFile, v)
	}
	if es.Spec.TimeoutPolicy == nil {
		t.Fatalf("%s: no timeoutPolicy: Envoy's default of 20ms is below envoy-rls's -store-timeout", contourExtFile)
	}
	d, err := time.ParseDuration(es.Spec.TimeoutPolicy.Response)
	if st := storeTimeout(t); err != nil || d <= st {
		t.Errorf("%s: timeoutPolicy.response %q, want a duration above envoy-rls's -store-timeout %v", contourExtFile, es.Spec.TimeoutPolicy.Response, st)
	}
	if want := es.Namespace + "/" + es.Name; p.RateLimitService.ExtensionService != want {
		t.Errorf("%s: rateLimitService.extensionService %q, want %q (%s)", contourConfigFile, p.RateLimitService.ExtensionService, want, contourExtFile)
	}
}

// contourActions are the route actions Contour builds from an HTTPProxy's
// global descriptors: one rate_limits entry per descriptor, one action per
// entry (genericKey: generic_key; requestHeader: request_headers;
// requestHeaderValueMatch: header_value_match; remoteAddress:
// remote_address).
func contourActions(t *testing.T, where string, p *contourv1.RateLimitPolicy) []*routev3.RateLimit {
	t.Helper()
	if p == nil || p.Global == nil {
		return nil
	}
	var out []*routev3.RateLimit
	for i, d := range p.Global.Descriptors {
		rl := &routev3.RateLimit{}
		for j, e := range d.Entries {
			a := &routev3.RateLimit_Action{}
			switch {
			case e.GenericKey != nil:
				a.ActionSpecifier = &routev3.RateLimit_Action_GenericKey_{GenericKey: &routev3.RateLimit_Action_GenericKey{
					DescriptorKey: e.GenericKey.Key, DescriptorValue: e.GenericKey.Value}}
			case e.RequestHeader != nil:
				a.ActionSpecifier = &routev3.RateLimit_Action_RequestHeaders_{RequestHeaders: &routev3.RateLimit_Action_RequestHeaders{
					HeaderName: e.RequestHeader.HeaderName, DescriptorKey: e.RequestHeader.DescriptorKey}}
			case e.RemoteAddress != nil:
				a.ActionSpecifier = &routev3.RateLimit_Action_RemoteAddress_{RemoteAddress: &routev3.RateLimit_Action_RemoteAddress{}}
			default:
				t.Fatalf("%s: %s descriptors[%d].entries[%d]: an entry kind this test does not translate", contourProxyFile, where, i, j)
			}
			rl.Actions = append(rl.Actions, a)
		}
		if err := rl.ValidateAll(); err != nil {
			t.Errorf("%s: %s descriptors[%d]: %v", contourProxyFile, where, i, err)
		}
		out = append(out, rl)
	}
	return out
}

// contourVirtualHost is the Envoy virtual host Contour builds from the
// HTTPProxy, as far as rate limiting goes: the virtual host's descriptors,
// each route's prefix and its own descriptors, and a route whose global
// policy is disabled ignoring the virtual host's.
func contourVirtualHost(t *testing.T, hp *contourv1.HTTPProxy) *routev3.VirtualHost {
	t.Helper()
	vh := &routev3.VirtualHost{
		Name:       hp.Spec.VirtualHost.Fqdn,
		Domains:    []string{hp.Spec.VirtualHost.Fqdn},
		RateLimits: contourActions(t, "virtualhost", hp.Spec.VirtualHost.RateLimitPolicy),
	}
	for i, r := range hp.Spec.Routes {
		if len(r.Conditions) != 1 || r.Conditions[0].Prefix == "" || len(r.Services) == 0 {
			t.Fatalf("%s: routes[%d]: this test reads one prefix condition and a service", contourProxyFile, i)
		}
		route := &routev3.Route{
			Name:  strings.TrimPrefix(r.Conditions[0].Prefix, "/"),
			Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: r.Conditions[0].Prefix}},
			Action: &routev3.Route_Route{Route: &routev3.RouteAction{
				ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: r.Services[0].Name},
				RateLimits:       contourActions(t, "routes["+strconv.Itoa(i)+"]", r.RateLimitPolicy),
			}},
		}
		if r.RateLimitPolicy != nil && r.RateLimitPolicy.Global != nil && r.RateLimitPolicy.Global.Disabled {
			route.TypedPerFilterConfig = map[string]*anypb.Any{"envoy.filters.http.ratelimit": mustAny(t, &ratelimitfilterv3.RateLimitPerRoute{
				VhRateLimits: ratelimitfilterv3.RateLimitPerRoute_IGNORE})}
		}
		vh.Routes = append(vh.Routes, route)
	}
	return vh
}

// TestContourDescriptors: every descriptor the HTTPProxy's policies make
// Envoy send meets a limit of contour-limits.yaml, and every limit there is
// met by one (envoy-rls lint, over the Envoy Contour builds), with the
// filter Contour's configuration gives.
func TestContourDescriptors(t *testing.T) {
	var hp contourv1.HTTPProxy
	decodeStrict(t, contourProxyFile, guide(t, contourProxyFile), &hp)
	if hp.APIVersion != "projectcontour.io/v1" || hp.Kind != "HTTPProxy" || hp.Spec.VirtualHost == nil {
		t.Fatalf("%s: %s %s, want a projectcontour.io/v1 HTTPProxy with a virtualhost", contourProxyFile, hp.APIVersion, hp.Kind)
	}
	p := loadContourConfig(t)
	es := loadExtensionService(t)
	c, domain := limits(t, contourLimitsFile)
	if p.RateLimitService.Domain != domain {
		t.Errorf("%s: rateLimitService.domain %q, %s's is %q", contourConfigFile, p.RateLimitService.Domain, contourLimitsFile, domain)
	}
	timeout, err := time.ParseDuration(es.Spec.TimeoutPolicy.Response)
	if err != nil {
		t.Fatalf("%s: %v", contourExtFile, err)
	}
	// Contour's cluster for the extension is "extension/NAMESPACE/NAME".
	rlsCluster := "extension/" + es.Namespace + "/" + es.Name
	filter := &ratelimitfilterv3.RateLimit{
		Domain:          p.RateLimitService.Domain,
		FailureModeDeny: !p.RateLimitService.FailOpen,
		Timeout:         durationpb.New(timeout),
		RateLimitService: &ratelimitconfv3.RateLimitServiceConfig{
			TransportApiVersion: corev3.ApiVersion_V3,
			GrpcService: &corev3.GrpcService{TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{
				EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: rlsCluster}}},
		},
	}
	vh := contourVirtualHost(t, &hp)
	clusters := []*clusterv3.Cluster{upstream(rlsCluster)}
	var names []string
	for _, r := range vh.GetRoutes() {
		if n := r.GetRoute().GetCluster(); !slices.Contains(names, n) {
			names = append(names, n)
			clusters = append(clusters, upstream(n))
		}
	}
	checkDescriptors(t, gatewayEnvoy(t, filter, vh, clusters...), c, contourLimitsFile)
}
