package rls

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/envoy-rls/envoy-rls/internal/metrics"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// In a domain that declares holds (config.Holds), a descriptor's entries
// of the holds' id and settle keys name the request and the call, not what
// is counted: the planner takes them out before the walk and the key, so
// that the reserve [api_key=t1, request_id=r7] and the settle [api_key=t1,
// request_id=r7, settle=true] both count on api_key=t1's counters, and
// puts what they say in the Hold of every hit of the descriptor. A domain
// without holds is planned as before, entry for entry.

// holdEntry reports whether key is one of holds h's keys, recording what
// the entry says in hold: the id (the first non-empty one, should the
// descriptor repeat the key), or that the descriptor settles.
func holdEntry(h *config.Holds, hold *limits.Hold, key, value string) bool {
	switch key {
	case h.ID:
		if hold.ID == "" {
			hold.ID = value
		}
		return true
	case h.Settle:
		hold.Settle = true
		return true
	}
	return false
}

// takeHold takes the entries of the domain's holds out of p.entries[lo:],
// the descriptor just appended, and returns its hold: the zero Hold in a
// domain without holds (p.entries untouched), else one with the domain's
// lease. An id longer than limits.MaxHoldID is an error, the request's
// fault.
func (p *plan) takeHold(lo int) (limits.Hold, error) {
	if p.holds == nil {
		return limits.Hold{}, nil
	}
	hold := limits.Hold{Lease: p.holds.Lease}
	kept := p.entries[:lo]
	for _, e := range p.entries[lo:] {
		if !holdEntry(p.holds, &hold, e.Key, e.Value) {
			kept = append(kept, e)
		}
	}
	clear(p.entries[len(kept):])
	p.entries = kept
	return hold, limits.CheckHold(hold)
}

// holdInvalid is the gRPC error for descriptor i, whose hold err refuses;
// it counts it.
func (s *Service) holdInvalid(p *plan, i int, err error) error {
	s.metrics.Hold(p.domain, metrics.HoldInvalid)
	return status.Errorf(codes.InvalidArgument, "descriptor %d: %v", i, err)
}

// countHolds counts what each descriptor of p, in a domain with holds, did
// with its hold, once the store (or the failure pass) has decided it: the
// outcome of its first hit, which every hit of a joint run shares (a
// descriptor decided with an earlier one's counters is counted there), or
// a settle that named no id. A descriptor without an id, or decided by its
// failure mode, holds nothing and is not counted.
func (s *Service) countHolds(p *plan) {
	if p.holds == nil {
		return
	}
	for i := range p.descs {
		d := &p.descs[i]
		switch {
		case d.hold.ID == "" && d.hold.Settle:
			s.metrics.Hold(p.domain, metrics.HoldSettleWithoutID)
		case d.hold.ID == "" || len(d.results) == 0:
		case d.results[0].Hold != limits.HoldNone:
			s.metrics.Hold(p.domain, d.results[0].Hold.String())
		}
	}
}

// settles reports whether d settles a hold, or would if it had an id: such
// a call is Envoy's stream-done call, whose answer nobody waits for, so a
// leaky bucket never delays it.
func (d *planned) settles() bool { return d.hold.Settle }
