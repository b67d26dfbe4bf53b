package rlqs

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typepb "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

const limitsYAML = `
domain: edge
descriptors:
  - key: path
    value: /api
    rate_limit: {unit: second, requests_per_unit: 100}
  - key: path
    value: /free
    rate_limit: {unlimited: true}
  - key: path
    value: /closed
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: path
    value: /shadow
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 5}
  - key: path
    value: /login
    descriptors:
      - key: user
        rate_limit: {unit: minute, requests_per_unit: 60}
`

func testIndex(t testing.TB) *descriptors.Index {
	t.Helper()
	d, err := config.Parse("limits.yaml", []byte(limitsYAML))
	if err != nil {
		t.Fatal(err)
	}
	return descriptors.NewIndex(&config.Config{Domains: map[string]*config.Domain{d.Name: d}})
}

// clock is a settable clock, so that idle buckets need no sleeping.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// serve runs svc on a real gRPC server on loopback and returns a client
// connection to it.
func serve(t testing.TB, svc *Service) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	rlqspb.RegisterRateLimitQuotaServiceServer(srv, svc)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// envoy is a minimal RLQS client: one stream, one report at a time.
type envoy struct {
	t      testing.TB
	stream grpc.BidiStreamingClient[rlqspb.RateLimitQuotaUsageReports, rlqspb.RateLimitQuotaResponse]
	cancel context.CancelFunc
}

func dial(t testing.TB, conn *grpc.ClientConn) *envoy {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	st, err := rlqspb.NewRateLimitQuotaServiceClient(conn).StreamRateLimitQuotas(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	e := &envoy{t: t, stream: st, cancel: cancel}
	t.Cleanup(cancel)
	return e
}

type usage struct {
	bucket          map[string]string
	allowed, denied uint64
	elapsed         time.Duration
}

// report sends one report and returns the actions, by bucket id's path
// and user values.
func (e *envoy) report(us ...usage) []*rlqspb.RateLimitQuotaResponse_BucketAction {
	e.t.Helper()
	msg := &rlqspb.RateLimitQuotaUsageReports{Domain: "edge"}
	for _, u := range us {
		msg.BucketQuotaUsages = append(msg.BucketQuotaUsages, &rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{
			BucketId:           &rlqspb.BucketId{Bucket: u.bucket},
			TimeElapsed:        durationpb.New(u.elapsed),
			NumRequestsAllowed: u.allowed,
			NumRequestsDenied:  u.denied,
		})
	}
	if err := e.stream.Send(msg); err != nil {
		e.t.Fatal(err)
	}
	resp, err := e.stream.Recv()
	if err != nil {
		e.t.Fatal(err)
	}
	if len(resp.BucketAction) != len(us) {
		e.t.Fatalf("%d actions for %d buckets", len(resp.BucketAction), len(us))
	}
	return resp.BucketAction
}

func (e *envoy) leave() {
	_ = e.stream.CloseSend()
	_, _ = e.stream.Recv() // the server's end of the stream
	e.cancel()
}

// tokens returns the token bucket of a, failing the test on another action.
func tokens(t *testing.T, a *rlqspb.RateLimitQuotaResponse_BucketAction) *typepb.TokenBucket {
	t.Helper()
	tb := a.GetQuotaAssignmentAction().GetRateLimitStrategy().GetTokenBucket()
	if tb == nil {
		t.Fatalf("got %v, want a token bucket", a)
	}
	return tb
}

func perSecond(tb *typepb.TokenBucket) float64 {
	return float64(tb.GetTokensPerFill().GetValue()) / float64(tb.GetFillInterval().GetSeconds())
}

func api() map[string]string { return map[string]string{"path": "/api"} }
