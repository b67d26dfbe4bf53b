package client_test

import (
	"context"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/envoy-rls/envoy-rls/pkg/client"
)

// callPair is a Client and a raw generated client on one connection to a
// real service on loopback (embedded store), and the raw client's
// request, built once, of the same descriptor Check sends.
type callPair struct {
	client *client.Client
	raw    rlsv3.RateLimitServiceClient
	req    *rlsv3.RateLimitRequest
}

func newCallPair(tb testing.TB) callPair {
	tb.Helper()
	conn, err := grpc.NewClient(serve(tb, memoryService(tb), nil), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	return callPair{
		client: client.New(conn, client.WithTimeout(callTimeout)),
		raw:    rlsv3.NewRateLimitServiceClient(conn),
		req: &rlsv3.RateLimitRequest{Domain: "app", Descriptors: []*ratelimitv3.RateLimitDescriptor{
			{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "route", Value: "/bench"}}},
		}},
	}
}

// route is the descriptor both calls of a callPair ask for: a limit of
// a million an hour, more than any run asks.
var route = client.Descriptor{{Key: "route", Value: "/bench"}}

// callTimeout is both calls' deadline: long, so that a loaded machine
// fails no call, and a deadline still, with its timer and its grpc-timeout.
const callTimeout = 10 * time.Second

// TestCheckAllocs: a Check allocates no more than a raw ShouldRateLimit
// call of a request built once, with the same deadline, on the same
// connection: the request messages come from a pool. AllocsPerRun counts
// the whole process, the service's allocations and gRPC's on both sides
// included, so a call has many; allocNoise is the one that the server's
// goroutines add or not from one run to the next.
func TestCheckAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items")
	}
	p := newCallPair(t)
	ctx := context.Background()
	raw := testing.AllocsPerRun(500, func() {
		ctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		if _, err := p.raw.ShouldRateLimit(ctx, p.req); err != nil {
			t.Fatal(err)
		}
	})
	check := testing.AllocsPerRun(500, func() {
		if d, err := p.client.Check(ctx, "app", 0, route); err != nil || d.Unavailable != nil {
			t.Fatal(err, d.Unavailable)
		}
	})
	t.Logf("allocations per call, client and service: raw %.0f, Check %.0f", raw, check)
	if check > raw+allocNoise {
		t.Errorf("Check: %.0f allocations, raw call %.0f: want at most %d more", check, raw, allocNoise)
	}
}

const allocNoise = 1

// BenchmarkCheck and BenchmarkRawShouldRateLimit are one decision through
// the Client and through the generated client on one connection to a real
// service on loopback, the raw call with the Client's deadline: the
// difference is the Client's own cost.
func BenchmarkCheck(b *testing.B) {
	p := newCallPair(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		d, err := p.client.Check(ctx, "app", 0, route)
		if err != nil || d.Unavailable != nil {
			b.Fatal(err, d.Unavailable)
		}
	}
}

func BenchmarkRawShouldRateLimit(b *testing.B) {
	p := newCallPair(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		ctx, cancel := context.WithTimeout(ctx, callTimeout)
		_, err := p.raw.ShouldRateLimit(ctx, p.req)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
	}
}
