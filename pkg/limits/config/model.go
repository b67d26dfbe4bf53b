package config

import (
	"fmt"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// Every source of limits maps what it read to the raw model below, value for
// value, saying where each value was written: a limits file (yaml.go), a
// RateLimitConfig message of an xDS server (proto.go). validate then applies
// every rule of the format to it, once, so that both sources give the same
// Domain and the same errors, and a rule is added in one place.

// pos is where a source wrote a value, for the errors about it.
type pos struct {
	// line is the value's 1-based line in a file, and key the line of the
	// field's name; both are 0 in a message, which has no lines.
	line, key int
	// name is the field that holds the value, as the file spells it
	// ("unit"); an item of a list has its list's name ("rate_limits").
	name string
	// path is, in a message, the value's field path
	// ("descriptors[0].rate_limit.unit"): what stands in for a line.
	path string
}

// word is what an error about the value names: the field's path in a
// message, its name in a file.
func (p pos) word() string {
	if p.path != "" {
		return p.path
	}
	return p.name
}

// String says where the value is, for messages that point at a second
// place ("first at line 6").
func (p pos) String() string {
	if p.path != "" {
		return p.path
	}
	return fmt.Sprintf("line %d", p.line)
}

// errorf is an error about the value at p. Its File is filled in by the
// source's entry point, which knows the file or resource.
func (p pos) errorf(format string, args ...any) *Error {
	return &Error{Line: p.line, Word: p.word(), Msg: fmt.Sprintf(format, args...)}
}

// nameErrorf is an error about the field at p as a whole (that it is there
// at all), pointing at its name rather than its value.
func (p pos) nameErrorf(format string, args ...any) *Error {
	e := p.errorf(format, args...)
	e.Line = p.key
	return e
}

// wordErrorf is an error at p about word, something other than the field
// itself: a descriptor's composite key, or nothing ("") for what is missing.
func (p pos) wordErrorf(word, format string, args ...any) *Error {
	e := p.errorf(format, args...)
	switch {
	case p.path == "":
		e.Word = word
	case word != "":
		e.Word = p.path + " (" + word + ")"
	}
	return e
}

// field is a value a source may give: set says whether it gives it.
type field[T any] struct {
	v   T
	at  pos
	set bool
}

// given is whether a field was given, where, and the words an error names
// it by: what a rule that must not have some fields checks.
type given struct {
	at   pos
	set  bool
	what string
}

func presence[T any](f field[T], what string) given { return given{f.at, f.set, what} }

// firstGiven returns the first of fs that was given.
func firstGiven(fs ...given) (given, bool) {
	for _, f := range fs {
		if f.set {
			return f, true
		}
	}
	return given{}, false
}

// rawDomain is one limits file, or one RateLimitConfig, before validation.
type rawDomain struct {
	// at is the whole: where a missing domain is reported.
	at          pos
	name        field[string]
	holds       field[*rawHolds]
	descriptors []*rawDescriptor
}

type rawDescriptor struct {
	// at is the descriptor: an item of a descriptors list.
	at    pos
	key   field[string]
	value string
	// rateLimit and rateLimits are the descriptor's rate_limit and
	// rate_limits fields; at most one may be set.
	rateLimit   field[*rawRule]
	rateLimits  field[[]*rawRule]
	descriptors []*rawDescriptor

	shadowMode, quotaMode, detailedMetric, valueToMetric, shareThreshold bool
	metadata                                                             *structpb.Struct
}

// rawRule is one rate limit body.
type rawRule struct {
	// at is the rate_limit field's value, or the item of a rate_limits list.
	at pos
	// line is the body's own line (Rule.Line): an item's, unless the item
	// is an alias of a body written elsewhere.
	line int

	requestsPerUnit, burst, unitMultiplier field[int64]
	unit, algorithm, failureMode           field[string]
	unlimited, countRefused                field[bool]
	// kinds are the fields of the modifiers (limits.Modifiers) the rule
	// gives, in the table's order.
	kinds []kindField
	name  string
	// replaces holds the names of the replaces entries, each at its entry.
	replaces []field[string]
	// lease is a concurrency limit's lease, as written (concurrency.go).
	lease field[string]
	// warnAt is warn_at, each threshold at its item (warn.go).
	warnAt field[[]field[float64]]
	// candidate is the body of a limit tried beside this one
	// (candidate.go).
	candidate field[*rawRule]
}

// field returns the position of the rule's field name, and whether the
// rule sets it: how the validator points at the field that a
// limits.FieldError names.
func (r *rawRule) field(name string) (pos, bool) {
	switch name {
	case "requests_per_unit":
		return r.requestsPerUnit.at, r.requestsPerUnit.set
	case "burst":
		return r.burst.at, r.burst.set
	case "unit_multiplier":
		return r.unitMultiplier.at, r.unitMultiplier.set
	case "unit":
		return r.unit.at, r.unit.set
	case "algorithm":
		return r.algorithm.at, r.algorithm.set
	case "count_refused":
		return r.countRefused.at, r.countRefused.set
	}
	f := r.kind(name)
	return f.at, f.set
}

// kindField is a field of a modifier (limits.Field) as a source gave it.
type kindField struct {
	name string
	field[limits.FieldValue]
}

// kind is the modifier's field name of the rule; unset when the rule does
// not give it.
func (r *rawRule) kind(name string) field[limits.FieldValue] {
	for _, f := range r.kinds {
		if f.name == name {
			return f.field
		}
	}
	return field[limits.FieldValue]{}
}

// ruleFields are what the modifiers' Build and the default algorithm
// read of the rule (limits.RuleFields).
func (r *rawRule) ruleFields(unit Unit, multiplier int64) limits.RuleFields {
	return limits.RuleFields{
		Unit:           unit.String(),
		UnitMultiplier: multiplier,
		AlgorithmSet:   r.algorithm.set,
		Given: func(name string) (limits.FieldValue, bool) {
			f := r.kind(name)
			return f.v, f.set
		},
	}
}

// kindsGiven are the fields of modifiers ms, each as firstGiven checks
// it: named by its Noun; or, with why, by its name and the reason why
// gives, leaving out those it gives none for.
func (r *rawRule) kindsGiven(ms []limits.Modifier, why func(limits.Field) string) []given {
	var gs []given
	for _, m := range ms {
		for _, f := range m.Fields {
			what := f.Noun
			if why != nil {
				if what = why(f); what == "" {
					continue
				}
				what = f.Name + " (" + what + ")"
			}
			gs = append(gs, presence(r.kind(f.Name), what))
		}
	}
	return gs
}
