package rls

import (
	"context"
	"errors"
	"fmt"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// Usage is what a tenant may read of one descriptor: each limit that
// would decide a request of it, with what is used, held and left. It is
// read with the plan and the peek Explain makes (cost 0: nothing is
// consumed), so it says what a request with this descriptor and
// hits_addend 0 would be answered, without the config's insides
// (store keys, files, lines) that Explain shows an operator.
type Usage struct {
	Domain  string           `json:"domain"`
	Entries []ExplainedEntry `json:"descriptor"`
	// Unlimited is set when the descriptor's limit is `unlimited: true`.
	Unlimited bool `json:"unlimited,omitempty"`
	// Limits are the limits that would decide the descriptor, in config
	// order; empty when none does (no node with a limit matches, or it is
	// unlimited).
	Limits []UsedLimit `json:"limits"`
}

// UsedLimit is one limit of a Usage.
type UsedLimit struct {
	// Name is the limit's name, else its node's config path.
	Name  string    `json:"name"`
	Limit UsageRule `json:"limit"`
	// Used is Limit.Capacity less Remaining: hits counted in the window,
	// tokens taken from the bucket, requests queued, slots held. Held
	// costs are part of it.
	Used int64 `json:"used"`
	// Held is the cost that unsettled holds take of Used, and Holds how
	// many holds those are; both 0 when HeldKnown is false, which means
	// the store cannot tell (it does not read holds), not that none is
	// held.
	Held      int64 `json:"held"`
	Holds     int64 `json:"holds"`
	HeldKnown bool  `json:"held_known"`
	// Remaining is how many requests of cost 1 would be allowed now.
	Remaining int64 `json:"remaining"`
	// Allowed reports whether a request of cost 1 would be allowed now.
	Allowed bool `json:"allowed"`
	// ResetSeconds is, when allowed, the wait until Remaining is back at
	// the capacity; otherwise the wait until a request would be allowed.
	ResetSeconds float64 `json:"reset_seconds"`
	// WarnAt is the limit's warn_at, and WarnReached the highest of its
	// thresholds that Used has reached (0 for none).
	WarnAt      []float64 `json:"warn_at,omitempty"`
	WarnReached float64   `json:"warn_reached,omitempty"`
}

// UsageRule is what a limit allows.
type UsageRule struct {
	Algorithm string `json:"algorithm"`
	// Requests is requests_per_unit: hits per period, or slots of a
	// concurrency limit.
	Requests int64 `json:"requests"`
	// PeriodSeconds is the length of the window the limit counts in now
	// (limits.WindowLen); a concurrency limit's lease.
	PeriodSeconds float64 `json:"period_seconds"`
	// Capacity is the most Remaining can be: Requests, or a bucket's
	// burst.
	Capacity int64 `json:"capacity"`
}

// Errors of Usage beside checkOne's: a domain no limits file configures,
// and a store that could not be read.
var (
	ErrUnknownDomain = errors.New("unknown domain")
	ErrStoreRead     = errors.New("the store could not be read")
)

// Usage reads what is used and left of every limit that would decide one
// descriptor of domain, consuming nothing. Its errors: checkOne's (the
// request out of bounds, ErrNotLoaded), ErrUnknownDomain, and
// ErrStoreRead wrapping the store's.
func (s *Service) Usage(ctx context.Context, domain string, entries []descriptors.Entry) (Usage, error) {
	ix, err := s.checkOne(domain, entries)
	if err != nil {
		return Usage{}, err
	}
	if !ix.Known(domain) {
		return Usage{}, fmt.Errorf("%w %q", ErrUnknownDomain, domain)
	}
	p, err := s.peekOne(ctx, ix, domain, entries) // explain.go
	if err != nil {
		return Usage{}, err
	}
	defer p.release()
	d := &p.descs[0]
	u := Usage{Domain: domain, Unlimited: d.unlimited, Limits: []UsedLimit{}}
	u.Entries = explainedEntries(entries)
	if !d.decided() {
		return u, nil
	}
	if err := firstError(d.results); err != nil {
		return Usage{}, fmt.Errorf("%w: %v", ErrStoreRead, err)
	}
	for j := range d.rules {
		l, err := s.usedLimit(ctx, p, d, j)
		if err != nil {
			return Usage{}, err
		}
		u.Limits = append(u.Limits, l)
	}
	return u, nil
}

// usedLimit reads limit j of d, a descriptor of the settled plan p.
func (s *Service) usedLimit(ctx context.Context, p *plan, d *planned, j int) (UsedLimit, error) {
	r, res := d.rules[j], d.results[j]
	now := p.now.UnixMicro()
	capacity := r.Limit.Capacity()
	l := UsedLimit{
		Name: ruleName(d, r),
		Limit: UsageRule{
			Algorithm:     r.Limit.Algorithm.String(),
			Requests:      r.Limit.Requests,
			PeriodSeconds: limits.WindowLen(r.Limit, now).Seconds(),
			Capacity:      capacity,
		},
		Remaining:    res.Remaining,
		Allowed:      res.Allowed,
		ResetSeconds: d.wait(j, now).Seconds(),
		WarnAt:       r.WarnAt,
	}
	if used, _, ok := d.usage(j); ok {
		l.Used = used
		l.WarnReached = reached(r.WarnAt, used, capacity)
	}
	if hr, ok := s.store.(limits.HoldReader); ok {
		cost, holds, err := hr.Held(ctx, d.hits[j])
		if err != nil {
			return l, fmt.Errorf("%w: %v", ErrStoreRead, err)
		}
		l.Held, l.Holds, l.HeldKnown = cost, holds, true
	}
	return l, nil
}
