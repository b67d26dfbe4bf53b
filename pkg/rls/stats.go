package rls

import (
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/envoy-rls/envoy-rls/internal/metrics"
)

// What a descriptor's verdict gives envoyproxy/ratelimit's stats
// (metrics.RatelimitHit), recorded with the service's own in one
// metrics.Decision whether those stats are on or not.

// statsHit fills h with descriptor d of p's part in envoyproxy/ratelimit's
// stats, and reports whether it has one: not without a limit, unlimited, or
// a refund. A descriptor that shares its counters with an earlier one of
// the request is counted by that one, which carries both costs.
func statsHit(h *metrics.RatelimitHit, p *plan, d *planned) bool {
	if d.sameAs != nil || !d.decided() || d.cost < 0 {
		return false
	}
	v := &d.verdict
	*h = metrics.RatelimitHit{Domain: p.domain, Entries: d.entries, Path: d.path, Node: d.node, Hits: uint64(d.cost)}
	if v.known && v.rule != nil {
		h.Decided, h.Over, h.Local = true, !v.allowed, v.local
		h.Shadow = d.node != nil && d.node.Descriptor.ShadowMode
		h.Limit, h.Before, h.After = levels(v, d.cost)
	}
	return true
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

// errType is the kind envoyproxy/ratelimit's stats count a ShouldRateLimit
// call answered with err as: a store failure that failure mode error
// answers is its redis_error, a request the service refuses its
// service_error; "" for a call they do not count as failed. The calls
// themselves and their durations are counted around every gRPC method, as
// envoyproxy/ratelimit counts them.
func errType(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, errUnavailable):
		return metrics.ErrRedis
	case status.Code(err) == codes.InvalidArgument:
		return metrics.ErrService
	}
	return ""
}
