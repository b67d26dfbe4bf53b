package rls

import (
	"context"
	"fmt"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"

	"github.com/envoy-rls/envoy-rls/internal/otlptest"
	"github.com/envoy-rls/envoy-rls/internal/tracing"
)

// BenchmarkShouldRateLimitTraced is BenchmarkShouldRateLimitGRPC's
// decision on the embedded store with tracing on, at a sampling rate of
// 1 % and 100 % of calls that arrive without a trace (the rate decides
// them), exported over OTLP/HTTP to a receiver in this process (its
// decoding counts against the benchmark too). "off" is the service
// without a tracer, as the server runs without -tracing.
func BenchmarkShouldRateLimitTraced(b *testing.B) {
	r := otlptest.Start(b)
	b.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", r.HTTPEndpoint)
	for _, rate := range []float64{-1, 0.01, 1} {
		name := "off"
		svc, req := allocService(b)
		var opts []grpc.ServerOption
		if rate >= 0 {
			name = fmt.Sprintf("rate=%g", rate)
			tr, err := tracing.New(context.Background(), tracing.Options{SamplingRate: rate, ServiceName: "bench"})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
			svc.tracer = tr.Tracer(tracing.ServerScope)
			opts = append(opts, grpc.UnaryInterceptor(tr.UnaryServerInterceptor(func(s string) bool {
				return s == rlsv3.RateLimitService_ServiceDesc.ServiceName
			})))
		}
		benchCalls(b, name, bufconnClient(b, svc, opts...), req) // grpc_bench_test.go
	}
}
