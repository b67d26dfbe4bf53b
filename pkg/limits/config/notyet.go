package config

// The issues that plan what the format defines but this build does not
// enforce yet. Each such feature is parsed and checked in full, then refused
// here, so that a file never loads a limit that nothing enforces, and so that
// lifting a refusal is deleting its lines in this file and nothing else.

// notYetRule refuses what a fully checked rate limit asks for but this build
// cannot do. raw holds the rule's fields as its source gave them, with their
// positions for the error.
func (v validator) notYetRule(r *Rule, raw *rawRule) error {
	return nil
}
