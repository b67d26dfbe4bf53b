package server

import (
	"context"
	"flag"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/envoy-rls/envoy-rls/internal/cli"
	"github.com/envoy-rls/envoy-rls/internal/metrics"
	"github.com/envoy-rls/envoy-rls/internal/tracing"
)

// tracingOptions are the flags of OpenTelemetry tracing (package
// tracing). The exporter's endpoint and its settings are the SDK's
// OTEL_EXPORTER_OTLP_* variables, not flags.
type tracingOptions struct {
	on                                        bool
	protocol                                  string
	samplingRate                              float32
	serviceName, serviceNamespace, instanceID string
}

// tracingProtocols is -tracing-protocol's choice (serverChoices).
var tracingProtocols = cli.Choice{
	Want: cli.OneOf([]string{tracing.ProtocolHTTP, tracing.ProtocolGRPC}),
	OK:   func(s string) bool { return s == tracing.ProtocolHTTP || s == tracing.ProtocolGRPC },
}

// tracingFlags defines the flags of tracing.
func tracingFlags(fs *flag.FlagSet, o *tracingOptions) {
	o.samplingRate = 1
	fs.BoolVar(&o.on, "tracing", false, "export a span of every rate limit call over OTLP, continuing the trace its gRPC metadata carries (W3C traceparent, B3, baggage); the endpoint and its settings are the OTEL_EXPORTER_OTLP_* variables")
	fs.StringVar(&o.protocol, "tracing-protocol", tracing.ProtocolHTTP, "OTLP transport of -tracing: http (protobuf over HTTP, port 4318) or grpc (port 4317)")
	fs.Var(ratioFlag{&o.samplingRate}, "tracing-sampling-rate", "share of the traces started here that -tracing samples; a call whose trace was started upstream keeps its parent's choice")
	fs.StringVar(&o.serviceName, "tracing-service-name", "envoy-rls", "service.name of the spans")
	fs.StringVar(&o.serviceNamespace, "tracing-service-namespace", "", "service.namespace of the spans (empty: none)")
	fs.StringVar(&o.instanceID, "tracing-service-instance-id", "", "service.instance.id of the spans (empty: a random id; a pod's name is a good one)")
}

// tracedServices are the gRPC services whose calls get a server span:
// the rate limit service, not health checks or reflection.
func tracedService(service string) bool {
	return service == rlsv3.RateLimitService_ServiceDesc.ServiceName
}

// startTracing starts the tracing -tracing asks for, counting the spans
// it drops in m; nil when it is off.
func startTracing(o *tracingOptions, m *metrics.Metrics, log *zap.Logger) (*tracing.Tracing, error) {
	if !o.on {
		return nil, nil
	}
	tr, err := tracing.New(context.Background(), tracing.Options{
		Protocol:         o.protocol,
		SamplingRate:     float64(o.samplingRate),
		ServiceName:      o.serviceName,
		ServiceNamespace: o.serviceNamespace,
		InstanceID:       o.instanceID,
		OnDropped:        m.TraceDrops(tracing.DroppedQueueFull, tracing.DroppedExport),
		Logger:           log,
	})
	if err != nil {
		return nil, err
	}
	log.Info("tracing", zap.String("protocol", o.protocol), zap.String("sampling_rate", ratioFlag{&o.samplingRate}.String()),
		zap.String("service_name", o.serviceName), zap.String("service_namespace", o.serviceNamespace),
		zap.String("service_instance_id", tr.InstanceID()))
	return tr, nil
}

// tracingInterceptors are the gRPC server's interceptors of tr: none when
// tracing is off.
func tracingInterceptors(tr *tracing.Tracing) []grpc.UnaryServerInterceptor {
	if tr == nil {
		return nil
	}
	return []grpc.UnaryServerInterceptor{tr.UnaryServerInterceptor(tracedService)}
}

// tracingShutdownBound is how long the exit waits for the last spans to
// be exported.
const tracingShutdownBound = 5 * time.Second

// stopTracing exports what tr still holds, within tracingShutdownBound;
// tr.Shutdown logs what it could not, once.
func stopTracing(tr *tracing.Tracing) {
	if tr == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), tracingShutdownBound)
	defer cancel()
	_ = tr.Shutdown(ctx) // logged there
}
