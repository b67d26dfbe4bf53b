package config

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/envoy-rls/envoy-rls/internal/suggest"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// validator applies the rules of the format to a raw model, from any
// source. Its errors have no File: the source's entry point adds it.
type validator struct {
	// maxDelay bounds a leaky bucket's worst wait (-max-delay).
	maxDelay time.Duration
	// algorithm is the algorithm of a limit that names none, and
	// countRefused the count_refused of one that does not set it.
	algorithm    limits.Algorithm
	countRefused bool
	// rawHolds is the holds of the domain being validated, whose keys no
	// descriptor may have; nil when it has none.
	rawHolds *rawHolds
}

// domain validates a whole raw domain into a Domain named file.
func (v validator) domain(file string, r *rawDomain) (*Domain, error) {
	if !r.name.set {
		return nil, r.at.wordErrorf("", "no domain")
	}
	if r.name.v == "" {
		return nil, r.name.at.errorf("empty")
	}
	holds, err := v.holds(r.holds)
	if err != nil {
		return nil, err
	}
	v.rawHolds = r.holds.v
	ds, err := v.descriptors(r.descriptors, r.name.v, 1)
	if err != nil {
		return nil, err
	}
	return &Domain{Name: r.name.v, File: file, Descriptors: ds, Holds: holds}, nil
}

// compositeKey is a descriptor's name in errors and in Lines, as
// envoyproxy/ratelimit writes it: parent.key_value, or parent.key without a
// value.
func compositeKey(parent, key, value string) string {
	if value == "" {
		return parent + "." + key
	}
	return parent + "." + key + "_" + value
}

// MaxDepth is how deep descriptors may nest: the most entries a request's
// descriptor may have (rls.MaxEntries), since each entry takes a walk one
// level down. A node deeper than that is one no request can reach, and a
// tree of thousands of levels would only hold memory, so it is refused.
const MaxDepth = 32

// descriptors validates the descriptors under parent (a domain or a
// composite key), at depth (1 for a domain's), keeping their order:
// wildcards are tried in that order.
func (v validator) descriptors(raws []*rawDescriptor, parent string, depth int) ([]*Descriptor, error) {
	var ds []*Descriptor
	first := map[[2]string]pos{}
	for _, r := range raws {
		if depth > MaxDepth {
			return nil, r.at.wordErrorf(compositeKey(parent, r.key.v, r.value),
				"descriptor nested %d levels deep, deeper than the %d entries a request's descriptor may have: no request reaches it", depth, MaxDepth)
		}
		d, err := v.descriptor(r, parent, depth)
		if err != nil {
			return nil, err
		}
		id := [2]string{d.Key, d.Value}
		if at, dup := first[id]; dup {
			return nil, r.at.wordErrorf(compositeKey(parent, d.Key, d.Value), "duplicate descriptor, first at %s", at)
		}
		first[id] = r.at
		ds = append(ds, d)
	}
	return ds, nil
}

func (v validator) descriptor(r *rawDescriptor, parent string, depth int) (*Descriptor, error) {
	if !r.key.set {
		return nil, r.at.wordErrorf("", "descriptor has no key")
	}
	if r.key.v == "" {
		return nil, r.key.at.errorf("empty")
	}
	if err := v.holdKey(r.key); err != nil {
		return nil, err
	}
	d := &Descriptor{
		Key: r.key.v, Value: r.value,
		ShadowMode: r.shadowMode, QuotaMode: r.quotaMode, DetailedMetric: r.detailedMetric,
		ValueToMetric: r.valueToMetric, ShareThreshold: r.shareThreshold,
		Metadata: r.metadata,
		Line:     r.at.line,
	}
	one, many := r.rateLimit, r.rateLimits
	switch {
	case one.set && many.set:
		first, second := one.at, many.at
		if second.key < first.key {
			first, second = second, first
		}
		return nil, second.nameErrorf("cannot be used together with %s (%s)", first.name, pos{line: first.key, path: first.path})
	case one.set:
		rule, err := v.rule(one.v, false)
		if err != nil {
			return nil, err
		}
		d.Rules = []*Rule{rule}
	case many.set:
		rules, err := v.rules(many)
		if err != nil {
			return nil, err
		}
		d.Rules = rules
	}
	var err error
	if d.Descriptors, err = v.descriptors(r.descriptors, compositeKey(parent, d.Key, d.Value), depth+1); err != nil {
		return nil, err
	}
	return d, nil
}

