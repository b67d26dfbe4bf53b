package guides

import (
	"strconv"
	"time"

	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	ratelimitfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	istionet "istio.io/api/networking/v1alpha3"
	istioclient "istio.io/client-go/pkg/apis/networking/v1alpha3"
)

const (
	istioFile       = "istio-envoyfilter.yaml"
	istioLimitsFile = "istio-limits.yaml"
)

// istioPatches are the EnvoyFilter's patches, their values parsed into
// Envoy's types.
type istioPatches struct {
	filter      *ratelimitfilterv3.RateLimit
	filterPatch *istionet.EnvoyFilter_EnvoyConfigObjectPatch
	rawFilter   *structpb.Struct // the filter's typed_config as written
	cluster     *clusterv3.Cluster
	vhost       *routev3.VirtualHost // the MERGE's value: rate_limits only
}

// loadIstio decodes the EnvoyFilter: the object with istio.io/client-go's
// type (whose metadata decodes strictly), and its spec once more, strictly,
// with istio.io/api's message: the client type's own decoder takes
// unknown fields silently (its jsonpb Unmarshaler allows them), which
// would let a misspelled patch field through.
func loadIstio(t *testing.T) istioPatches {
	t.Helper()
	data := guide(t, istioFile)
	var ef istioclient.EnvoyFilter
	decodeStrict(t, istioFile, data, &ef)
	if ef.APIVersion != "networking.istio.io/v1alpha3" || ef.Kind != "EnvoyFilter" {
		t.Fatalf("%s: %s %s, want networking.istio.io/v1alpha3 EnvoyFilter", istioFile, ef.APIVersion, ef.Kind)
	}
	spec := &istionet.EnvoyFilter{}
	if err := protojson.Unmarshal(field(t, istioFile, data, "spec"), spec); err != nil {
		t.Fatalf("%s: spec: %v", istioFile, err)
	}
	var p istioPatches
	for i, cp := range spec.GetConfigPatches() {
		if cp.GetMatch().GetContext() != istionet.EnvoyFilter_GATEWAY {
			t.Errorf("%s: configPatches[%d] matches context %v, want GATEWAY (the ingress gateway)", istioFile, i, cp.GetMatch().GetContext())
		}
		switch cp.GetApplyTo() {
		case istionet.EnvoyFilter_HTTP_FILTER:
			var hf hcmv3.HttpFilter
			patchValue(t, i, cp, &hf)
			p.filter, p.filterPatch = &ratelimitfilterv3.RateLimit{}, cp
			if err := hf.GetTypedConfig().UnmarshalTo(p.filter); err != nil {
				t.Fatalf("%s: configPatches[%d]: typed_config: %v", istioFile, i, err)
			}
			if hf.GetName() != "envoy.filters.http.ratelimit" {
				t.Errorf("%s: configPatches[%d] adds filter %q, want envoy.filters.http.ratelimit", istioFile, i, hf.GetName())
			}
			p.rawFilter = cp.GetPatch().GetValue().GetFields()["typed_config"].GetStructValue()
		case istionet.EnvoyFilter_CLUSTER:
			p.cluster = &clusterv3.Cluster{}
			patchValue(t, i, cp, p.cluster)
		case istionet.EnvoyFilter_VIRTUAL_HOST:
			p.vhost = &routev3.VirtualHost{}
			patchValue(t, i, cp, p.vhost)
		default:
			t.Errorf("%s: configPatches[%d] applies to %v, which the guide does not describe", istioFile, i, cp.GetApplyTo())
		}
	}
	if p.filter == nil || p.cluster == nil || p.vhost == nil {
		t.Fatalf("%s: want an HTTP_FILTER, a CLUSTER and a VIRTUAL_HOST patch", istioFile)
	}
	return p
}

// patchValue parses a patch's value into Envoy's type, strictly (an unknown
// field or an unregistered "@type" fails, as Envoy refuses them), and
// validates it as Envoy does.
func patchValue(t *testing.T, i int, cp *istionet.EnvoyFilter_EnvoyConfigObjectPatch, out proto.Message) {
	t.Helper()
	js, err := protojson.Marshal(cp.GetPatch().GetValue())
	if err != nil {
		t.Fatal(err)
	}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: false}).Unmarshal(js, out); err != nil {
		t.Fatalf("%s: configPatches[%d] (%v) into %T: %v", istioFile, i, cp.GetApplyTo(), out, err)
	}
	if _, partial := out.(*routev3.VirtualHost); partial {
		return // a MERGE's part of a virtual host: its rate_limits are validated on their own
	}
	if v, ok := out.(interface{ ValidateAll() error }); ok {
		if err := v.ValidateAll(); err != nil {
			t.Errorf("%s: configPatches[%d] (%v): %v", istioFile, i, cp.GetApplyTo(), err)
		}
	}
}

