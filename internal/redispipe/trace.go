package redispipe

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// PipelineSpanName names the span of one pipeline sent to Redis.
const PipelineSpanName = "redis pipeline"

// The pipeline span's attributes: how many calls it serves, their
// decisions, its commands.
var (
	attrDBSystem  = attribute.String("db.system.name", "redis")
	attrCalls     = attribute.Key("rls.pipeline.calls")
	attrDecisions = attribute.Key("rls.pipeline.decisions")
	attrCommands  = attribute.Key("db.operation.batch.size")
)

// callerSpan is the span of ctx if it is sampled and records, for the
// work of its call to carry to the pipeline that sends it; nil otherwise.
func callerSpan(ctx context.Context) *trace.Span {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() || !span.SpanContext().IsSampled() {
		return nil
	}
	return &span
}

// pipelineSpan starts the span of one pipeline, which carries the work of
// groups, when a call of them is traced: the child of the first such
// call's span, linked to the others', each of which links back to it, so
// that a pipeline merged for many calls is one span that each of their
// traces reaches. It returns the context to send the pipeline in and the
// function that ends the span with the pipeline's error; nil, and ctx as
// it was, when no call is traced.
func (p *Pipes) pipelineSpan(ctx context.Context, groups []*Work) (context.Context, func(error)) {
	var parent *trace.Span
	var links []trace.Link
	// A group that decides nothing is no call of its own: the undo, the
	// refund or the expiry a call sends after its answer (SendAside), or
	// a clock's TIME.
	calls, decisions, commands := 0, 0, 0
	for _, g := range groups {
		if g.Decisions > 0 {
			calls++
		}
		decisions += g.Decisions
		commands += len(g.Cmds)
		switch {
		case g.Caller == nil:
		case parent == nil:
			parent = g.Caller
		case (*g.Caller).SpanContext().SpanID() != (*parent).SpanContext().SpanID():
			links = append(links, trace.Link{SpanContext: (*g.Caller).SpanContext()})
		}
	}
	if parent == nil {
		return ctx, nil
	}
	ctx, span := p.tracer.Start(trace.ContextWithSpan(ctx, *parent), PipelineSpanName,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithLinks(links...),
		trace.WithAttributes(attrDBSystem, attrCalls.Int(calls), attrDecisions.Int(decisions), attrCommands.Int(commands)))
	back := trace.Link{SpanContext: span.SpanContext()}
	for _, g := range groups {
		// A call's own work sent aside carries its span too: no link of
		// a span to its own child.
		if g.Caller != nil && (*g.Caller).SpanContext().SpanID() != (*parent).SpanContext().SpanID() {
			(*g.Caller).AddLink(back)
		}
	}
	return ctx, func(err error) {
		if err != nil && !errors.Is(err, redis.Nil) {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}