// rules validates a rate_limits list: limits that must all allow a request,
// so none is unlimited, and no two count the same way (algorithm,
// requests, period and burst), since the second would change nothing.
func (v validator) rules(list field[[]*rawRule]) ([]*Rule, error) {
	if len(list.v) == 0 {
		return nil, list.at.errorf("empty list")
	}
	first := map[limits.Limit]pos{}
	var rules []*Rule
	for _, raw := range list.v {
		r, err := v.rule(raw, true)
		if err != nil {
			return nil, err
		}
		l := r.Limit
		id := l.Counting()
		if at, dup := first[id]; dup {
			l.CountRefused = false
			return nil, raw.at.errorf("duplicate limit %s, first at %s (the limits of a list must differ in algorithm, requests_per_unit, period or burst)", l, at)
		}
		first[id] = pos{line: raw.line, path: raw.at.path}
		rules = append(rules, r)
	}
	return rules, nil
}

var (
	unitChoice        = choiceOf(func(i int) string { return Unit(i).String() }, "unit(")
	algorithmChoice   = choiceOf(func(i int) string { return limits.Algorithm(i).String() }, "algorithm(")
	failureModeChoice = choiceOf(func(i int) string { return FailureMode(i).String() }, "failure_mode(")
)

// choice is the names a field takes (unit, algorithm, failure_mode).
type choice struct{ names []string }

// choiceOf lists name(0), name(1), … up to the first name starting with
// end ("algorithm(" for an out-of-range Algorithm), skipping "default" and
// "unknown", the zero values that no file can name.
func choiceOf(name func(int) string, end string) choice {
	var c choice
	for i := 0; i < 256; i++ {
		s := name(i)
		if strings.HasPrefix(s, end) {
			break
		}
		if s != "default" && s != "unknown" {
			c.names = append(c.names, s)
		}
	}
	return c
}

// want is "a, b or c".
func (c choice) want() string {
	if len(c.names) < 2 {
		return strings.Join(c.names, "")
	}
	return strings.Join(c.names[:len(c.names)-1], ", ") + " or " + c.names[len(c.names)-1]
}

// refuse is the error of f, none of c's names: what was wanted, and the
// name a typo most likely meant (sliding-window, minutes), as an unknown
// field gets.
func (c choice) refuse(f field[string]) *Error {
	return f.at.errorf("%s", suggest.DidYouMean(fmt.Sprintf("want %s, got %q", c.want(), f.v), f.v, c.names))
}

// rule validates one rate limit body, an item of a rate_limits list when
// inList. An unlimited rule has a zero Limit, Unit and UnitMultiplier; any
// other has Limit validated, Burst set to requests_per_unit for a token
// bucket that does not give one (0 for a leaky bucket), Limit.CountRefused
// set to CountRefused, UnitMultiplier at least 1, and, for a leaky bucket,
// a worst wait within v.maxDelay.
func (v validator) rule(raw *rawRule, inList bool) (*Rule, error) {
	r := &Rule{
		Name:         raw.name,
		Unlimited:    raw.unlimited.v,
		CountRefused: v.countRefused,
		Line:         raw.line,
	}
	if raw.countRefused.set {
		r.CountRefused = raw.countRefused.v
	}
	f, err := v.ruleFields(r, raw)
	if err != nil {
		return nil, err
	}
	if r.Unlimited {
		return v.unlimitedRule(r, raw, inList)
	}
	if err := v.leaseOnly(raw, f); err != nil {
		return nil, err
	}
	limit := v.limit
	if f.algorithm == limits.Concurrency {
		limit = v.concurrencyLimit
	}
	if err := limit(r, raw, f); err != nil {
		return nil, err
	}
	// The modifiers' fields are checked as they were written, then the
	// limit they make.
	fields := raw.ruleFields(r.Unit, r.UnitMultiplier)
	for _, m := range limits.Modifiers {
		if err := m.Build(&r.Limit, fields); err != nil {
			return nil, fieldError(raw, err)
		}
	}
	if err := r.Limit.Validate(); err != nil {
		return nil, fieldError(raw, err)
	}
	if err := v.checkDelay(r, raw); err != nil {
		return nil, err
	}
	if r.WarnAt, err = v.warnAt(r, raw); err != nil {
		return nil, err
	}
	if r.Candidate, err = v.candidate(r, raw); err != nil {
		return nil, err
	}
	return r, nil
}

