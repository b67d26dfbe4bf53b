package config

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// parser walks the yaml.Node tree of one file by hand, so that every error
// knows its line and word, and every field is checked once, as it is read.
type parser struct {
	file string
	// budget is how many more nodes the walk may visit. Aliases can make a
	// small file expand exponentially (or forever, through an anchor that
	// contains an alias to itself); the budget stops both.
	budget int
	// maxDelay bounds a leaky bucket's worst wait (-max-delay).
	maxDelay time.Duration
}

// pair is one field of a mapping: its name node and its value, aliases
// resolved.
type pair struct{ key, value *yaml.Node }

func (p *parser) errorf(n *yaml.Node, word, format string, args ...any) error {
	return &Error{File: p.file, Line: n.Line, Word: word, Msg: fmt.Sprintf(format, args...)}
}

// kindError reports a value n of field word that is not what the format
// wants there.
func (p *parser) kindError(n *yaml.Node, word, want string) error {
	return p.errorf(n, word, "want %s, got %s", want, got(n))
}

// got describes a node for "want …, got …" messages.
func got(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return "null"
		case "!!str":
			return strconv.Quote(n.Value)
		}
		return n.Value
	}
	return "nothing"
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// deref resolves aliases and charges the visit of n to the budget.
func (p *parser) deref(n *yaml.Node) (*yaml.Node, error) {
	for {
		p.budget--
		if p.budget < 0 {
			return nil, p.errorf(n, "", "aliases expand too far (an alias cycle, or too many aliases)")
		}
		if n.Kind != yaml.AliasNode {
			return n, nil
		}
		if n.Alias == nil {
			return nil, p.errorf(n, "*"+n.Value, "unknown anchor")
		}
		n = n.Alias
	}
}

// pairs returns the fields of mapping n in file order, keys and values
// resolved, refusing duplicate names. Merge keys (<<: *defaults), which
// envoyproxy/ratelimit's YAML library also honours, add the fields of the
// merged mappings that n does not set itself; the first merged mapping to
// set a field wins.
func (p *parser) pairs(n *yaml.Node, word string) ([]pair, error) {
	var own, merged []pair
	lines := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, err := p.deref(n.Content[i])
		if err != nil {
			return nil, err
		}
		v, err := p.deref(n.Content[i+1])
		if err != nil {
			return nil, err
		}
		if k.Kind != yaml.ScalarNode {
			return nil, p.kindError(k, word, "a field name")
		}
		if k.ShortTag() == "!!merge" {
			m, err := p.merge(v)
			if err != nil {
				return nil, err
			}
			merged = append(merged, m...)
			continue
		}
		if line, dup := lines[k.Value]; dup {
			return nil, p.errorf(k, k.Value, "duplicate field, first at line %d", line)
		}
		lines[k.Value] = k.Line
		own = append(own, pair{k, v})
	}
	for _, kv := range merged {
		if _, set := lines[kv.key.Value]; !set {
			lines[kv.key.Value] = kv.key.Line
			own = append(own, kv)
		}
	}
	return own, nil
}

// merge returns the fields that the value v of a merge key brings: a
// mapping, or a list of mappings.
func (p *parser) merge(v *yaml.Node) ([]pair, error) {
	const want = "a mapping or a list of mappings to merge"
	switch v.Kind {
	case yaml.MappingNode:
		return p.pairs(v, "<<")
	case yaml.SequenceNode:
		var all []pair
		for _, item := range v.Content {
			m, err := p.deref(item)
			if err != nil {
				return nil, err
			}
			if m.Kind != yaml.MappingNode {
				return nil, p.kindError(m, "<<", want)
			}
			ps, err := p.pairs(m, "<<")
			if err != nil {
				return nil, err
			}
			all = append(all, ps...)
		}
		return all, nil
	}
	return nil, p.kindError(v, "<<", want)
}

// str reads a string field. Any scalar is taken as written, as
// envoyproxy/ratelimit does (value: 200 is the string "200"); null is the
// empty string.
func (p *parser) str(kv pair) (string, error) {
	v := kv.value
	if v.Kind != yaml.ScalarNode {
		return "", p.kindError(v, kv.key.Value, "a string")
	}
	if isNull(v) {
		return "", nil
	}
	return v.Value, nil
}

