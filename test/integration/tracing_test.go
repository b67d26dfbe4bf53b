package integration

import (
	"context"
	"crypto/tls"
	"path/filepath"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"

	"github.com/envoy-rls/envoy-rls/internal/otlptest"
	"github.com/envoy-rls/envoy-rls/internal/redistest"
)

// envoyGatewayTracingEnv is what Envoy Gateway adds to its Deployment's
// env once its users turn tracing on
// (internal/infrastructure/kubernetes/ratelimit/resource.go): the
// instance id is the pod's name (a fieldRef), the endpoint the collector's
// OTLP/HTTP address, the protocol left to its default.
func envoyGatewayTracingEnv(endpoint string) []string {
	return []string{
		"TRACING_ENABLED=true",
		"TRACING_SERVICE_NAME=envoy-ratelimit",
		"TRACING_SERVICE_NAMESPACE=envoy-gateway-system",
		"TRACING_SERVICE_INSTANCE_ID=envoy-ratelimit-6d4b9c7f5-x2k8q",
		"TRACING_SAMPLING_RATE=1.0",
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + endpoint,
	}
}

// Envoy Gateway's Deployment with tracing on, run as ratelimit: the
// start goes on (envoy-rls refused TRACING_ENABLED before), a call that
// Envoy sends with a traceparent is decided as ever, and its span reaches
// the OTLP/HTTP endpoint by the exit at the latest: the trace sent, the
// parent sent, the attributes and the resource Envoy Gateway's variables
// name, the store call's span under it.
func TestDropInEnvoyGatewayTracing(t *testing.T) {
	t.Parallel()
	bin := dropInBinary(t)
	srv := redistest.Start(t)
	r := otlptest.Start(t)
	ca := redistest.NewCA(t)
	cert, key := ca.Issue(t, "ratelimit")
	clientCert, clientKey := ca.Issue(t, "envoy")
	root := t.TempDir()
	newConfigMap(t, filepath.Join(root, "ratelimit", "config"), map[string]string{"config.yaml": gatewayLimits(1)})

	env := append(envoyGatewayEnv(root, srv.Addr(), cert, key, ca.File), envoyGatewayTracingEnv(r.HTTPEndpoint)...)
	s := startDropIn(t, bin, env)
	c := s.client(t, credentials.NewTLS(&tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{redistest.KeyPair(t, clientCert, clientKey)}}))
	const traceID, parent = "5af7183fb1d4cf5f4bf92f3577b34da6", "c6f2bd31a4e1b3f8"
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(),
		"traceparent", "00-"+traceID+"-"+parent+"-01"), callBound)
	defer cancel()
	for i, code := range []rlsv3.RateLimitResponse_Code{codeOK, codeOver} {
		resp, err := c.ShouldRateLimit(ctx, request("eg", desc("user", "alice")))
		if err != nil || resp.GetOverallCode() != code {
			t.Fatalf("call %d: %v %v, want %v", i, resp.GetOverallCode(), err, code)
		}
	}
	// The exit exports what is queued.
	s.terminate(t)
	if !s.wait(exitBound) {
		t.Fatalf("ratelimit did not exit within %v of SIGTERM", exitBound)
	}
	spans, err := r.Await(10*time.Second, func(spans []otlptest.Span) bool { return len(spans) >= 4 })
	if err != nil {
		t.Fatalf("%v; stderr:\n%s", err, s.stderr.String())
	}
	calls := otlptest.Named(spans, "envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit")
	if len(calls) != 2 {
		t.Fatalf("%d call spans, want 2: %+v", len(calls), spans)
	}
	codes := map[string]bool{}
	for _, call := range calls {
		if call.TraceID != traceID || call.ParentSpanID != parent {
			t.Errorf("call span in trace %s under %s, want %s under %s", call.TraceID, call.ParentSpanID, traceID, parent)
		}
		for k, v := range map[string]string{"service.name": "envoy-ratelimit", "service.namespace": "envoy-gateway-system",
			"service.instance.id": "envoy-ratelimit-6d4b9c7f5-x2k8q"} {
			if call.Resource[k] != v {
				t.Errorf("resource %s: got %q, want %q", k, call.Resource[k], v)
			}
		}
		if call.Attrs["rls.domain"] != "eg" || call.Attrs["rls.descriptors"] != "1" || call.Attrs["rls.rule"] != "per-user" {
			t.Errorf("call span's attributes %v: want domain eg, 1 descriptor, rule per-user", call.Attrs)
		}
		codes[call.Attrs["rls.overall_code"]] = true
		found := false
		for _, st := range otlptest.Named(spans, "limits.Store/Decide") {
			found = found || st.ParentSpanID == call.SpanID
		}
		if !found {
			t.Errorf("no store call span under the call's %s", call.SpanID)
		}
	}
	if !codes["OK"] || !codes["OVER_LIMIT"] {
		t.Errorf("overall codes %v, want OK and OVER_LIMIT", codes)
	}
}