// fieldError points at the field a *limits.FieldError names when the rule
// sets it (a defaulted burst is the rule's requests_per_unit), else at the
// body.
func fieldError(raw *rawRule, err error) error {
	if fe, ok := errors.AsType[*limits.FieldError](err); ok {
		if at, set := raw.field(fe.Field); set {
			if fe.AtName {
				return at.nameErrorf("%s", fe.Msg)
			}
			return at.errorf("%s", fe.Msg)
		}
	}
	return raw.at.errorf("%s", err)
}

// ruleFields are a rule's fields parsed, before they make a limit.
type ruleFields struct {
	unit       Unit
	algorithm  limits.Algorithm
	multiplier int64
}

// ruleFields parses each field of raw that is set, alone: the unit, the
// algorithm (a modifier's own for a rule that names none and has one,
// limits.DefaultAlgorithm, else v's default), the multiplier (1 when
// unset), the bounds of requests_per_unit and burst; and sets r's failure
// mode and replaces.
func (v validator) ruleFields(r *Rule, raw *rawRule) (ruleFields, error) {
	rf := ruleFields{algorithm: v.algorithm, multiplier: 1}
	var err error
	if f := raw.requestsPerUnit; f.set {
		// 0 is a block rule, envoyproxy/ratelimit's: every request refused.
		if err := bounds(f, 0); err != nil {
			return rf, err
		}
	}
	if f := raw.unit; f.set {
		if rf.unit, err = ParseUnit(f.v); err != nil {
			return rf, unitChoice.refuse(f)
		}
	}
	if f := raw.algorithm; f.set {
		if rf.algorithm, err = limits.ParseAlgorithm(f.v); err != nil {
			return rf, algorithmChoice.refuse(f)
		}
	} else if a, ok := limits.DefaultAlgorithm(raw.ruleFields(rf.unit, rf.multiplier)); ok {
		rf.algorithm = a
	}
	if f := raw.burst; f.set {
		if err := bounds(f, 0); err != nil {
			return rf, err
		}
	}
	if f := raw.unitMultiplier; f.set {
		if rf.multiplier = f.v; rf.multiplier < 1 {
			return rf, f.at.errorf("must be at least 1, got %d", rf.multiplier)
		}
	}
	if f := raw.failureMode; f.set {
		if r.FailureMode, err = ParseFailureMode(f.v); err != nil {
			return rf, failureModeChoice.refuse(f)
		}
	}
	for _, name := range raw.replaces {
		if name.v == "" {
			return rf, name.at.errorf("entry without a name")
		}
		if name.v == r.Name {
			return rf, name.at.errorf("cannot replace the limit's own name %q", name.v)
		}
		r.Replaces = append(r.Replaces, name.v)
	}
	return rf, nil
}

// unlimitedRule checks an unlimited rule: not in a rate_limits list, and
// with nothing beside it that a limit would use.
func (v validator) unlimitedRule(r *Rule, raw *rawRule, inList bool) (*Rule, error) {
	if inList {
		return nil, raw.unlimited.at.errorf("not allowed in a rate_limits list; to make the descriptor unlimited, use rate_limit: {unlimited: true} instead of the list")
	}
	// requests_per_unit beside unlimited is ignored, as
	// envoyproxy/ratelimit ignores it, so that its files load unchanged;
	// everything else would be a limit that silently does nothing.
	gs := []given{
		presence(raw.unit, "a unit"),
		presence(raw.unitMultiplier, "a unit_multiplier"),
		presence(raw.algorithm, "an algorithm"),
		presence(raw.burst, "a burst"),
		presence(raw.failureMode, "a failure_mode"),
		presence(raw.countRefused, "count_refused"),
	}
	gs = append(gs, raw.kindsGiven(limits.Modifiers, nil)...)
	if f, ok := firstGiven(append(gs, presence(raw.lease, "a lease"), presence(raw.warnAt, "warn_at"),
		presence(raw.candidate, "a candidate (it refuses nothing, so there is nothing to try a limit against)"))...); ok {
		return nil, f.at.nameErrorf("unlimited with %s", f.what)
	}
	return r, nil
}

