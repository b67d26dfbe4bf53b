package rls

import (
	"context"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// What a call's span is told, when Options.Tracer is set: what the
// request asked of which domain and what it was answered, never a
// descriptor's value.
var (
	attrDomain      = attribute.Key("rls.domain")
	attrDescriptors = attribute.Key("rls.descriptors")
	attrOverallCode = attribute.Key("rls.overall_code")
	attrRule        = attribute.Key("rls.rule")
	attrHits        = attribute.Key("rls.hits")
	attrFailedHits  = attribute.Key("rls.failed_hits")
)

// StoreSpanName names the span of a call's store call.
const StoreSpanName = "limits.Store/Decide"

// annotateCall gives the call's span (the server span, if it records) the
// request's domain and number of descriptors, and the overall code of the
// answer if there is one.
func annotateCall(ctx context.Context, req *rlsv3.RateLimitRequest, resp *rlsv3.RateLimitResponse) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attrDomain.String(req.GetDomain()), attrDescriptors.Int(len(req.GetDescriptors())))
	if resp != nil {
		span.SetAttributes(attrOverallCode.String(resp.GetOverallCode().String()))
	}
}

// annotateRule gives the call's span the name of the limit that decided
// the answer: on a refusal, the refused descriptor's that the headers
// report (plan.mostRestrictive), else the one with the least remaining;
// none when no limit applies.
func annotateRule(ctx context.Context, p *plan, resp *rlsv3.RateLimitResponse) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	if d := p.mostRestrictive(resp.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT); d != nil {
		span.SetAttributes(attrRule.String(d.ruleLabel()))
	}
}

// tracedCallStore is callStore in a span of its own under the call's,
// when the call's records: the hits sent and how many of them failed.
// The store's own spans (a Redis pipeline) hang under it, or link to it
// when they serve several calls.
func (s *Service) tracedCallStore(ctx context.Context, t0 time.Time, p *plan) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		s.callStore(ctx, t0, p.hits, p.results)
		return
	}
	ctx, span := s.tracer.Start(ctx, StoreSpanName, trace.WithAttributes(attrHits.Int(len(p.hits))))
	defer span.End()
	sctx := s.storeContext(ctx, t0)
	if sctx != ctx {
		// The bound shared with other calls, holding this call's span for
		// the store's own spans to hang under.
		sctx = trace.ContextWithSpan(sctx, span)
	}
	s.store.Decide(sctx, p.hits, p.results)
	failed := 0
	var first error
	for i := range p.results {
		if err := p.results[i].Err; err != nil {
			if first == nil {
				first = err
			}
			failed++
		}
	}
	if failed > 0 {
		span.SetAttributes(attrFailedHits.Int(failed))
		span.SetStatus(codes.Error, first.Error())
	}
}
