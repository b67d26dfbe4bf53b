package config

import (
	"slices"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// A concurrency limit (algorithm: concurrency) counts requests in flight:
// requests_per_unit is its slots and lease the longest a slot is held
// (DefaultLease when unset). It has no unit: it counts what is held now,
// not hits per period, so a unit or unit_multiplier beside it is refused
// rather than silently ignored; so are a burst and the modifiers' fields
// that say why concurrency takes none (limits.Field.Without). count_refused, when the
// rule sets it, makes a refused request hold its slot until its release,
// as Envoy sends a release for refused requests too; the -count-refused
// default does not apply.

// DefaultLease is a concurrency limit's lease when the rule gives none:
// longer than most requests take, short enough that what a lost release
// leaks comes back soon.
const DefaultLease = 30 * time.Second

// The bounds of lease: a millisecond is Redis's resolution of a key's
// TTL; a day is far longer than any request should be in flight.
const (
	minLease = time.Millisecond
	maxLease = 24 * time.Hour
)

// leaseOnly refuses a lease on a rule whose algorithm is not concurrency.
func (v validator) leaseOnly(raw *rawRule, rf ruleFields) error {
	if raw.lease.set && rf.algorithm != limits.Concurrency {
		return raw.lease.at.nameErrorf("%s takes no lease (only algorithm: concurrency does)", rf.algorithm)
	}
	return nil
}

// concurrencyLimit sets r's limit from the fields of a concurrency rule:
// requests_per_unit (the slots) is needed, lease is parsed and bounded,
// and unit, unit_multiplier and burst are refused.
func (v validator) concurrencyLimit(r *Rule, raw *rawRule, _ ruleFields) error {
	// The modifiers' fields are checked the table's last modifier first,
	// the order these checks had when each was written here by hand.
	ms := slices.Clone(limits.Modifiers)
	slices.Reverse(ms)
	if f, ok := firstGiven(append([]given{
		presence(raw.unit, "unit (a concurrency limit counts the requests in flight, not hits per unit; lease bounds how long a slot is held)"),
		presence(raw.unitMultiplier, "unit_multiplier (a concurrency limit has no unit; lease bounds how long a slot is held)"),
		presence(raw.burst, "burst (its slots are requests_per_unit)"),
	}, raw.kindsGiven(ms, func(f limits.Field) string { return f.Without[limits.Concurrency] })...)...); ok {
		return f.at.nameErrorf("concurrency takes no %s", f.what)
	}
	if !raw.requestsPerUnit.set {
		return raw.at.errorf("has no requests_per_unit (the number of slots)")
	}
	lease := DefaultLease
	if f := raw.lease; f.set {
		d, err := time.ParseDuration(f.v)
		switch {
		case err != nil:
			return f.at.errorf("want a duration such as 30s or 2m, got %q", f.v)
		case d < minLease:
			return f.at.errorf("must be at least %s, got %s", minLease, d)
		case d > maxLease:
			return f.at.errorf("must be at most %s, got %s", maxLease, d)
		}
		lease = d
	}
	// The -count-refused default (envoyproxy/ratelimit's counting) does
	// not apply: whether a refused request holds a slot depends on whether
	// its release comes, which only the rule's author knows.
	r.CountRefused = raw.countRefused.set && raw.countRefused.v
	r.Limit = limits.Limit{
		Algorithm:    limits.Concurrency,
		Requests:     raw.requestsPerUnit.v,
		Period:       lease,
		CountRefused: r.CountRefused,
	}
	return nil
}
