package rls

import (
	"time"

	"github.com/envoy-rls/envoy-rls/internal/metrics"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// verdict is how one descriptor of a plan is answered, worked out once by
// settle from the plan and the store's results. The status, the headers,
// the metrics and Explain all read it.
type verdict struct {
	// outcome is the metrics' outcome label (metrics.Outcome*).
	outcome string
	// over reports that the descriptor's status is OVER_LIMIT.
	over bool
	// quota reports a descriptor in quota mode: its being over refuses the
	// request only when every quota-mode descriptor of it is over.
	quota bool
	// allowed reports that every limit allowed the hit, whatever the status
	// says (a shadow or quota refusal is answered OK but not allowed).
	allowed bool
	// rule is the limit the status reports; nil when none applies.
	rule *config.Rule
	// known reports that remaining and wait are the store's (or the local
	// fallback's) figures; false when the failure mode answered.
	known bool
	// remaining is the status's limit_remaining.
	remaining int64
	// wait is the status's duration_until_reset: on a refusal, the wait
	// until the same request would be allowed; on an allowed one, until
	// remaining is back at its maximum.
	wait time.Duration
	// window is the length of the window rule counts in at the plan's
	// instant (limits.WindowLen): its period, or the real length of the
	// window a modifier makes it count in (31 days in December).
	// RateLimit-Policy's w reports it.
	window time.Duration
	// delay is how long a leaky bucket asks an allowed hit to wait.
	delay time.Duration
	// local reports a refusal the over-limit cache answered, without the
	// store (limits.Result.Local).
	local bool
}

// settle works out every descriptor's verdict. It reads the plan and the
// results and nothing else: it counts no metric and writes no log, so that
// Explain can settle a plan too.
func (p *plan) settle(s *Service) {
	p.now = s.now()
	now := p.now.UnixMicro()
	for i := range p.descs {
		d := &p.descs[i]
		d.verdict = d.settle(s, now)
	}
}

func (d *planned) settle(s *Service, now int64) verdict {
	switch {
	case d.sameAs != nil:
		return d.sameAs.verdict
	case d.unlimited:
		return verdict{outcome: metrics.OutcomeUnlimited, allowed: true}
	case len(d.rules) == 0:
		return verdict{outcome: metrics.OutcomeNoLimit, allowed: true, quota: d.quota}
	case d.failure != nil:
		v := verdict{rule: d.failure.rule, quota: d.quota, window: limits.WindowLen(d.failure.rule.Limit, now)}
		v.outcome, v.over = failureOutcome(d.failure, s.statusShadow)
		v.allowed = !v.over
		if !v.over {
			// Failing open: nothing is known of the quota, so report it
			// whole rather than a remaining of 0 that would make clients
			// back off.
			v.remaining = d.failure.rule.Limit.Capacity()
		}
		return v
	}
	v := verdict{allowed: true, known: true, quota: d.quota}
	for _, r := range d.results {
		v.allowed = v.allowed && r.Allowed
	}
	rep := d.reported(v.allowed, now)
	v.rule = d.rules[rep]
	v.window = limits.WindowLen(v.rule.Limit, now)
	v.remaining = d.results[rep].Remaining
	v.local = !v.allowed && d.results[rep].Local
	v.wait = s.profile.Reset(v.rule.Limit, d.wait(rep, now))
	switch {
	case v.allowed:
		v.outcome = metrics.OutcomeOK
		for _, r := range d.results {
			v.delay = max(v.delay, r.Delay)
		}
		if d.settles() {
			v.delay = 0
		}
	case d.shadow:
		v.outcome = metrics.OutcomeShadowOver
	case d.quota:
		// A quota keeps its own status; whether it refuses the request is
		// the whole request's matter (plan.overall).
		v.outcome, v.over = metrics.OutcomeQuotaOver, true
	case d.neverFits(rep):
		v.outcome, v.over = metrics.OutcomeNeverFits, true
	default:
		v.outcome, v.over = metrics.OutcomeOverLimit, true
	}
	return v
}

// reported picks the limit a descriptor's status shows: on a refusal the
// refusing limit with the longest wait, otherwise the one with the least
// remaining (the first, on ties).
func (d *planned) reported(allowed bool, now int64) int {
	best := 0
	for j, r := range d.results {
		b := d.results[best]
		switch {
		case allowed && r.Remaining < b.Remaining:
			best = j
		case !allowed && !r.Allowed && (b.Allowed || d.wait(j, now) > d.wait(best, now)):
			best = j
		}
	}
	return best
}

// wait is the duration_until_reset of limit j: RetryAfter on a refusal,
// ResetAfter on an allowed hit. A hit that can never fit, and any hit of a
// block rule, has no wait after which it would be allowed; it is told to
// wait a whole window at least (its length at now; longer if the key needs
// longer to be full again), so that a client that obeys does not retry at
// once, and forever.
func (d *planned) wait(j int, now int64) time.Duration {
	r := d.results[j]
	switch {
	case r.Allowed:
		return r.ResetAfter
	case d.neverFits(j), d.rules[j].Limit.Blocks():
		return max(r.ResetAfter, limits.WindowLen(d.rules[j].Limit, now))
	}
	return r.RetryAfter
}

// neverFits reports whether the descriptor's cost is above what limit j
// can ever allow. A block rule allows nothing, but refuses as a limit
// does, not for the cost: it is over the limit.
func (d *planned) neverFits(j int) bool {
	l := d.rules[j].Limit
	return !l.Blocks() && d.cost > l.MaxCost()
}

// overall reports whether the request is refused: a descriptor over that
// is not in quota mode, or every quota-mode descriptor over (as
// envoyproxy/ratelimit decides since quotas came in: a request passes while
// any of its quotas has room).
func (p *plan) overall() bool {
	quotas, quotasOver := 0, 0
	for i := range p.descs {
		v := &p.descs[i].verdict
		switch {
		case v.quota:
			quotas++
			if v.over {
				quotasOver++
			}
		case v.over:
			return true
		}
	}
	return quotas > 0 && quotasOver == quotas
}

// mostRestrictive picks the descriptor the service's own headers describe,
// the one Envoy's x-ratelimit-* headers would: on a refusal, the refused
// descriptor with the longest wait (a known wait before an unknown one);
// otherwise the descriptor with a limit that has the least remaining. The
// first wins a tie; nil when no descriptor has a limit.
func (p *plan) mostRestrictive(over bool) *planned {
	var best *planned
	if over {
		for i := range p.descs {
			d := &p.descs[i]
			if !d.verdict.over || d.verdict.rule == nil {
				continue
			}
			if best == nil || d.verdict.knownWait() > best.verdict.knownWait() {
				best = d
			}
		}
		if best != nil {
			return best
		}
	}
	for i := range p.descs {
		d := &p.descs[i]
		if d.verdict.rule == nil {
			continue
		}
		if best == nil || d.verdict.remaining < best.verdict.remaining {
			best = d
		}
	}
	return best
}

// knownWait is the wait, or -1 when it is unknown, so that any known wait
// is preferred.
func (v verdict) knownWait() time.Duration {
	if !v.known {
		return -1
	}
	return v.wait
}

// ruleLabel names d's reported limit for metrics and logs; an unlimited
// descriptor is named by its limit too.
func (d *planned) ruleLabel() string {
	if d.verdict.rule == nil && d.unlimited {
		return ruleName(d, d.rules[0])
	}
	return ruleName(d, d.verdict.rule)
}

// ruleName names limit r of d for metrics and logs: its name, else the
// node's path, else "override" for Envoy's override; "" when d has neither.
func ruleName(d *planned, r *config.Rule) string {
	switch {
	case r != nil && r.Name != "":
		return r.Name
	case d.node != nil:
		return d.node.Path
	case r != nil:
		return "override"
	}
	return ""
}
