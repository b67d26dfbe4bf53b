package rls

import (
	"math"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/envoy-rls/envoy-rls/internal/metrics"
)

// respond turns a settled plan into Envoy's answer, counts each
// descriptor's outcome, and returns how long a leaky bucket asks the answer
// to wait: nothing when the request is refused anyway.
func (s *Service) respond(p *plan, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, time.Duration) {
	over := p.overall()
	// A service-wide shadow mode that leaves the statuses as decided
	// (ShadowOverallCode) turns only the overall code to OK.
	refused := over && !s.overallShadow
	resp := &rlsv3.RateLimitResponse{
		OverallCode: rlsv3.RateLimitResponse_OK,
		Statuses:    make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(p.descs)),
	}
	if refused {
		resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
	}
	if over && !refused {
		s.metrics.GlobalShadow()
	}
	domainLabel := metrics.UnknownDomain
	if p.known {
		domainLabel = p.domain
	}
	var delay time.Duration
	for i := range p.descs {
		d := &p.descs[i]
		v := &d.verdict
		resp.Statuses[i] = statusOf(v)
		rec := metrics.Decision{Domain: domainLabel, Rule: d.ruleLabel(), Outcome: v.outcome, Entries: d.entries}
		rec.Stats = statsHit(&rec.Hit, p, d) // stats.go
		s.metrics.Decided(&rec)
		delay = max(delay, v.delay)
	}
	if s.dynamicMetadata {
		resp.DynamicMetadata = dynamicMetadata(p, req) // metadata.go
	}
	if p.warns {
		s.warn(p, resp, domainLabel) // warn.go
	}
	if len(p.tried) > 0 {
		s.countCandidates(p, domainLabel) // candidate.go
	}
	for _, h := range s.headers {
		h.add(resp, p, refused) // headers.go
	}
	if over {
		delay = 0
	}
	return resp, delay
}

// statusOf renders one descriptor's verdict: current_limit for every
// descriptor with a limit, limit_remaining, and duration_until_reset where
// the store's state is known.
func statusOf(v *verdict) *rlsv3.RateLimitResponse_DescriptorStatus {
	st := &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
	if v.over {
		st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
	}
	if v.outcome == metrics.OutcomeUnlimited {
		// Nothing limits it: as much as the field holds remains, as
		// envoyproxy/ratelimit reports.
		st.LimitRemaining = math.MaxUint32
	}
	if v.rule == nil {
		return st
	}
	st.CurrentLimit = currentLimit(v.rule)
	st.LimitRemaining = clampUint32(v.remaining)
	if v.known {
		st.DurationUntilReset = durationpb.New(v.wait)
	}
	return st
}
