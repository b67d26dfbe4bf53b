package guides

import (
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	ratelimitfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/envoy-rls/envoy-rls/internal/lint"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// gatewayEnvoy is the Envoy a guide's platform builds, as far as rate
// limiting goes: one listener whose HTTP connection manager runs the rate
// limit filter before the router, with the guide's virtual host, and the
// clusters it names. The platform adds much more (TLS, other filters,
// other routes); none of it changes which descriptors the filter sends.
func gatewayEnvoy(t testing.TB, filter *ratelimitfilterv3.RateLimit, vhost *routev3.VirtualHost, clusters ...*clusterv3.Cluster) *bootstrapv3.Bootstrap {
	t.Helper()
	hcm := &hcmv3.HttpConnectionManager{
		StatPrefix:     "ingress",
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{Name: "ingress", VirtualHosts: []*routev3.VirtualHost{vhost}}},
		HttpFilters: []*hcmv3.HttpFilter{
			{Name: "envoy.filters.http.ratelimit", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, filter)}},
			{Name: "envoy.filters.http.router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, &routerv3.Router{})}},
		},
	}
	listener := &listenerv3.Listener{
		Name: "ingress",
		Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: "0.0.0.0", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 8080},
		}}},
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{{
			Name: "envoy.filters.network.http_connection_manager", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(t, hcm)},
		}}}},
	}
	b := &bootstrapv3.Bootstrap{StaticResources: &bootstrapv3.Bootstrap_StaticResources{
		Listeners: []*listenerv3.Listener{listener},
		Clusters:  clusters,
	}}
	if err := b.ValidateAll(); err != nil {
		t.Fatalf("the gateway's Envoy, rebuilt from the guide: %v", err)
	}
	return b
}

func mustAny(t testing.TB, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// checkDescriptors runs envoy-rls's lint over the gateway's Envoy and the
// guide's limits: every descriptor the route actions can send meets a
// limit, every limit is met by some descriptor, the filter's domain is the
// limits', and no leaky bucket outwaits the filter's timeout.
func checkDescriptors(t *testing.T, b *bootstrapv3.Bootstrap, c *config.Config, limitsFile string) {
	t.Helper()
	for _, f := range lint.Check(b, c) {
		t.Errorf("route actions against %s/%s: %s", guidesDir, limitsFile, f)
	}
}

// upstream is a cluster the guide's routes send to, for the rebuilt Envoy
// to be complete: the application behind the gateway.
func upstream(name string) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STRICT_DNS},
		LoadAssignment: &endpointv3.ClusterLoadAssignment{
			ClusterName: name,
		},
	}
}
