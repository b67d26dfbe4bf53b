package client_test

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/envoy-rls/envoy-rls/pkg/client"
)

// callerUser limits a call per its x-user metadata; a call without it is
// not limited.
func callerUser(ctx context.Context) []client.Descriptor {
	md, _ := metadata.FromIncomingContext(ctx)
	if u := md.Get("x-user"); len(u) == 1 {
		return []client.Descriptor{user(u[0])}
	}
	return nil
}

// limitedHealth serves the gRPC health service, limited by c's
// interceptors, on a free loopback port until the test ends, and returns
// a client of it.
func limitedHealth(t *testing.T, c *client.Client) healthpb.HealthClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(
		grpc.UnaryInterceptor(client.UnaryServerInterceptor(c, "app", func(ctx context.Context, _ string, _ any) []client.Descriptor { return callerUser(ctx) })),
		grpc.StreamInterceptor(client.StreamServerInterceptor(c, "app", func(ctx context.Context, _ string) []client.Descriptor { return callerUser(ctx) })),
	)
	healthpb.RegisterHealthServer(gs, health.NewServer())
	go gs.Serve(lis) //nolint:errcheck // ends with Stop
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return healthpb.NewHealthClient(conn)
}

// as is a context of a call by user u, bounded by the test's margin.
func as(t *testing.T, u string) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	if u == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "x-user", u)
}

// checkRefusal fails the test unless err is RESOURCE_EXHAUSTED with a
// RetryInfo within (0, max] and md carries the rate-limit headers.
func checkRefusal(t *testing.T, err error, md metadata.MD, maxWait time.Duration, wantHeaders bool) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("refusal %v, want RESOURCE_EXHAUSTED", err)
	}
	var wait time.Duration
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			wait = ri.GetRetryDelay().AsDuration()
		}
	}
	if wait <= 0 || wait > maxWait {
		t.Errorf("RetryInfo delay %v, want within (0, %v]", wait, maxWait)
	}
	if got := md.Get("x-ratelimit-remaining"); wantHeaders && (len(got) != 1 || got[0] != "0") {
		t.Errorf("refusal's x-ratelimit-remaining %q, want 0 (metadata %v)", got, md)
	}
	if got := md.Get("retry-after"); wantHeaders && len(got) != 1 {
		t.Errorf("refusal's retry-after %q, want one", got)
	}
}

// TestUnaryServerInterceptor: allowed calls carry the headers as header
// metadata; the limit's next call is RESOURCE_EXHAUSTED with RetryInfo; a
// call without descriptors passes.
func TestUnaryServerInterceptor(t *testing.T) {
	hc := limitedHealth(t, dial(t, serve(t, memoryService(t), nil)))
	for i := range 3 {
		var md metadata.MD
		if _, err := hc.Check(as(t, "ann"), &healthpb.HealthCheckRequest{}, grpc.Header(&md)); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if got := md.Get("x-ratelimit-limit"); len(got) != 1 || got[0] == "" {
			t.Errorf("call %d: x-ratelimit-limit %q, want the limit (metadata %v)", i, got, md)
		}
	}
	var md metadata.MD
	_, err := hc.Check(as(t, "ann"), &healthpb.HealthCheckRequest{}, grpc.Header(&md))
	checkRefusal(t, err, md, maxWait, true)
	if _, err := hc.Check(as(t, ""), &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("call without descriptors: %v, want served", err)
	}
	mistake := metadata.AppendToOutgoingContext(as(t, ""), "x-user", "")
	if _, err := hc.Check(mistake, &healthpb.HealthCheckRequest{}); status.Code(err) != codes.Internal {
		t.Errorf("call whose descriptor has an empty value: %v, want INTERNAL", err)
	}
}

// TestStreamServerInterceptor: Watch streams are limited when they open.
func TestStreamServerInterceptor(t *testing.T) {
	hc := limitedHealth(t, dial(t, serve(t, memoryService(t), nil)))
	watch := func(u string) (healthpb.Health_WatchClient, error) {
		t.Helper()
		ctx, cancel := context.WithCancel(as(t, u))
		t.Cleanup(cancel)
		w, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = w.Recv()
		return w, err
	}
	for i := range 3 {
		w, err := watch("ann")
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		md, err := w.Header()
		if got := md.Get("x-ratelimit-remaining"); err != nil || len(got) != 1 {
			t.Errorf("stream %d: x-ratelimit-remaining %q (%v), want one", i, got, err)
		}
	}
	w, err := watch("ann")
	md, _ := w.Header()
	checkRefusal(t, err, md, maxWait, true)
	if _, err := watch(""); err != nil {
		t.Errorf("stream without descriptors: %v, want served", err)
	}
}

// TestInterceptorFailClosed: a service that cannot answer, failing closed,
// refuses with a RetryInfo of 1 s and no rate-limit headers.
func TestInterceptorFailClosed(t *testing.T) {
	c := dial(t, closedAddr(t), client.WithTimeout(100*time.Millisecond), client.WithFailureMode(client.FailClosed))
	hc := limitedHealth(t, c)
	var md metadata.MD
	_, err := hc.Check(as(t, "ann"), &healthpb.HealthCheckRequest{}, grpc.Header(&md))
	checkRefusal(t, err, md, time.Second, false)
	if got := md.Get("x-ratelimit-limit"); len(got) != 0 {
		t.Errorf("x-ratelimit-limit %q without an answer of the service, want none", got)
	}
}

// TestInterceptorNoDescribe: interceptors given a nil describe fail every
// call with INTERNAL rather than let it pass unlimited.
func TestInterceptorNoDescribe(t *testing.T) {
	c := dial(t, serve(t, memoryService(t), nil))
	ran := false
	_, err := client.UnaryServerInterceptor(c, "app", nil)(t.Context(), nil, &grpc.UnaryServerInfo{FullMethod: "/x/Y"},
		func(context.Context, any) (any, error) { ran = true; return nil, nil })
	if status.Code(err) != codes.Internal || ran {
		t.Errorf("unary: %v, handler ran %v: want INTERNAL, no run", err, ran)
	}
	err = client.StreamServerInterceptor(c, "app", nil)(nil, nil, &grpc.StreamServerInfo{FullMethod: "/x/Y"},
		func(any, grpc.ServerStream) error { ran = true; return nil })
	if status.Code(err) != codes.Internal || ran {
		t.Errorf("stream: %v, handler ran %v: want INTERNAL, no run", err, ran)
	}
}
