package config

import (
	"go.yaml.in/yaml/v3"
)

// The issues that plan what the format defines but this build does not
// enforce yet. Each such feature is parsed and checked in full, then refused
// here, so that a file never loads a limit that nothing enforces, and so that
// lifting a refusal is deleting its lines in this file and nothing else.
const (
	// issueLimits: the sliding_log and leaky_bucket algorithms,
	// count_refused and several limits per descriptor (rate_limits).
	issueLimits = "planned in issue #3"
	// issueFailureModes: the local and error failure modes.
	issueFailureModes = "planned in issue #4"
)

// notYetRule refuses what a fully parsed and checked rate limit asks for but
// this build cannot do. at holds the rule's fields by name.
func (p *parser) notYetRule(r *Rule, at map[string]pair) error {
	if f, ok := at["algorithm"]; ok && !r.Limit.Algorithm.Implemented() {
		return p.errorf(f.value, "algorithm", "%s is not supported yet (%s)", r.Limit.Algorithm, issueLimits)
	}
	if f, ok := at["failure_mode"]; ok && !r.FailureMode.Implemented() {
		return p.errorf(f.value, "failure_mode", "%s is not supported yet (%s)", r.FailureMode, issueFailureModes)
	}
	if f, ok := at["count_refused"]; ok && r.CountRefused {
		return p.errorf(f.value, "count_refused", "not supported yet (%s)", issueLimits)
	}
	return nil
}

// notYetRateLimits refuses a descriptor's rate_limits list, parsed and
// checked in full, whose field name is key.
func (p *parser) notYetRateLimits(key *yaml.Node) error {
	return p.errorf(key, "rate_limits", "not supported yet (%s); use rate_limit", issueLimits)
}
