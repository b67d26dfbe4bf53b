package integration

import (
	"context"
	"math"
	"testing"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
)

const rlqsLimits = `
domain: edge
descriptors:
  - key: path
    value: /api
    rate_limit: {unit: second, requests_per_unit: 100}
`

// rlqsClient is a minimal Envoy: one RLQS stream, one report at a time, one
// bucket.
type rlqsClient struct {
	t      *testing.T
	stream grpc.BidiStreamingClient[rlqspb.RateLimitQuotaUsageReports, rlqspb.RateLimitQuotaResponse]
}

func newRLQSClient(t *testing.T, s *server) *rlqsClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	st, err := rlqspb.NewRateLimitQuotaServiceClient(s.conn).StreamRateLimitQuotas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return &rlqsClient{t: t, stream: st}
}

// report sends a report of requests per second over one second (0: a
// first report, time_elapsed 0) and returns the token bucket's rate.
func (c *rlqsClient) report(perSecond uint64, elapsed time.Duration) float64 {
	c.t.Helper()
	err := c.stream.Send(&rlqspb.RateLimitQuotaUsageReports{Domain: "edge", BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{{
		BucketId:           &rlqspb.BucketId{Bucket: map[string]string{"path": "/api"}},
		TimeElapsed:        durationpb.New(elapsed),
		NumRequestsAllowed: perSecond * uint64(elapsed/time.Second),
	}}})
	if err != nil {
		c.t.Fatal(err)
	}
	resp, err := c.stream.Recv()
	if err != nil {
		c.t.Fatal(err)
	}
	tb := resp.GetBucketAction()[0].GetQuotaAssignmentAction().GetRateLimitStrategy().GetTokenBucket()
	if tb == nil {
		c.t.Fatalf("got %v, want a token bucket", resp)
	}
	return float64(tb.GetTokensPerFill().GetValue()) / float64(tb.GetFillInterval().GetSeconds())
}

// One Envoy gets the whole limit from its first report, on either store.
func TestRLQSOneEnvoy(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store) {
		s := startServer(t, writeConfig(t, rlqsLimits), append(st.flags(t), "-rlqs-report-interval", "1s")...)
		c := newRLQSClient(t, s)
		if got := c.report(0, 0); got != 100 {
			t.Fatalf("first report: %v per second, want 100", got)
		}
		if got := c.report(30, time.Second); got != 100 {
			t.Fatalf("second report: %v per second, want 100", got)
		}
	})
}

// Two processes sharing one Redis divide the limit max-min fair among three
// Envoys, two on one and one on the other.
func TestRLQSTwoInstancesShareRedis(t *testing.T) {
	url := redistest.Start(t).URL()
	cfg := writeConfig(t, rlqsLimits)
	a := startServer(t, cfg, "-redis-url", url, "-rlqs-report-interval", "1s")
	b := startServer(t, cfg, "-redis-url", url, "-rlqs-report-interval", "1s")
	small, big1, big2 := newRLQSClient(t, a), newRLQSClient(t, a), newRLQSClient(t, b)
	var s, b1, b2 float64
	for round := 0; round < 3; round++ {
		if round > 0 {
			// Envoy's reports are an interval apart; each instance reads
			// every demand again once its division is half an interval old.
			time.Sleep(600 * time.Millisecond)
		}
		s, b1, b2 = small.report(10, time.Second), big1.report(200, time.Second), big2.report(200, time.Second)
	}
	if s != 10 || math.Abs(b1-45) > 1 || math.Abs(b2-45) > 1 || s+b1+b2 > 100 {
		t.Fatalf("shares %v, %v (A) and %v (B); want 10, 45, 45", s, b1, b2)
	}
	if v, ok := a.metric(t, "rls_rlqs_streams"); !ok || v != 2 {
		t.Fatalf("rls_rlqs_streams on A: %v (%v), want 2", v, ok)
	}
}

// A stopping instance ends its RLQS streams with UNAVAILABLE instead of
// waiting on them, so it exits well within -shutdown-timeout, and an Envoy
// that opens a new stream on the instance that replaces it (Redis holds
// the demands) gets its share again at its first report.
func TestRLQSRestart(t *testing.T) {
	url := redistest.Start(t).URL()
	cfg := writeConfig(t, rlqsLimits)
	a := startServer(t, cfg, "-redis-url", url, "-rlqs-report-interval", "1s", "-shutdown-timeout", "10s")
	c := newRLQSClient(t, a)
	c.report(0, 0)
	began := time.Now()
	a.stop(t)
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("stopping with an RLQS stream open took %v", took)
	}
	if _, err := c.stream.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("the stream after the stop: %v, want UNAVAILABLE", err)
	}
	b := startServer(t, cfg, "-redis-url", url, "-rlqs-report-interval", "1s")
	if got := newRLQSClient(t, b).report(50, time.Second); got != 100 {
		t.Fatalf("on the new instance: %v per second, want 100", got)
	}
}