// boolean reads a YAML bool. The YAML 1.1 spellings (yes, no, on, off, y,
// n) are also accepted when unquoted, because envoyproxy/ratelimit's YAML
// library reads them as bools and its files must load unchanged.
func (p *parser) boolean(kv pair) (bool, error) {
	v := kv.value
	if v.Kind == yaml.ScalarNode {
		switch v.ShortTag() {
		case "!!bool":
			var b bool
			if err := v.Decode(&b); err == nil {
				return b, nil
			}
		case "!!str":
			if v.Style == 0 {
				switch v.Value {
				case "y", "Y", "yes", "Yes", "YES", "on", "On", "ON":
					return true, nil
				case "n", "N", "no", "No", "NO", "off", "Off", "OFF":
					return false, nil
				}
			}
		}
	}
	return false, p.kindError(v, kv.key.Value, "true or false")
}

var digits = regexp.MustCompile(`^[-+]?[0-9][0-9_]*$`)

// integer reads a YAML int: 10, not "10", not ten, not 10.0.
func (p *parser) integer(kv pair) (int64, error) {
	v := kv.value
	if v.Kind == yaml.ScalarNode {
		if v.ShortTag() == "!!int" {
			var i int64
			if err := v.Decode(&i); err == nil {
				return i, nil
			}
		}
		if v.Style == 0 && digits.MatchString(v.Value) {
			return 0, p.errorf(v, kv.key.Value, "%s is out of range", v.Value)
		}
	}
	return 0, p.kindError(v, kv.key.Value, "an integer")
}

