package tracing

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	grpccodes "google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// ServerScope is the instrumentation scope of the server spans.
const ServerScope = "github.com/envoy-rls/envoy-rls/internal/tracing"

// UnaryServerInterceptor starts a server span for each unary call of a
// service traced names (the rate limit service, not health checks), named
// as its method ("envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"),
// continuing the trace the call's metadata carries. The handler finds the
// span in its context (trace.SpanFromContext) to add what it decided.
func (t *Tracing) UnaryServerInterceptor(traced func(service string) bool) grpc.UnaryServerInterceptor {
	tracer := t.Tracer(ServerScope)
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		name := strings.TrimPrefix(info.FullMethod, "/")
		service, method, _ := strings.Cut(name, "/")
		if !traced(service) {
			return handler(ctx, req)
		}
		ctx, span := tracer.Start(t.Extract(ctx), name, serverKind)
		defer span.End()
		if !span.IsRecording() {
			// Not sampled: the trace goes on downstream of Envoy without
			// this call, and the handler adds nothing to it.
			return handler(ctx, req)
		}
		span.SetAttributes(rpcSystem, attribute.String("rpc.service", service), attribute.String("rpc.method", method))
		resp, err := handler(ctx, req)
		code := status.Code(err)
		span.SetAttributes(attribute.Int("rpc.grpc.status_code", int(code)))
		if serverError(code) {
			span.SetStatus(codes.Error, status.Convert(err).Message())
		}
		return resp, err
	}
}

var (
	serverKind = trace.WithSpanKind(trace.SpanKindServer)
	rpcSystem  = attribute.String("rpc.system", "grpc")
)

// serverError reports whether code is an error of the server's, as
// OpenTelemetry's conventions for gRPC count it: a refusal of the
// caller's request (InvalidArgument, ResourceExhausted) is not.
func serverError(code grpccodes.Code) bool {
	switch code {
	case grpccodes.Unknown, grpccodes.DeadlineExceeded, grpccodes.Unimplemented,
		grpccodes.Internal, grpccodes.Unavailable, grpccodes.DataLoss:
		return true
	}
	return false
}

// Extract returns ctx with the trace and the baggage that the incoming
// gRPC metadata of ctx carries: traceparent and tracestate, B3 (the
// single b3 header or the x-b3-* ones), baggage.
func (t *Tracing) Extract(ctx context.Context) context.Context {
	return t.propagators.Extract(ctx, metadataCarrier{ctx})
}

// metadataCarrier reads the incoming gRPC metadata of ctx as a
// propagator's carrier, a key at a time (the propagators ask for a few
// keys, in lower case): the whole metadata is not copied for it.
type metadataCarrier struct{ ctx context.Context }

func (c metadataCarrier) Get(key string) string {
	if v := metadata.ValueFromIncomingContext(c.ctx, key); len(v) > 0 {
		return v[0]
	}
	return ""
}

// Set does nothing: incoming metadata is read, never written.
func (c metadataCarrier) Set(string, string) {}

func (c metadataCarrier) Keys() []string {
	md, _ := metadata.FromIncomingContext(c.ctx)
	keys := make([]string, 0, len(md))
	for k := range md {
		keys = append(keys, k)
	}
	return keys
}