// limit sets r's unit, multiplier and limit from its fields: a unit and
// requests_per_unit are needed, the period is bounded, and a burst is a
// token or leaky bucket's only (a token bucket's defaults to
// requests_per_unit).
func (v validator) limit(r *Rule, raw *rawRule, rf ruleFields) error {
	for _, f := range []struct {
		name string
		set  bool
	}{{"unit", raw.unit.set}, {"requests_per_unit", raw.requestsPerUnit.set}} {
		if !f.set {
			return raw.at.errorf("has no %s", f.name)
		}
	}
	unit, multiplier, algorithm := rf.unit, rf.multiplier, rf.algorithm
	if most := int64(limits.MaxPeriod / unit.Duration()); multiplier > most {
		return raw.unitMultiplier.at.errorf("%d %ss is longer than the maximum period of %d %ss", multiplier, unit, most, unit)
	}
	burst, requests := raw.burst.v, raw.requestsPerUnit.v
	if f := raw.burst; f.set {
		if requests == 0 {
			return f.at.nameErrorf("a block rule (requests_per_unit 0, every request refused) takes no burst")
		}
		switch algorithm {
		case limits.TokenBucket:
			if burst < 1 {
				return f.at.errorf("must be at least 1 for a token_bucket, got %d", burst)
			}
		case limits.LeakyBucket:
		default:
			return f.at.nameErrorf("%s takes no burst (only token_bucket and leaky_bucket do)", algorithm)
		}
	} else if algorithm == limits.TokenBucket {
		burst = requests
	}
	r.Unit, r.UnitMultiplier = unit, multiplier
	r.Limit = limits.Limit{
		Algorithm:    algorithm,
		Requests:     requests,
		Period:       unit.Duration() * time.Duration(multiplier),
		Burst:        burst,
		CountRefused: r.CountRefused,
	}
	return nil
}

// checkDelay refuses a leaky bucket whose worst wait, burst × period /
// requests_per_unit, is above -max-delay: the error points at its burst, or
// at its algorithm when the burst is defaulted, or at the body.
func (v validator) checkDelay(r *Rule, raw *rawRule) error {
	l := r.Limit
	wait := l.MaxWait()
	if l.Algorithm != limits.LeakyBucket || wait <= v.maxDelay {
		return nil
	}
	if wait > time.Millisecond {
		// Rounded up, so that the wait shown is still above the bound.
		wait = (wait + time.Millisecond - 1).Truncate(time.Millisecond)
	}
	at := raw.at
	switch {
	case raw.burst.set:
		at = raw.burst.at
	case raw.algorithm.set:
		at = raw.algorithm.at
	}
	rate := fmt.Sprintf("%d per %s", l.Requests, r.Unit)
	if r.UnitMultiplier > 1 {
		rate = fmt.Sprintf("%d per %d %ss", l.Requests, r.UnitMultiplier, r.Unit)
	}
	return at.errorf("a leaky_bucket of %s with burst %d may delay a request %s, above -max-delay %s", rate, l.Burst, wait, v.maxDelay)
}

// bounds checks a count (requests_per_unit, burst) against [least,
// limits.MaxRequests].
func bounds(f field[int64], least int64) error {
	switch {
	case f.v < least:
		return f.at.errorf("must be at least %d, got %d", least, f.v)
	case f.v > limits.MaxRequests:
		return f.at.errorf("must be at most %d, got %d", int64(limits.MaxRequests), f.v)
	}
	return nil
}
