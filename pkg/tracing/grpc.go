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
const ServerScope = "github.com/envoy-rls/envoy-rls/pkg/tracing"

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
		ctx = t.Extract(ctx)
		ctx, span := tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
			attribute.String("rpc.system", "grpc"),
			attribute.String("rpc.service", service),
			attribute.String("rpc.method", method),
		))
		defer span.End()
		resp, err := handler(ctx, req)
		code := status.Code(err)
		span.SetAttributes(attribute.Int("rpc.grpc.status_code", int(code)))
		if serverError(code) {
			span.SetStatus(codes.Error, status.Convert(err).Message())
		}
		return resp, err
	}
}

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
	md, ok := metadata.FromIncomingContext(ctx)
	if !ok {
		return ctx
	}
	return t.propagators.Extract(ctx, metadataCarrier(md))
}

// metadataCarrier reads gRPC metadata as a propagator's carrier; its keys
// are lower case, as propagators ask for them.
type metadataCarrier metadata.MD

func (c metadataCarrier) Get(key string) string {
	if v := metadata.MD(c).Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (c metadataCarrier) Set(key, value string) { metadata.MD(c).Set(key, value) }

func (c metadataCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}
