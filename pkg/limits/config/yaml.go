package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// A limits file is decoded by go.yaml.in/yaml/v3 into the types below, one
// Go field per field of the format, in strict mode: the decoder does the
// walking, merge keys (<<: *defaults) and aliases, and bounds how far
// aliases may expand. The types only remember what errors need (lines,
// and what the file has where the format wants something else), and
// yamlReader then maps them to the raw model that validate checks. The
// wrapper types (keys, scalar, mapping, list, metaValue) are in decode.go.

// yamlDomain is a whole limits file.
type yamlDomain struct {
	Keys        keys[yamlDomain]     `yaml:",inline"`
	Domain      scalar               `yaml:"domain"`
	Holds       *mapping[yamlHolds]  `yaml:"holds"`
	Descriptors list[yamlDescriptor] `yaml:"descriptors"`
}

// yamlHolds is a domain's holds field.
type yamlHolds struct {
	Keys   keys[yamlHolds] `yaml:",inline"`
	ID     scalar          `yaml:"id"`
	Settle scalar          `yaml:"settle"`
	Lease  scalar          `yaml:"lease"`
}

// yamlDescriptor is an item of a descriptors list.
type yamlDescriptor struct {
	Keys           keys[yamlDescriptor] `yaml:",inline"`
	Key            scalar               `yaml:"key"`
	Value          scalar               `yaml:"value"`
	RateLimit      *mapping[yamlRule]   `yaml:"rate_limit"` // nil when absent or null: most descriptors have none or one, and a rule is large
	RateLimits     list[yamlRule]       `yaml:"rate_limits"`
	Descriptors    list[yamlDescriptor] `yaml:"descriptors"`
	ShadowMode     scalar               `yaml:"shadow_mode"`
	QuotaMode      scalar               `yaml:"quota_mode"`
	DetailedMetric scalar               `yaml:"detailed_metric"`
	ValueToMetric  scalar               `yaml:"value_to_metric"`
	ShareThreshold scalar               `yaml:"share_threshold"`
	Metadata       metaValue            `yaml:"metadata"`
}

// yamlRule is a rate limit body: a rate_limit, or an item of rate_limits.
type yamlRule struct {
	Keys            keys[yamlRule]    `yaml:",inline"`
	RequestsPerUnit scalar            `yaml:"requests_per_unit"`
	Unit            scalar            `yaml:"unit"`
	Unlimited       scalar            `yaml:"unlimited"`
	Name            scalar            `yaml:"name"`
	Replaces        list[yamlReplace] `yaml:"replaces"`
	Algorithm       scalar            `yaml:"algorithm"`
	Burst           scalar            `yaml:"burst"`
	UnitMultiplier  scalar            `yaml:"unit_multiplier"`
	FailureMode     scalar            `yaml:"failure_mode"`
	CountRefused    scalar            `yaml:"count_refused"`
	Kinds           kindScalars       `yaml:",inline"`
	Lease           scalar            `yaml:"lease"`
	WarnAt          metaValue         `yaml:"warn_at"`
	// Candidate is a limit tried beside this one (candidate.go).
	Candidate *mapping[yamlRule] `yaml:"candidate"`
}

// kindScalars are the fields of the modifiers (limits.Modifiers) a rule
// gives, by name: the decoder puts every field that no other field of
// yamlRule names in it, and keys has refused those that are no modifier's
// (ruleLevel lists theirs in its place). Nil when the rule gives none.
type kindScalars map[string]scalar

// yamlReplace is an item of a replaces list.
type yamlReplace struct {
	Keys keys[yamlReplace] `yaml:",inline"`
	Name scalar            `yaml:"name"`
}

func (yamlDomain) level() *level     { return rootLevel }
func (yamlDescriptor) level() *level { return descriptorLevel }
func (yamlRule) level() *level       { return ruleLevel }
func (yamlReplace) level() *level    { return replacesLevel }
func (yamlHolds) level() *level      { return holdsLevel }

