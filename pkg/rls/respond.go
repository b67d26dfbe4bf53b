package rls

import (
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/envoy-rls/envoy-rls/pkg/metrics"
)

// respond turns a settled plan into Envoy's answer, counts each
// descriptor's outcome, and returns how long a leaky bucket asks the answer
// to wait: nothing when the request is refused anyway.
func (s *Service) respond(p *plan) (*rlsv3.RateLimitResponse, time.Duration) {
	over := p.overall()
	resp := &rlsv3.RateLimitResponse{
		OverallCode: rlsv3.RateLimitResponse_OK,
		Statuses:    make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(p.descs)),
	}
	if over {
		resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
	}
	domainLabel := metrics.UnknownDomain
	if p.known {
		domainLabel = p.domain
	}
	var quotaViolations []any
	var delay time.Duration
	for i := range p.descs {
		d := &p.descs[i]
		v := &d.verdict
		resp.Statuses[i] = statusOf(v)
		s.metrics.Decision(domainLabel, d.ruleLabel(), v.outcome)
		if v.outcome == metrics.OutcomeQuotaOver {
			quotaViolations = append(quotaViolations, float64(i))
		}
		delay = max(delay, v.delay)
	}
	if quotaViolations != nil {
		md, err := structpb.NewStruct(map[string]any{
			"domain":              p.domain,
			"quotaModeEnabled":    true,
			"quotaModeViolations": quotaViolations,
		})
		if err == nil {
			resp.DynamicMetadata = md
		}
	}
	s.addHeaders(resp, p, over) // -response-headers, -json-429-body (headers.go)
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
