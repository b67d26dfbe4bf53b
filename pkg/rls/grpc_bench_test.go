package rls

import (
	"context"
	"net"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
)

// noopService answers OK at once: the floor of a gRPC call in process.
type noopService struct {
	rlsv3.UnimplementedRateLimitServiceServer
}

func (noopService) ShouldRateLimit(context.Context, *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	return &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK}, nil
}

// bufconnClient serves srv over an in-memory listener, on a gRPC server with
// the settings the binary uses and opts, and returns a client of it.
func bufconnClient(b *testing.B, srv rlsv3.RateLimitServiceServer, opts ...grpc.ServerOption) rlsv3.RateLimitServiceClient {
	b.Helper()
	lis := bufconn.Listen(1 << 20)
	gs := grpc.NewServer(append([]grpc.ServerOption{grpc.NumStreamWorkers(256)}, opts...)...)
	rlsv3.RegisterRateLimitServiceServer(gs, srv)
	go gs.Serve(lis) //nolint:errcheck // ends with Stop
	b.Cleanup(gs.Stop)
	conn, err := grpc.NewClient("passthrough:///rls",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	return rlsv3.NewRateLimitServiceClient(conn)
}

// BenchmarkShouldRateLimitGRPC is a whole decision on the embedded store
// through gRPC over bufconn (client and server in this process), beside the
// same call to a service that answers OK at once: the difference is what a
// decision adds to a gRPC call. parallel runs 16 callers per CPU.
func BenchmarkShouldRateLimitGRPC(b *testing.B) {
	svc, req := allocService(b)
	for _, c := range []struct {
		name string
		srv  rlsv3.RateLimitServiceServer
	}{{"noop", noopService{}}, {"embedded", svc}} {
		benchCalls(b, c.name, bufconnClient(b, c.srv), req)
	}
}

// benchCalls runs req on client as name/serial, one call at a time, and
// as name/parallel, 16 callers per CPU.
func benchCalls(b *testing.B, name string, client rlsv3.RateLimitServiceClient, req *rlsv3.RateLimitRequest) {
	b.Run(name+"/serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := client.ShouldRateLimit(context.Background(), req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run(name+"/parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(16)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := client.ShouldRateLimit(context.Background(), req); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
