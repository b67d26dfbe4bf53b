package rls

import (
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/envoy-rls/envoy-rls/pkg/metrics"
)

// envoyproxy/ratelimit's stats (metrics.RatelimitHit): what each descriptor
// a limit applied to hands them, worked out from its verdict. Nothing here
// runs unless they are on.

// countStats counts descriptor d of p in envoyproxy/ratelimit's stats.
// Descriptors without a limit, unlimited ones and refunds have no stats
// there. A descriptor that shares its counters with an earlier one of the
// request is counted by that one, which carries both costs.
func (s *Service) countStats(p *plan, d *planned) {
	if !s.metrics.RatelimitOn() || d.sameAs != nil || !d.decided() || d.cost < 0 {
		return
	}
	v := &d.verdict
	h := metrics.RatelimitHit{Domain: p.domain, Entries: d.entries, Path: d.path, Node: d.node, Hits: uint64(d.cost)}
	if v.known && v.rule != nil {
		h.Decided, h.Over, h.Local = true, !v.allowed, v.local
		h.Shadow = d.node != nil && d.node.Descriptor.ShadowMode
		h.Limit, h.Before, h.After = levels(v, d.cost)
	}
	s.metrics.RatelimitHit(&h)
}

// levels are the limit's size and its count before and after a hit of cost,
// as a fixed window holds them, from what the verdict's limit has left. An
// allowed hit is in the count; a refused one is not, unless the limit
// counts refused hits. Then what was left is not known (it reads 0); the
// count is taken to have been at the limit already, which it was for any
// refused hit of cost 1.
func levels(v *verdict, cost int64) (limit, before, after uint64) {
	n := v.rule.Limit.Capacity()
	left := min(max(v.remaining, 0), n)
	var b, a int64
	switch {
	case v.allowed:
		a = n - left
		b = max(a-cost, 0)
	case v.rule.Limit.CountRefused && cost > 0:
		b = n
		a = b + cost
	default:
		b = n - left
		a = b + cost
	}
	return uint64(n), uint64(b), uint64(a)
}

// countError counts a ShouldRateLimit call answered with err in
// envoyproxy/ratelimit's stats: a store failure that failure mode error
// answers is its redis_error, a request the service refuses its
// service_error. The calls themselves and their durations are counted
// around every gRPC method, as envoyproxy/ratelimit counts them.
func (s *Service) countError(err error) {
	if err == nil || !s.metrics.RatelimitOn() {
		return
	}
	switch {
	case errors.Is(err, errUnavailable):
		s.metrics.RatelimitError(metrics.ErrRedis)
	case status.Code(err) == codes.InvalidArgument:
		s.metrics.RatelimitError(metrics.ErrService)
	}
}
