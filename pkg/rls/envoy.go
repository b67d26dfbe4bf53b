package rls

import (
	"errors"
	"fmt"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// This file holds the conversions between Envoy's protobuf and the
// service's own types, in both directions: what a request asks (its
// validation, a descriptor's cost, a limit override) and how a limit is
// reported back (current_limit).

// cost is c of docs/semantics.md: the request's hits_addend (0 means 1), unless
// the descriptor sets its own (where 0 is a peek); negative when the
// descriptor asks for a refund.
func cost(req *rlsv3.RateLimitRequest, d *ratelimitv3.RateLimitDescriptor) int64 {
	c := int64(req.GetHitsAddend())
	if c == 0 {
		c = 1
	}
	if h := d.GetHitsAddend(); h != nil {
		// Anything above what any limit can hold is refused the same way;
		// clamping keeps the arithmetic far from overflow.
		c = int64(min(h.GetValue(), uint64(limits.MaxRequests)+1))
	}
	if d.GetIsNegativeHits() {
		c = -c
	}
	return c
}

// overrideRule applies Envoy's descriptor limit override: its rate and
// period, with the algorithm, burst, name and failure mode of the matched
// rule, or the defaults.
func overrideRule(matched *config.Rule, o *ratelimitv3.RateLimitDescriptor_RateLimitOverride) (*config.Rule, error) {
	unit, ok := overrideUnits[o.GetUnit()]
	if !ok {
		return nil, fmt.Errorf("limit override has unit %s", o.GetUnit())
	}
	mult := int64(1)
	if m := o.GetUnitMultiplier(); m != nil && m.GetValue() > 0 {
		mult = int64(m.GetValue())
	}
	r := &config.Rule{Unit: unit, UnitMultiplier: mult}
	if matched != nil {
		r.Name = matched.Name
		r.Limit.Algorithm = matched.Limit.Algorithm
		r.FailureMode = matched.FailureMode
		r.Replaces = matched.Replaces
		if matched.Limit.Burst != matched.Limit.Requests {
			r.Limit.Burst = matched.Limit.Burst
		}
	}
	r.Limit.Requests = int64(o.GetRequestsPerUnit())
	r.Limit.Period = unit.Duration() * time.Duration(mult)
	if err := r.Limit.Validate(); err != nil {
		return nil, fmt.Errorf("limit override: %w", err)
	}
	return r, nil
}

var overrideUnits = map[typev3.RateLimitUnit]config.Unit{
	typev3.RateLimitUnit_SECOND: config.Second,
	typev3.RateLimitUnit_MINUTE: config.Minute,
	typev3.RateLimitUnit_HOUR:   config.Hour,
	typev3.RateLimitUnit_DAY:    config.Day,
	typev3.RateLimitUnit_MONTH:  config.Month,
	typev3.RateLimitUnit_YEAR:   config.Year,
}

var responseUnits = [...]rlsv3.RateLimitResponse_RateLimit_Unit{
	config.UnitUnknown: rlsv3.RateLimitResponse_RateLimit_UNKNOWN,
	config.Second:      rlsv3.RateLimitResponse_RateLimit_SECOND,
	config.Minute:      rlsv3.RateLimitResponse_RateLimit_MINUTE,
	config.Hour:        rlsv3.RateLimitResponse_RateLimit_HOUR,
	config.Day:         rlsv3.RateLimitResponse_RateLimit_DAY,
	config.Week:        rlsv3.RateLimitResponse_RateLimit_WEEK,
	config.Month:       rlsv3.RateLimitResponse_RateLimit_MONTH,
	config.Year:        rlsv3.RateLimitResponse_RateLimit_YEAR,
}

// currentLimit reports a rule to Envoy. A period of k units is reported as
// requests_per_unit per unit with unit_multiplier k, the field recent Envoy
// APIs carry; older Envoys that ignore it read N per unit.
func currentLimit(r *config.Rule) *rlsv3.RateLimitResponse_RateLimit {
	cl := &rlsv3.RateLimitResponse_RateLimit{
		Name:            r.Name,
		RequestsPerUnit: clampUint32(r.Limit.Requests),
	}
	if int(r.Unit) < len(responseUnits) {
		cl.Unit = responseUnits[r.Unit]
	}
	if r.UnitMultiplier > 1 {
		cl.UnitMultiplier = wrapperspb.UInt32(uint32(min(r.UnitMultiplier, 1<<32-1)))
	}
	return cl
}

func clampUint32(v int64) uint32 {
	switch {
	case v < 0:
		return 0
	case v > 1<<32-1:
		return 1<<32 - 1
	}
	return uint32(v)
}

// validate refuses what no config can answer: an empty domain, no
// descriptors, an empty descriptor, sizes beyond the bounds, and a refund
// when refunds are refused (-negative-hits=false).
func (s *Service) validate(req *rlsv3.RateLimitRequest) error {
	if err := checkDomain(req.GetDomain()); err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	switch {
	case len(req.GetDescriptors()) == 0:
		return status.Error(codes.InvalidArgument, "rate limit descriptor list must not be empty")
	case len(req.GetDescriptors()) > MaxDescriptors:
		return status.Errorf(codes.InvalidArgument, "%d descriptors, above the maximum of %d", len(req.GetDescriptors()), MaxDescriptors)
	}
	for i, d := range req.GetDescriptors() {
		if err := checkEntries(i, len(d.GetEntries())); err != nil {
			return status.Error(codes.InvalidArgument, err.Error())
		}
		if s.refuseNegativeHits && d.GetIsNegativeHits() {
			return status.Errorf(codes.InvalidArgument, "descriptor %d: is_negative_hits is not accepted (-negative-hits=false)", i)
		}
	}
	return nil
}

// checkDomain and checkEntries are the bounds of a request that both the
// decision (validate) and Explain enforce, in the same words: Explain
// answers for the request of one descriptor, descriptor 0.
func checkDomain(domain string) error {
	if domain == "" {
		return errors.New("rate limit domain must not be empty")
	}
	return nil
}

// checkEntries checks the number of entries n of descriptor i.
func checkEntries(i, n int) error {
	switch {
	case n == 0:
		return fmt.Errorf("descriptor %d has no entries", i)
	case n > MaxEntries:
		return fmt.Errorf("descriptor %d has %d entries, above the maximum of %d", i, n, MaxEntries)
	}
	return nil
}