// domain reads the root of a file; it also returns the line of its domain
// field, for the duplicate-domain error of Load.
func (p *parser) domain(n *yaml.Node) (*Domain, int, error) {
	root, err := p.deref(n)
	if err != nil {
		return nil, 0, err
	}
	if root.Kind != yaml.MappingNode {
		return nil, 0, p.kindError(root, "", "a mapping with domain and descriptors")
	}
	fields, err := p.pairs(root, "")
	if err != nil {
		return nil, 0, err
	}
	d := &Domain{File: p.file}
	line := 0
	var descriptors *pair
	for _, kv := range fields {
		switch name := kv.key.Value; name {
		case "domain":
			if d.Name, err = p.str(kv); err != nil {
				return nil, 0, err
			}
			if d.Name == "" {
				return nil, 0, p.errorf(kv.value, name, "empty")
			}
			line = kv.key.Line
		case "descriptors":
			descriptors = &kv
		default:
			return nil, 0, p.errorf(kv.key, name, "%s", rootLevel.unknown(name))
		}
	}
	if line == 0 {
		return nil, 0, p.errorf(root, "", "no domain")
	}
	if descriptors != nil {
		if d.Descriptors, err = p.descriptors(*descriptors, d.Name); err != nil {
			return nil, 0, err
		}
	}
	return d, line, nil
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

// descriptors reads a list of descriptors under parent (a domain or a
// composite key), keeping file order: wildcards are tried in that order.
func (p *parser) descriptors(kv pair, parent string) ([]*Descriptor, error) {
	v := kv.value
	if isNull(v) {
		return nil, nil
	}
	if v.Kind != yaml.SequenceNode {
		return nil, p.kindError(v, kv.key.Value, "a list of descriptors")
	}
	var ds []*Descriptor
	first := map[[2]string]int{}
	for _, item := range v.Content {
		line := item.Line
		m, err := p.deref(item)
		if err != nil {
			return nil, err
		}
		if m.Kind != yaml.MappingNode {
			return nil, p.kindError(m, kv.key.Value, "a descriptor (a mapping with a key)")
		}
		d, err := p.descriptor(m, line, parent)
		if err != nil {
			return nil, err
		}
		id := [2]string{d.Key, d.Value}
		if at, dup := first[id]; dup {
			return nil, p.errorf(item, compositeKey(parent, d.Key, d.Value), "duplicate descriptor, first at line %d", at)
		}
		first[id] = line
		ds = append(ds, d)
	}
	return ds, nil
}

// descriptor reads one descriptor mapping n that starts at line.
func (p *parser) descriptor(n *yaml.Node, line int, parent string) (*Descriptor, error) {
	fields, err := p.pairs(n, "descriptors")
	if err != nil {
		return nil, err
	}
	d := &Descriptor{Line: line}
	var key, one, many, sub *pair
	for _, kv := range fields {
		switch name := kv.key.Value; name {
		case "key":
			key = &kv
			d.Key, err = p.str(kv)
		case "value":
			d.Value, err = p.str(kv)
		case "rate_limit":
			one = &kv
		case "rate_limits":
			many = &kv
		case "descriptors":
			sub = &kv
		case "shadow_mode":
			d.ShadowMode, err = p.boolean(kv)
		case "quota_mode":
			d.QuotaMode, err = p.boolean(kv)
		case "detailed_metric":
			d.DetailedMetric, err = p.boolean(kv)
		case "value_to_metric":
			d.ValueToMetric, err = p.boolean(kv)
		case "share_threshold":
			d.ShareThreshold, err = p.boolean(kv)
		case "metadata":
			d.Metadata, err = p.metadata(kv)
		default:
			err = p.errorf(kv.key, name, "%s", descriptorLevel.unknown(name))
		}
		if err != nil {
			return nil, err
		}
	}
	if key == nil {
		return nil, p.errorf(n, "", "descriptor has no key")
	}
	if d.Key == "" {
		return nil, p.errorf(key.value, "key", "empty")
	}
	if one != nil && many != nil {
		first, second := one, many
		if second.key.Line < first.key.Line {
			first, second = second, first
		}
		return nil, p.errorf(second.key, second.key.Value, "cannot be used together with %s (line %d)", first.key.Value, first.key.Line)
	}
	if one != nil {
		r, err := p.rule(one.value, "rate_limit", false)
		if err != nil {
			return nil, err
		}
		d.Rules = []*Rule{r}
	}
	if many != nil {
		rules, err := p.rules(*many)
		if err != nil {
			return nil, err
		}
		d.Rules = rules
	}
	if sub != nil {
		if d.Descriptors, err = p.descriptors(*sub, compositeKey(parent, d.Key, d.Value)); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// metadata reads a mapping of names to scalars, kept as strings.
func (p *parser) metadata(kv pair) (map[string]string, error) {
	v := kv.value
	if isNull(v) {
		return nil, nil
	}
	if v.Kind != yaml.MappingNode {
		return nil, p.kindError(v, kv.key.Value, "a mapping")
	}
	fields, err := p.pairs(v, kv.key.Value)
	if err != nil {
		return nil, err
	}
	if len(fields) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(fields))
	for _, f := range fields {
		s, err := p.str(f)
		if err != nil {
			return nil, err
		}
		m[f.key.Value] = s
	}
	return m, nil
}

// rules reads a rate_limits list: limits that must all allow a request, so
// none is unlimited, and no two count the same way (algorithm, requests,
// period and burst), since the second would change nothing.
func (p *parser) rules(kv pair) ([]*Rule, error) {
	v := kv.value
	if v.Kind != yaml.SequenceNode {
		return nil, p.kindError(v, kv.key.Value, "a list of rate limits")
	}
	if len(v.Content) == 0 {
		return nil, p.errorf(v, kv.key.Value, "empty list")
	}
	type counting struct {
		algorithm limits.Algorithm
		requests  int64
		period    time.Duration
		burst     int64
	}
	first := map[counting]int{}
	var rules []*Rule
	for _, item := range v.Content {
		n, err := p.deref(item)
		if err != nil {
			return nil, err
		}
		r, err := p.rule(n, kv.key.Value, true)
		if err != nil {
			return nil, err
		}
		l := r.Limit
		id := counting{l.Algorithm, l.Requests, l.Period, l.Burst}
		if line, dup := first[id]; dup {
			l.CountRefused = false
			return nil, p.errorf(item, kv.key.Value, "duplicate limit %s, first at line %d (the limits of a list must differ in algorithm, requests_per_unit, period or burst)", l, line)
		}
		first[id] = r.Line
		rules = append(rules, r)
	}
	return rules, nil
}

var (
	unitNamesWant        = "second, minute, hour, day, week, month or year"
	algorithmNamesWant   = list(func(i int) string { return limits.Algorithm(i).String() }, "algorithm(")
	failureModeNamesWant = list(func(i int) string { return FailureMode(i).String() }, "failure_mode(")
)

// list joins name(0), name(1), … up to the first name starting with end
// ("algorithm(" for an out-of-range Algorithm), skipping "default".
func list(name func(int) string, end string) string {
	var names []string
	for i := 0; i < 256; i++ {
		s := name(i)
		if strings.HasPrefix(s, end) {
			break
		}
		if s != "default" {
			names = append(names, s)
		}
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// rule reads one rate limit body n, the value of field word (rate_limit, or
// an item of rate_limits when inList). An unlimited rule has a zero Limit,
// Unit and UnitMultiplier; any other has Limit validated, Burst set to
// requests_per_unit for a token bucket that does not give one (0 for a
// leaky bucket), Limit.CountRefused set to CountRefused, UnitMultiplier at
// least 1, and, for a leaky bucket, a worst wait within p.maxDelay.
func (p *parser) rule(n *yaml.Node, word string, inList bool) (*Rule, error) {
	if n.Kind != yaml.MappingNode {
		return nil, p.kindError(n, word, "a mapping with requests_per_unit and unit")
	}
	fields, err := p.pairs(n, word)
	if err != nil {
		return nil, err
	}
	r := &Rule{Line: n.Line}
	at := map[string]pair{}
	var (
		unit         Unit
		requests     int64
		multiplier   int64 = 1
		burst        int64
		algorithm    = limits.SlidingWindow
		replaceNodes []*yaml.Node
	)
	for _, kv := range fields {
		name, v := kv.key.Value, kv.value
		at[name] = kv
		switch name {
		case "requests_per_unit":
			if requests, err = p.integer(kv); err == nil {
				err = p.bounds(kv, requests, 1)
			}
		case "unit":
			var s string
			if s, err = p.str(kv); err == nil {
				if unit, err = ParseUnit(s); err != nil {
					err = p.errorf(v, name, "want %s, got %s", unitNamesWant, got(v))
				}
			}
		case "unlimited":
			r.Unlimited, err = p.boolean(kv)
		case "name":
			r.Name, err = p.str(kv)
		case "replaces":
			r.Replaces, replaceNodes, err = p.replaces(kv)
		case "algorithm":
			var s string
			if s, err = p.str(kv); err == nil {
				if algorithm, err = limits.ParseAlgorithm(s); err != nil {
					err = p.errorf(v, name, "want %s, got %s", algorithmNamesWant, got(v))
				}
			}
		case "burst":
			if burst, err = p.integer(kv); err == nil {
				err = p.bounds(kv, burst, 0)
			}
		case "unit_multiplier":
			if multiplier, err = p.integer(kv); err == nil && multiplier < 1 {
				err = p.errorf(v, name, "must be at least 1, got %d", multiplier)
			}
		case "failure_mode":
			var s string
			if s, err = p.str(kv); err == nil {
				if r.FailureMode, err = ParseFailureMode(s); err != nil {
					err = p.errorf(v, name, "want %s, got %s", failureModeNamesWant, got(v))
				}
			}
		case "count_refused":
			r.CountRefused, err = p.boolean(kv)
		default:
			err = p.errorf(kv.key, name, "%s", ruleLevel.unknown(name))
		}
		if err != nil {
			return nil, err
		}
	}
	for i, name := range r.Replaces {
		if name == r.Name {
			return nil, p.errorf(replaceNodes[i], "replaces", "cannot replace the limit's own name %q", name)
		}
	}

	if r.Unlimited && inList {
		return nil, p.errorf(at["unlimited"].value, "unlimited", "not allowed in a rate_limits list; to make the descriptor unlimited, use rate_limit: {unlimited: true} instead of the list")
	}

	if r.Unlimited {
		// requests_per_unit beside unlimited is ignored, as
		// envoyproxy/ratelimit ignores it, so that its files load unchanged;
		// everything else would be a limit that silently does nothing.
		for _, f := range []struct{ name, what string }{
			{"unit", "a unit"},
			{"unit_multiplier", "a unit_multiplier"},
			{"algorithm", "an algorithm"},
			{"burst", "a burst"},
			{"failure_mode", "a failure_mode"},
			{"count_refused", "count_refused"},
		} {
			if kv, ok := at[f.name]; ok {
				return nil, p.errorf(kv.key, f.name, "unlimited with %s", f.what)
			}
		}
	} else {
		for _, f := range []string{"unit", "requests_per_unit"} {
			if _, ok := at[f]; !ok {
				return nil, p.errorf(n, word, "has no %s", f)
			}
		}
		if most := int64(limits.MaxPeriod / unit.Duration()); multiplier > most {
			return nil, p.errorf(at["unit_multiplier"].value, "unit_multiplier", "%d %ss is longer than the maximum period of %d %ss", multiplier, unit, most, unit)
		}
		if kv, ok := at["burst"]; ok {
			switch algorithm {
			case limits.TokenBucket:
				if burst < 1 {
					return nil, p.errorf(kv.value, "burst", "must be at least 1 for a token_bucket, got %d", burst)
				}
			case limits.LeakyBucket:
			default:
				return nil, p.errorf(kv.key, "burst", "%s takes no burst (only token_bucket and leaky_bucket do)", algorithm)
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
	}

	if err := p.notYetRule(r, at); err != nil {
		return nil, err
	}
	if !r.Unlimited {
		if err := p.validate(r, n, word, at); err != nil {
			return nil, err
		}
		if err := p.checkDelay(r, n, word, at); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// validate checks the Limit of rule r, read from body n, with
// limits.Limit.Validate. Its messages start with the field at fault
// ("requests_per_unit 20000 is above …"); when the rule sets that field,
// the error points at it, as "requests_per_unit: 20000 is above …".
func (p *parser) validate(r *Rule, n *yaml.Node, word string, at map[string]pair) error {
	err := r.Limit.Validate()
	if err == nil {
		return nil
	}
	msg := err.Error()
	for _, f := range []string{"requests_per_unit", "burst"} {
		if rest, ok := strings.CutPrefix(msg, f+" "); ok {
			if kv, set := at[f]; set {
				return p.errorf(kv.value, f, "%s", rest)
			}
		}
	}
	return p.errorf(n, word, "%s", msg)
}

// checkDelay refuses a leaky bucket whose worst wait, burst × period /
// requests_per_unit, is above -max-delay: the error points at its burst, or
// at its algorithm when the burst is defaulted.
func (p *parser) checkDelay(r *Rule, n *yaml.Node, word string, at map[string]pair) error {
	l := r.Limit
	wait := l.MaxWait()
	if l.Algorithm != limits.LeakyBucket || wait <= p.maxDelay {
		return nil
	}
	if wait > time.Millisecond {
		// Rounded up, so that the wait shown is still above the bound.
		wait = (wait + time.Millisecond - 1).Truncate(time.Millisecond)
	}
	node := n
	for _, f := range []string{"burst", "algorithm"} {
		if kv, ok := at[f]; ok {
			node, word = kv.value, f
			break
		}
	}
	rate := fmt.Sprintf("%d per %s", l.Requests, r.Unit)
	if r.UnitMultiplier > 1 {
		rate = fmt.Sprintf("%d per %d %ss", l.Requests, r.UnitMultiplier, r.Unit)
	}
	return p.errorf(node, word, "a leaky_bucket of %s with burst %d may delay a request %s, above -max-delay %s", rate, l.Burst, wait, p.maxDelay)
}

// bounds checks a count (requests_per_unit, burst) against [least,
// limits.MaxRequests].
func (p *parser) bounds(kv pair, v, least int64) error {
	switch {
	case v < least:
		return p.errorf(kv.value, kv.key.Value, "must be at least %d, got %d", least, v)
	case v > limits.MaxRequests:
		return p.errorf(kv.value, kv.key.Value, "must be at most %d, got %d", int64(limits.MaxRequests), v)
	}
	return nil
}

// replaces reads a list of {name: X}, returning the names and their nodes.
func (p *parser) replaces(kv pair) ([]string, []*yaml.Node, error) {
	v := kv.value
	if isNull(v) {
		return nil, nil, nil
	}
	if v.Kind != yaml.SequenceNode {
		return nil, nil, p.kindError(v, kv.key.Value, "a list of {name: …}")
	}
	var names []string
	var nodes []*yaml.Node
	for _, item := range v.Content {
		m, err := p.deref(item)
		if err != nil {
			return nil, nil, err
		}
		if m.Kind != yaml.MappingNode {
			return nil, nil, p.kindError(m, kv.key.Value, "{name: …}")
		}
		fields, err := p.pairs(m, kv.key.Value)
		if err != nil {
			return nil, nil, err
		}
		name := ""
		for _, f := range fields {
			if f.key.Value != "name" {
				return nil, nil, p.errorf(f.key, f.key.Value, "%s", replacesLevel.unknown(f.key.Value))
			}
			if name, err = p.str(f); err != nil {
				return nil, nil, err
			}
		}
		if name == "" {
			return nil, nil, p.errorf(m, kv.key.Value, "entry without a name")
		}
		names = append(names, name)
		nodes = append(nodes, m)
	}
	return names, nodes, nil
}