// decodeYAML decodes the one domain of a limits file into the raw model.
// The file is one YAML document; empty (or null) documents around it, such
// as after a trailing ---, are ignored. Errors in the file's YAML come
// first, then a second document, then what the first one says: the
// decoder reads one document at a time, so the rest is read before the
// first document's errors are reported.
func decodeYAML(data []byte) (*rawDomain, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var (
		root *mapping[yamlDomain]
		bad  error // root's decoding error
	)
	for {
		var err error
		if root == nil {
			doc := new(mapping[yamlDomain])
			if err = dec.Decode(doc); err == nil || inDocument(err) {
				if doc.set || err != nil {
					root, bad, err = doc, err, nil
				}
			}
		} else {
			// Only whether the rest is empty matters: no need to decode it.
			var n yaml.Node
			if err = dec.Decode(&n); err == nil && len(n.Content) > 0 && !isNull(n.Content[0]) {
				return nil, &Error{Line: n.Line, Msg: fmt.Sprintf("a second YAML document (the first is at line %d); a file holds one domain", root.line)}
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, syntaxError(data, err)
		}
	}
	switch {
	case root == nil:
		return nil, &Error{Msg: "no domain (the file is empty)"}
	case bad != nil:
		return nil, decodeError(bad)
	case root.got != "":
		return nil, &Error{Line: root.line, Msg: "want a mapping with domain and descriptors, got " + root.got}
	}
	var r yamlReader
	d := r.domain(&root.v)
	if r.err != nil {
		return nil, r.err
	}
	return d, nil
}

// inDocument reports whether err, of the decoder, is about what a
// document says rather than about its YAML: this package's own, or the
// decoder's TypeError.
func inDocument(err error) bool {
	var typeErr *yaml.TypeError
	_, ours := errors.AsType[*Error](err)
	return ours || errors.As(err, &typeErr)
}

// decodeError turns an error of the decoder about a document into an
// *Error.
func decodeError(err error) *Error {
	if e, ok := errors.AsType[*Error](err); ok {
		return e
	}
	// What strict mode finds that keys and checkKeys do not see first,
	// such as a duplicate inside a mapping that a merge key brings: the
	// decoder's own words, with the line they start with.
	var typeErr *yaml.TypeError
	errors.As(err, &typeErr)
	line, msg := splitYAMLError(typeErr.Errors[0])
	return &Error{Line: line, Msg: msg, err: err}
}

// yamlReader maps a decoded file to the raw model, reading each scalar as
// the format reads it. It keeps the first error and does nothing after
// it, so that its methods read as a list of the fields.
type yamlReader struct{ err *Error }

func (r *yamlReader) fail(e *Error) {
	if r.err == nil {
		r.err = e
	}
}

// read reads the scalar field name of mapping f with conv, if f has it.
func read[T any](r *yamlReader, f *fieldLines, name string, s scalar, conv func(scalar, pos) (T, *Error)) field[T] {
	at, set := f.at(name, s.line())
	if !set || r.err != nil {
		return field[T]{at: at}
	}
	v, err := conv(s, at)
	r.fail(err)
	return field[T]{v, at, true}
}

func (r *yamlReader) domain(y *yamlDomain) *rawDomain {
	k := &y.Keys.fieldLines
	d := &rawDomain{at: pos{line: k.line}, name: read(r, k, "domain", y.Domain, scalar.str)}
	d.holds = r.holds(k, y.Holds)
	d.descriptors = r.descriptors(k, "descriptors", &y.Descriptors)
	return d
}

// holds reads the domain's holds field m, nil when absent.
func (r *yamlReader) holds(k *fieldLines, m *mapping[yamlHolds]) field[*rawHolds] {
	if m == nil {
		m = &mapping[yamlHolds]{}
	}
	at, set := k.at("holds", m.line)
	if !set || r.err != nil {
		return field[*rawHolds]{at: at}
	}
	if p := m.problem(); p != "" {
		r.fail(at.errorf("want a mapping with id and settle, got %s", p))
		return field[*rawHolds]{at: at}
	}
	hk := &m.v.Keys.fieldLines
	h := &rawHolds{
		at:     at,
		id:     read(r, hk, "id", m.v.ID, scalar.str),
		settle: read(r, hk, "settle", m.v.Settle, scalar.str),
		lease:  read(r, hk, "lease", m.v.Lease, scalar.duration),
	}
	return field[*rawHolds]{h, at, true}
}

// items returns the items of list field name of mapping f, each with its
// position, and whether the field is a list at all: absent is no list, and
// so is null when nullable. wantList and wantItem say what the format
// wants for the list and for an item, for the error when it has something
// else.
func items[T any](r *yamlReader, f *fieldLines, name string, l *list[T], nullable bool, wantList, wantItem string) (pos, []*mapping[T], []pos, bool) {
	at, set := f.at(name, l.line)
	if !set || r.err != nil || !l.set && nullable {
		return at, nil, nil, false
	}
	if p := problem(l.set, l.got); p != "" {
		r.fail(at.errorf("want %s, got %s", wantList, p))
		return at, nil, nil, false
	}
	ats := make([]pos, len(l.items))
	for i, m := range l.items {
		ats[i] = pos{line: l.lines[i], key: l.lines[i], name: name}
		if p := m.problem(); p != "" {
			r.fail(ats[i].errorf("want %s, got %s", wantItem, p))
			return at, nil, nil, false
		}
	}
	return at, l.items, ats, true
}

func (r *yamlReader) descriptors(f *fieldLines, name string, l *list[yamlDescriptor]) []*rawDescriptor {
	_, ms, ats, _ := items(r, f, name, l, true, "a list of descriptors", "a descriptor (a mapping with a key)")
	var ds []*rawDescriptor
	for i, m := range ms {
		ds = append(ds, r.descriptor(ats[i], &m.v))
	}
	return ds
}

func (r *yamlReader) descriptor(at pos, y *yamlDescriptor) *rawDescriptor {
	k := &y.Keys.fieldLines
	d := &rawDescriptor{
		at:             at,
		key:            read(r, k, "key", y.Key, scalar.str),
		value:          read(r, k, "value", y.Value, scalar.str).v,
		shadowMode:     read(r, k, "shadow_mode", y.ShadowMode, scalar.boolean).v,
		quotaMode:      read(r, k, "quota_mode", y.QuotaMode, scalar.boolean).v,
		detailedMetric: read(r, k, "detailed_metric", y.DetailedMetric, scalar.boolean).v,
		valueToMetric:  read(r, k, "value_to_metric", y.ValueToMetric, scalar.boolean).v,
		shareThreshold: read(r, k, "share_threshold", y.ShareThreshold, scalar.boolean).v,
		metadata:       r.metadata(k, "metadata", &y.Metadata),
	}
	rateLimit := y.RateLimit
	if rateLimit == nil {
		rateLimit = &mapping[yamlRule]{}
	}
	if at, set := k.at("rate_limit", rateLimit.line); set && r.err == nil {
		d.rateLimit = field[*rawRule]{r.rule(at, rateLimit), at, true}
	}
	if at, ms, ats, ok := items(r, k, "rate_limits", &y.RateLimits, false, "a list of rate limits", "a mapping with requests_per_unit and unit"); ok {
		rules := make([]*rawRule, len(ms))
		for i, m := range ms {
			rules[i] = r.rule(ats[i], m)
		}
		d.rateLimits = field[[]*rawRule]{rules, at, true}
	}
	d.descriptors = r.descriptors(k, "descriptors", &y.Descriptors)
	return d
}

// rule reads the rate limit body m, at the rate_limit field or an item of
// rate_limits.
func (r *yamlReader) rule(at pos, m *mapping[yamlRule]) *rawRule {
	if p := m.problem(); p != "" {
		r.fail(at.errorf("want a mapping with requests_per_unit and unit, got %s", p))
		return nil
	}
	y := &m.v
	k := &y.Keys.fieldLines
	rule := &rawRule{
		at:              at,
		line:            m.line,
		requestsPerUnit: read(r, k, "requests_per_unit", y.RequestsPerUnit, scalar.integer),
		unit:            read(r, k, "unit", y.Unit, scalar.str),
		unlimited:       read(r, k, "unlimited", y.Unlimited, scalar.boolean),
		name:            read(r, k, "name", y.Name, scalar.str).v,
		algorithm:       read(r, k, "algorithm", y.Algorithm, scalar.str),
		burst:           read(r, k, "burst", y.Burst, scalar.integer),
		unitMultiplier:  read(r, k, "unit_multiplier", y.UnitMultiplier, scalar.integer),
		failureMode:     read(r, k, "failure_mode", y.FailureMode, scalar.str),
		countRefused:    read(r, k, "count_refused", y.CountRefused, scalar.boolean),
		kinds:           r.kinds(k, y.Kinds),
		lease:           read(r, k, "lease", y.Lease, scalar.str),
		warnAt:          r.warnAt(k, &y.WarnAt),
	}
	rule.candidate = r.candidate(k, y.Candidate)
	_, ms, ats, _ := items(r, k, "replaces", &y.Replaces, true, "a list of {name: …}", "{name: …}")
	for i, m := range ms {
		name := read(r, &m.v.Keys.fieldLines, "name", m.v.Name, scalar.str)
		name.at = ats[i]
		rule.replaces = append(rule.replaces, name)
	}
	return rule
}

// kinds reads the modifiers' fields that a rule gives, in the table's
// order, each as its type says.
func (r *yamlReader) kinds(k *fieldLines, y kindScalars) []kindField {
	var fs []kindField
	for _, m := range limits.Modifiers {
		for _, f := range m.Fields {
			if _, set := k.lineOf(f.Name); !set {
				continue
			}
			var v field[limits.FieldValue]
			s := y[f.Name]
			switch f.Type {
			case limits.Bool:
				b := read(r, k, f.Name, s, scalar.boolean)
				v = field[limits.FieldValue]{limits.FieldValue{Bool: b.v}, b.at, b.set}
			case limits.Duration:
				d := read(r, k, f.Name, s, scalar.duration)
				v = field[limits.FieldValue]{limits.FieldValue{Duration: d.v}, d.at, d.set}
			default:
				str := read(r, k, f.Name, s, scalar.str)
				v = field[limits.FieldValue]{limits.FieldValue{String: str.v}, str.at, str.set}
			}
			fs = append(fs, kindField{f.Name, v})
		}
	}
	return fs
}

// metadata reads the metadata mapping, nil when absent, null or empty.
func (r *yamlReader) metadata(f *fieldLines, name string, m *metaValue) *structpb.Struct {
	at, set := f.at(name, m.line)
	if !set || m.v == nil || r.err != nil {
		return nil
	}
	s := m.v.GetStructValue()
	if s == nil {
		r.fail(at.errorf("want a mapping, got %s", m.got))
		return nil
	}
	if len(s.Fields) == 0 {
		return nil
	}
	return s
}
