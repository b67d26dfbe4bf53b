package client_test

import (
	"net/http"
	"testing"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/envoy-rls/envoy-rls/pkg/client"
	"github.com/envoy-rls/envoy-rls/pkg/limits/memory"
	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

// dialectClient is a client of a service that adds the IETF headers and a
// JSON body with its content-type to its answers (-response-headers,
// -json-429-body).
func dialectClient(t *testing.T) *client.Client {
	t.Helper()
	store := memory.New(memory.Options{})
	t.Cleanup(func() { store.Close() })
	svc := newService(t, store, rls.Options{StoreInProcess: true, Headers: []rls.HeaderDialect{rls.IETFHeaders, rls.JSON429Body}})
	return dial(t, serve(t, svc, nil))
}

// TestServiceHeadersHTTP: the service's own headers reach the HTTP client;
// the middleware's refusal keeps its text body and says so, whatever
// content-type the service meant for its JSON body.
func TestServiceHeadersHTTP(t *testing.T) {
	srv, _ := limitedServer(t, dialectClient(t), describeUser)
	resp, _ := get(t, srv, "ann")
	if resp.Header.Get("RateLimit-Policy") == "" || resp.Header.Get("RateLimit") == "" {
		t.Errorf("allowed response's headers %v, want the service's RateLimit-Policy and RateLimit", resp.Header)
	}
	get(t, srv, "ann")
	get(t, srv, "ann")
	resp, body := get(t, srv, "ann")
	if resp.StatusCode != http.StatusTooManyRequests || body != "rate limited\n" || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Errorf("refusal %d %q Content-Type %q, want 429 \"rate limited\" as text/plain", resp.StatusCode, body, resp.Header.Get("Content-Type"))
	}
	if resp.Header.Get("Retry-After") == "" || resp.Header.Get("RateLimit") == "" {
		t.Errorf("refusal's headers %v, want Retry-After and RateLimit", resp.Header)
	}
}

// TestServiceHeadersGRPC: the service's headers become metadata, but its
// content-type does not replace gRPC's own: the refusal still reaches the
// client as RESOURCE_EXHAUSTED.
func TestServiceHeadersGRPC(t *testing.T) {
	hc := limitedHealth(t, dialectClient(t))
	for range 3 {
		if _, err := hc.Check(as(t, "ann"), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	var md metadata.MD
	_, err := hc.Check(as(t, "ann"), &healthpb.HealthCheckRequest{}, grpc.Header(&md))
	checkRefusal(t, err, md, maxWait, true)
	if got := md.Get("ratelimit"); len(got) != 1 {
		t.Errorf("refusal's ratelimit metadata %q, want the service's header", got)
	}
	if got := md.Get("content-type"); len(got) != 1 || got[0] != "application/grpc" {
		t.Errorf("content-type %q, want gRPC's own", got)
	}
}
