// Package tracing is the service's OpenTelemetry tracing: the SDK's
// tracer provider with an OTLP exporter (HTTP or gRPC, configured by the
// standard OTEL_EXPORTER_OTLP_* variables as the SDK reads them), a
// parent-based ratio sampler, the resource that names the instance, and
// the propagation of the trace Envoy sends in a call's gRPC metadata: W3C
// traceparent and baggage, and B3 in its single and multiple header forms,
// as Envoy's Zipkin tracer sends it.
//
// Nothing here runs while tracing is off: the service and the stores take
// a nil trace.Tracer then, and test for it before anything else.
//
// Spans never hold up a decision: a span ends into a bounded queue, which
// an exporter goroutine empties. A span that finds the queue full, or
// whose export fails (an endpoint that is down), is dropped and counted
// (Options.OnDropped), and logged at most once per Options.LogEvery.
package tracing

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/contrib/propagators/b3"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
)

// The exporter protocols, as TRACING_EXPORTER_PROTOCOL names them.
const (
	ProtocolHTTP = "http"
	ProtocolGRPC = "grpc"
)

// Why a span was dropped, the reasons Options.OnDropped is told.
const (
	DroppedQueueFull = "queue_full"
	DroppedExport    = "export_failed"
)

// DefaultLogEvery is the least time between two log lines about dropped
// spans when Options.LogEvery is zero.
const DefaultLogEvery = time.Minute

// Options configure the tracing.
type Options struct {
	// Protocol is ProtocolHTTP (OTLP/HTTP with protobuf bodies, the
	// default when empty) or ProtocolGRPC.
	Protocol string
	// SamplingRate is the share of the traces started here that are
	// sampled, from 0 to 1; a trace that arrives with a parent keeps the
	// parent's choice.
	SamplingRate float64
	// ServiceName, ServiceNamespace and InstanceID name the instance in
	// the resource of every span (service.name, service.namespace,
	// service.instance.id). An empty InstanceID is a random one; an empty
	// namespace is left out.
	ServiceName, ServiceNamespace, InstanceID string
	// OnDropped, if set, is told of every span dropped, and why
	// (DroppedQueueFull, DroppedExport). It must be fast and safe for
	// concurrent use.
	OnDropped func(reason string, n int)
	// Logger logs the drops, at most once per LogEvery (zero:
	// DefaultLogEvery). Nil logs nothing.
	Logger   *zap.Logger
	LogEvery time.Duration
}

// Tracing is the tracer provider and the propagators of one server. It is
// safe for concurrent use.
type Tracing struct {
	provider    *sdktrace.TracerProvider
	drops       *dropLog
	propagators propagation.TextMapPropagator
	instanceID  string
}

// New starts the tracing o describes. The exporter reads the
// OTEL_EXPORTER_OTLP_* variables (the endpoint, headers, TLS, timeout,
// compression) and the batching the OTEL_BSP_* variables, as the SDK
// documents them; New fails only on a protocol it does not know, a
// sampling rate out of range, or a variable the SDK refuses.
func New(ctx context.Context, o Options) (*Tracing, error) {
	if !(o.SamplingRate >= 0 && o.SamplingRate <= 1) {
		return nil, fmt.Errorf("tracing: sampling rate %v: want a number from 0 to 1", o.SamplingRate)
	}
	drops := newDropLog(o)
	// Errors the SDK reports by itself (a variable it refuses, an
	// exporter's partial success) go to the log, at the drops' pace,
	// rather than to the standard library's logger.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(drops.report))
	var exp sdktrace.SpanExporter
	var err error
	switch o.Protocol {
	case ProtocolHTTP, "":
		exp, err = otlptracehttp.New(ctx)
	case ProtocolGRPC:
		exp, err = otlptracegrpc.New(ctx)
	default:
		return nil, fmt.Errorf("tracing: protocol %q: want http or grpc", o.Protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: the OTLP exporter: %w", err)
	}
	if o.InstanceID == "" {
		o.InstanceID = randomID()
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(serviceAttrs(o)...))
	if err != nil {
		return nil, fmt.Errorf("tracing: the resource: %w", err)
	}
	queue := queueSize()
	bsp := sdktrace.NewBatchSpanProcessor(&countingExporter{SpanExporter: exp, drops: drops}, sdktrace.WithMaxQueueSize(queue))
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(o.SamplingRate))),
		sdktrace.WithSpanProcessor(&gate{SpanProcessor: bsp, max: int64(queue), drops: drops}),
		sdktrace.WithResource(res),
	)
	return &Tracing{
		provider:    tp,
		drops:       drops,
		propagators: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, b3.New(), propagation.Baggage{}),
		instanceID:  o.InstanceID,
	}, nil
}