// TestIstioFilter: the filter goes before the router, calls the patch's
// cluster with the v3 API, names the limits' domain, fails open as written
// out, and waits longer than envoy-rls's store does.
func TestIstioFilter(t *testing.T) {
	p := loadIstio(t)
	_, domain := limits(t, istioLimitsFile)
	f := p.filter

	m := p.filterPatch.GetMatch().GetListener().GetFilterChain().GetFilter()
	if op := p.filterPatch.GetPatch().GetOperation(); op != istionet.EnvoyFilter_Patch_INSERT_BEFORE ||
		m.GetName() != "envoy.filters.network.http_connection_manager" || m.GetSubFilter().GetName() != "envoy.filters.http.router" {
		t.Errorf("%s: the filter is %v %q in %q, want INSERT_BEFORE envoy.filters.http.router in the HTTP connection manager", istioFile, op, m.GetSubFilter().GetName(), m.GetName())
	}
	if f.GetDomain() != domain {
		t.Errorf("%s: domain %q, %s's is %q", istioFile, f.GetDomain(), istioLimitsFile, domain)
	}
	if _, ok := p.rawFilter.GetFields()["failure_mode_deny"]; !ok {
		t.Errorf("%s: failure_mode_deny is not written out (false and absent are one to protobuf, not to the reader)", istioFile)
	}
	svc := f.GetRateLimitService()
	if svc.GetTransportApiVersion().String() != "V3" {
		t.Errorf("%s: transport_api_version %v, want V3", istioFile, svc.GetTransportApiVersion())
	}
	if got := svc.GetGrpcService().GetEnvoyGrpc().GetClusterName(); got != p.cluster.GetName() {
		t.Errorf("%s: the filter calls cluster %q, the patch adds %q", istioFile, got, p.cluster.GetName())
	}
	st := storeTimeout(t)
	for what, d := range map[string]interface{ AsDuration() time.Duration }{
		"timeout": f.GetTimeout(), "grpc_service.timeout": svc.GetGrpcService().GetTimeout(),
	} {
		if d == nil || d.AsDuration() <= st {
			t.Errorf("%s: %s %v, want above envoy-rls's -store-timeout %v", istioFile, what, d, st)
		}
	}
}

// TestIstioCluster: the cluster dials envoy-rls's Service on its gRPC port,
// over HTTP/2.
func TestIstioCluster(t *testing.T) {
	c := loadIstio(t).cluster
	var addrs []string
	for _, le := range c.GetLoadAssignment().GetEndpoints() {
		for _, lb := range le.GetLbEndpoints() {
			sa := lb.GetEndpoint().GetAddress().GetSocketAddress()
			addrs = append(addrs, sa.GetAddress()+":"+strconv.Itoa(int(sa.GetPortValue())))
		}
	}
	if want := rlsFQDN + ":" + strconv.Itoa(int(grpcPort(t))); len(addrs) != 1 || addrs[0] != want {
		t.Errorf("%s: cluster %s dials %q, want [%s] (the Service %s in %s, -grpc-addr's port)", istioFile, c.GetName(), addrs, want, rlsService, rlsNamespace)
	}
	if c.GetType() != clusterv3.Cluster_STRICT_DNS {
		t.Errorf("%s: cluster type %v, want STRICT_DNS (every pod's address from the Service's DNS)", istioFile, c.GetType())
	}
	opts, ok := c.GetTypedExtensionProtocolOptions()["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]
	var po httpv3.HttpProtocolOptions
	if !ok || opts.UnmarshalTo(&po) != nil || po.GetExplicitHttpConfig().GetHttp2ProtocolOptions() == nil {
		t.Errorf("%s: cluster %s does not speak HTTP/2 (explicit_http_config.http2_protocol_options): gRPC needs it", istioFile, c.GetName())
	}
}

// TestIstioDescriptors: every descriptor the route actions can send meets a
// limit of istio-limits.yaml, and every limit there is met by one
// (envoy-rls lint, over the gateway's Envoy rebuilt with the patches).
func TestIstioDescriptors(t *testing.T) {
	p := loadIstio(t)
	c, _ := limits(t, istioLimitsFile)
	if len(p.vhost.GetRateLimits()) == 0 {
		t.Fatalf("%s: the virtual host patch adds no rate_limits", istioFile)
	}
	for i, rl := range p.vhost.GetRateLimits() {
		if err := rl.ValidateAll(); err != nil {
			t.Errorf("%s: rate_limits[%d]: %v", istioFile, i, err)
		}
	}
	vh := proto.Clone(p.vhost).(*routev3.VirtualHost)
	vh.Name, vh.Domains = "*:80", []string{"*"}
	vh.Routes = []*routev3.Route{{
		Name:   "app",
		Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
		Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "app"}}},
	}}
	checkDescriptors(t, gatewayEnvoy(t, p.filter, vh, p.cluster, upstream("app")), c, istioLimitsFile)
}
