package config

// The issues that plan what the format defines but this build does not
// enforce yet. Each such feature is parsed and checked in full, then refused
// here, so that a file never loads a limit that nothing enforces, and so that
// lifting a refusal is deleting its lines in this file and nothing else.

// notYetRule refuses what a fully parsed and checked rate limit asks for but
// this build cannot do. at holds the rule's fields by name.
func (p *parser) notYetRule(r *Rule, at map[string]pair) error {
	return nil
}