// serviceAttrs are the resource's attributes that name the instance.
func serviceAttrs(o Options) []attribute.KeyValue {
	attrs := []attribute.KeyValue{
		attribute.String("service.name", o.ServiceName),
		attribute.String("service.instance.id", o.InstanceID),
	}
	if o.ServiceNamespace != "" {
		attrs = append(attrs, attribute.String("service.namespace", o.ServiceNamespace))
	}
	return attrs
}

// Tracer returns the tracer of the instrumentation scope name.
func (t *Tracing) Tracer(name string) trace.Tracer { return t.provider.Tracer(name) }

// InstanceID is the resource's service.instance.id: the one asked for, or
// the random one New chose.
func (t *Tracing) InstanceID() string { return t.instanceID }

// Shutdown exports the spans still queued, within ctx, and stops the
// exporter. The spans it could not export by then are counted as
// dropped.
//
// What is lost is logged here, in one line whatever the interval (it is
// the last): the caller need not log Shutdown's error again.
func (t *Tracing) Shutdown(ctx context.Context) error {
	err := t.provider.Shutdown(ctx)
	t.drops.closed.Store(true)
	n := t.drops.held.Swap(0)
	if n > 0 && t.drops.onDropped != nil {
		t.drops.onDropped(DroppedExport, int(n))
	}
	if (n > 0 || err != nil) && t.drops.log != nil {
		t.drops.log.Warn("tracing: the last spans were not all exported", zap.Error(err), zap.Int64("spans_dropped", n))
	}
	return err
}

// randomID is a random UUID (version 4), as envoyproxy/ratelimit names an
// instance that TRACING_SERVICE_INSTANCE_ID does not.
func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// queueSize is the span queue's bound: OTEL_BSP_MAX_QUEUE_SIZE, as the
// SDK reads it, or its default. The gate keeps to it, so it must know it.
func queueSize() int {
	if n, err := strconv.Atoi(os.Getenv("OTEL_BSP_MAX_QUEUE_SIZE")); err == nil && n > 0 {
		return n
	}
	return sdktrace.DefaultMaxQueueSize
}

// gate holds the spans the batch processor holds, queued or being
// exported, under its queue's bound, and drops and counts the ones past
// it: the processor itself would drop them without a word.
type gate struct {
	sdktrace.SpanProcessor
	max   int64
	drops *dropLog
}

func (g *gate) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	if g.drops.held.Add(1) > g.max {
		g.drops.held.Add(-1)
		g.drops.dropped(DroppedQueueFull, 1, errQueueFull)
		return
	}
	g.SpanProcessor.OnEnd(s)
}

var errQueueFull = errors.New("the span queue is full: the OTLP endpoint takes spans slower than they end")

// countingExporter counts the spans of every export that failed as
// dropped, and releases every exported span from the gate's count.
type countingExporter struct {
	sdktrace.SpanExporter
	drops *dropLog
}

func (e *countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.SpanExporter.ExportSpans(ctx, spans)
	if e.drops.closed.Load() {
		return nil // Shutdown gave up on it, and counted it
	}
	e.drops.held.Add(-int64(len(spans)))
	if err != nil {
		e.drops.dropped(DroppedExport, len(spans), err)
	}
	return nil // counted and logged here, not again by the processor
}

// dropLog counts the spans dropped, and logs them at most once per
// interval: an endpoint that is down fails every export.
type dropLog struct {
	onDropped func(reason string, n int)
	log       *zap.Logger
	every     int64 // ns
	// held is the spans the batch processor holds (the gate's count);
	// closed is set once Shutdown has counted those left as dropped.
	held   atomic.Int64
	closed atomic.Bool
	// last is when the last line was logged (ns of the monotonic clock
	// since epoch), since the spans dropped since then.
	last  atomic.Int64
	since atomic.Int64
	epoch time.Time
}

func newDropLog(o Options) *dropLog {
	every := o.LogEvery
	if every <= 0 {
		every = DefaultLogEvery
	}
	d := &dropLog{onDropped: o.OnDropped, log: o.Logger, every: int64(every), epoch: time.Now()}
	d.last.Store(math.MinInt64 / 2)
	return d
}

// dropped counts n spans dropped for reason, and logs err if a line is
// due.
func (d *dropLog) dropped(reason string, n int, err error) {
	if d.onDropped != nil {
		d.onDropped(reason, n)
	}
	d.since.Add(int64(n))
	d.report(err)
}

// report logs err, and the spans dropped since the last line, unless a
// line was logged less than an interval ago.
func (d *dropLog) report(err error) {
	if d.log == nil {
		return
	}
	now := int64(time.Since(d.epoch))
	last := d.last.Load()
	if now-last < d.every || !d.last.CompareAndSwap(last, now) {
		return
	}
	d.log.Warn("tracing: spans dropped, or the SDK reports an error; decisions are not affected",
		zap.Error(err), zap.Int64("spans_dropped", d.since.Swap(0)), zap.Duration("next_line_after", time.Duration(d.every)))
}
