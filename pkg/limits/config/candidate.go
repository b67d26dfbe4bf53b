package config

import (
	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// A candidate is a limit tried on live traffic before it is enforced:
//
//	rate_limit:
//	  unit: minute
//	  requests_per_unit: 100
//	  candidate: {unit: minute, requests_per_unit: 60, algorithm: token_bucket}
//
// Every decision of the rule decides its candidate too, on counters of the
// candidate's own, and counts whether the candidate would have refused;
// the answer is the enforced limit's alone (docs/limits.md, "Trying a
// limit before enforcing it"). A candidate is a rate limit body, checked
// as one, less what only an enforced limit uses: a name and replaces (it
// is known by its rule's), failure_mode (it answers nothing), warn_at (it
// warns no one), unlimited, and a candidate of its own.
//
// What cannot have one: an unlimited rule and a block rule (requests_per_unit
// 0), which refuse nothing or everything whatever a candidate says, and a
// concurrency limit. A concurrency candidate would take slots of its own,
// which only releases give back; a request it would refuse is let through
// all the same and later released, so its count would drift from the
// requests really in flight. So a candidate is a rate limit, beside a
// rate limit.

// candidate reads the candidate field of a rule whose fields are k, nil
// when absent. Its body is read as a rule's; a name is refused here,
// since the raw model keeps no position for it.
func (r *yamlReader) candidate(k *fieldLines, m *mapping[yamlRule]) field[*rawRule] {
	if m == nil {
		m = &mapping[yamlRule]{}
	}
	at, set := k.at("candidate", m.line)
	if !set || r.err != nil {
		return field[*rawRule]{at: at}
	}
	if line, named := m.v.Keys.lineOf("name"); named && m.problem() == "" {
		r.fail(pos{line: line, key: line, name: "name"}.errorf("a candidate takes no name: it is counted under its rule's"))
		return field[*rawRule]{at: at}
	}
	return field[*rawRule]{r.rule(at, m), at, true}
}

// candidate validates the candidate of r, a rule already validated from
// raw: nil when it has none.
func (v validator) candidate(r *Rule, raw *rawRule) (*Rule, error) {
	f := raw.candidate
	if !f.set {
		return nil, nil
	}
	switch {
	case r.Limit.Algorithm == limits.Concurrency:
		return nil, f.at.nameErrorf("a concurrency limit takes no candidate: its slots are given back by releases, which a candidate that refuses nothing cannot follow")
	case r.Limit.Blocks():
		return nil, f.at.nameErrorf("a block rule (requests_per_unit 0) takes no candidate: it refuses every request, whatever a candidate would do")
	}
	c := f.v
	if g, ok := firstGiven(
		presence(c.unlimited, "unlimited (leave the candidate out instead)"),
		presence(c.failureMode, "failure_mode (it answers nothing, so no failure mode applies)"),
		presence(c.warnAt, "warn_at (it warns no one)"),
		presence(c.lease, "lease (a candidate cannot be a concurrency limit)"),
		presence(c.candidate, "candidate of its own"),
	); ok {
		return nil, g.at.nameErrorf("a candidate takes no %s", g.what)
	}
	if len(c.replaces) > 0 {
		return nil, c.replaces[0].at.nameErrorf("a candidate takes no replaces: it replaces nothing")
	}
	// The -algorithm default is the enforced rule's: a candidate that
	// names none counts as its rule would with the same fields.
	cr, err := v.rule(c, false)
	if err != nil {
		return nil, err
	}
	switch {
	case cr.Limit.Algorithm == limits.Concurrency:
		at := c.at
		if c.algorithm.set {
			at = c.algorithm.at
		}
		return nil, at.errorf("a candidate cannot be a concurrency limit: the slots it took would be given back only by releases, which it cannot follow")
	case cr.Limit.Blocks():
		return nil, c.requestsPerUnit.at.errorf("must be at least 1 for a candidate (0 would refuse every request, which needs no trying)")
	}
	return cr, nil
}
