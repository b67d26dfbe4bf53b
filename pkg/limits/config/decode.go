package config

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// The types a limits file is decoded into (yaml.go) hold these wrappers,
// which keep what errors need: lines, and what the file has where the
// format wants something else. Those around mappings and lists implement
// the decoder's older UnmarshalYAML(func(any) error) form, which it still
// honours: that function decodes with the same decoder, so strict mode,
// the alias bound and the alias cycle check reach every level.
// UnmarshalYAML(*yaml.Node) would have to call Node.Decode, which starts a
// new, lax decoder.

// keys is the inline field of a mapping type T. The decoder hands it every
// mapping it decodes into T before it decodes T's fields: the file's own
// mapping, then those its merge keys bring, in the order it merges them.
// It refuses the field names T does not have, with a message that says
// where they belong or what was meant (strict mode alone would say only
// "field … not found in type …", and stays on behind it), and records the
// line of each field name, including those of null values, which the
// decoder skips.
type keys[T interface{ level() *level }] struct{ fieldLines }

// fieldLines is where one mapping wrote its fields.
type fieldLines struct {
	// line is the mapping's own line.
	line int
	// lines are the line of each field's name, in the order the names
	// come; the first mapping to set a field wins, as in the decoder's
	// merges. A list, not a map: a mapping has a few fields, and a large
	// file has a hundred thousand mappings, whose maps weighed several
	// times the file.
	lines []fieldLine
}

type fieldLine struct {
	name string
	line int
}

// UnmarshalYAML checks and records the fields of mapping n.
func (k *keys[T]) UnmarshalYAML(n *yaml.Node) error {
	var t T
	l := t.level()
	if err := checkKeys(n); err != nil {
		return err
	}
	if k.lines == nil {
		k.line, k.lines = n.Line, make([]fieldLine, 0, len(n.Content)/2)
	}
	for i := 0; i < len(n.Content); i += 2 {
		name, line := deref(n.Content[i]), n.Content[i].Line
		if isMerge(name) {
			continue
		}
		if !l.known(name.Value) {
			return &Error{Line: line, Word: name.Value, Msg: l.unknown(name.Value)}
		}
		if _, set := k.lineOf(name.Value); !set {
			k.lines = append(k.lines, fieldLine{name.Value, line})
		}
	}
	return nil
}

// lineOf is the line of field name, and whether the mapping has it.
func (f *fieldLines) lineOf(name string) (int, bool) {
	for _, l := range f.lines {
		if l.name == name {
			return l.line, true
		}
	}
	return 0, false
}

// at is the position of the field name, whose value is on valueLine (0
// for a null value, which the decoder skips: it is then at the name), and
// whether the mapping has the field at all.
func (f *fieldLines) at(name string, valueLine int) (pos, bool) {
	line, set := f.lineOf(name)
	if valueLine == 0 {
		valueLine = line
	}
	return pos{line: valueLine, key: line, name: name}, set
}

// checkKeys refuses what the decoder would report as mere strings, or not
// at all, in the names of mapping n: a name that is not a scalar, the same
// name twice (with both lines), and a merge key whose value is not a
// mapping or a list of mappings (the decoder's message has no line). The
// mappings a merge key brings are checked too, as the decoder checks them
// before T's keys sees them, but not the mappings that their own merge
// keys bring: those are checked when the decoder hands their parent to
// keys, which also stops at an anchor that merges itself.
func checkKeys(n *yaml.Node) error {
	return checkNames(n, true)
}

func checkNames(n *yaml.Node, merges bool) error {
	first := make(map[string]int, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		name, line, value := deref(n.Content[i]), n.Content[i].Line, n.Content[i+1]
		if name.Kind != yaml.ScalarNode || isNull(name) {
			return &Error{Line: line, Msg: "want a field name, got " + got(name)}
		}
		if at, dup := first[name.Value]; dup {
			return &Error{Line: line, Word: name.Value, Msg: fmt.Sprintf("duplicate field, first at line %d", at)}
		}
		first[name.Value] = line
		if isMerge(name) && merges {
			if err := checkMerge(value); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkMerge checks the value v of a merge key: a mapping, or a list of
// mappings, with proper names.
func checkMerge(v *yaml.Node) error {
	const want = "want a mapping or a list of mappings to merge, got "
	merged := []*yaml.Node{v}
	if deref(v).Kind == yaml.SequenceNode {
		merged = deref(v).Content
	}
	for _, m := range merged {
		if deref(m).Kind != yaml.MappingNode {
			return &Error{Line: m.Line, Word: "<<", Msg: want + got(deref(m))}
		}
		if err := checkNames(deref(m), false); err != nil {
			return err
		}
	}
	return nil
}

func isMerge(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!merge"
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// deref resolves an alias; the decoder has already refused unknown
// anchors.
func deref(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// got describes a node for "want …, got …" messages; nil is a null value.
func got(n *yaml.Node) string {
	if n == nil {
		return "null"
	}
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

// located gives an error of the decoder that has no line (its alias
// checks: "anchor 'a' value contains itself", "document contains excessive
// aliasing") the line of n, the innermost value this package decodes
// around the problem. The package's own errors and the decoder's
// TypeErrors, which have lines, pass unchanged.
func located(n *yaml.Node, err error) error {
	if err == nil || inDocument(err) {
		return err
	}
	return &Error{Line: n.Line, Msg: "invalid YAML: " + strings.TrimPrefix(err.Error(), "yaml: "), err: err}
}

// scalar is a value the format wants as a scalar, kept as the file has it,
// so that reading it can say what the file has instead. It keeps a copy
// of what it needs of the decoder's node, not the node: a node holds its
// children, comments and anchors, and the decoder's tree of a whole file
// is many times the file, while the decoded types live on until the raw
// model is read from them.
type scalar struct{ v *scalarValue }

// scalarValue is what a scalar keeps of its node.
type scalarValue struct {
	value, tag string // tag: the node's ShortTag
	line       int
	kind       yaml.Kind
	style      yaml.Style
}

// UnmarshalYAML keeps what n is, of any kind.
func (s *scalar) UnmarshalYAML(n *yaml.Node) error {
	s.v = &scalarValue{value: n.Value, tag: n.ShortTag(), line: n.Line, kind: n.Kind, style: n.Style}
	return nil
}

// node rebuilds the node, without its children, for got and Decode; nil
// for null.
func (s scalar) node() *yaml.Node {
	if s.v == nil {
		return nil
	}
	return &yaml.Node{Kind: s.v.kind, Style: s.v.style, Tag: s.v.tag, Value: s.v.value, Line: s.v.line}
}

// line is the value's line, 0 for null.
func (s scalar) line() int {
	if s.v == nil {
		return 0
	}
	return s.v.line
}

// str reads a string field. Any scalar is taken as written, as
// envoyproxy/ratelimit does (value: 200 is the string "200"); null is the
// empty string.
func (s scalar) str(at pos) (string, *Error) {
	switch {
	case s.v == nil || s.v.kind == yaml.ScalarNode && s.v.tag == "!!null":
		return "", nil
	case s.v.kind != yaml.ScalarNode:
		return "", at.errorf("want a string, got %s", got(s.node()))
	}
	return s.v.value, nil
}

// boolean reads a YAML bool. The YAML 1.1 spellings (yes, no, on, off, y,
// n) are also accepted when unquoted, because envoyproxy/ratelimit's YAML
// library reads them as bools and its files must load unchanged.
func (s scalar) boolean(at pos) (bool, *Error) {
	if v := s.node(); v != nil && v.Kind == yaml.ScalarNode {
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
	return false, at.errorf("want true or false, got %s", got(s.node()))
}

var digits = regexp.MustCompile(`^[-+]?[0-9][0-9_]*$`)

// integer reads a YAML int: 10, not "10", not ten, not 10.0.
func (s scalar) integer(at pos) (int64, *Error) {
	if v := s.node(); v != nil && v.Kind == yaml.ScalarNode {
		if v.ShortTag() == "!!int" {
			var i int64
			if err := v.Decode(&i); err == nil {
				return i, nil
			}
		}
		if v.Style == 0 && digits.MatchString(v.Value) {
			return 0, at.errorf("%s is out of range", v.Value)
		}
	}
	return 0, at.errorf("want an integer, got %s", got(s.node()))
}

// nodeRef takes the node it is decoded from, as it is.
type nodeRef struct{ n *yaml.Node }

func (r *nodeRef) UnmarshalYAML(n *yaml.Node) error {
	r.n = n
	return nil
}

// node returns the node that decode, the argument of an UnmarshalYAML of
// the older form, decodes (with aliases resolved): decoding it into a
// *yaml.Node would decode a Node as a struct.
func node(decode func(any) error) (*yaml.Node, error) {
	var r nodeRef
	err := decode(&r)
	return r.n, err
}

// mapping is a value the format wants as a mapping, decoded as T.
type mapping[T any] struct {
	v T
	// line is the mapping's line; set says the file has a value other
	// than null, and got describes it when it is not a mapping.
	line int
	set  bool
	got  string
}

// UnmarshalYAML decodes a mapping into m.v, after checking its names (the
// decoder refuses duplicates with a message of its own, and before T's
// keys sees them).
func (m *mapping[T]) UnmarshalYAML(decode func(any) error) error {
	n, err := node(decode)
	if err != nil {
		return err
	}
	m.line, m.set = n.Line, true
	if n.Kind != yaml.MappingNode {
		m.got = got(n)
		return nil
	}
	if err := checkKeys(n); err != nil {
		return err
	}
	return located(n, decode(&m.v))
}

// problem describes what the file has instead of a mapping, or "".
func (m *mapping[T]) problem() string { return problem(m.set, m.got) }

// problem describes what a file has instead of the mapping or list the
// format wants: got, or null when the value is not set.
func problem(set bool, got string) string {
	if !set {
		return "null"
	}
	return got
}

// list is a value the format wants as a list of mappings, decoded as T.
type list[T any] struct {
	items []*mapping[T]
	// lines are the items' lines as written: an alias's own line, not that
	// of the mapping it stands for.
	lines []int
	line  int
	set   bool
	got   string
}

// UnmarshalYAML decodes a list into l.items.
func (l *list[T]) UnmarshalYAML(decode func(any) error) error {
	n, err := node(decode)
	if err != nil {
		return err
	}
	l.line, l.set = n.Line, true
	if n.Kind != yaml.SequenceNode {
		l.got = got(n)
		return nil
	}
	if err := located(n, decode(&l.items)); err != nil {
		return err
	}
	for i, item := range n.Content {
		if l.items[i] == nil { // a null item, which the decoder leaves nil
			l.items[i] = &mapping[T]{}
		}
		l.lines = append(l.lines, item.Line)
	}
	return nil
}

// metaValue is a metadata value: any YAML value, kept as a
// google.protobuf.Value. Scalars keep the type YAML gives them (true,
// 2, 1.5, null); any other (a string, a date) is its text as written.
type metaValue struct {
	v    *structpb.Value
	line int
	got  string
}

// UnmarshalYAML converts a YAML value, decoding what it holds with the
// same decoder, so that merge keys, aliases and their bounds apply.
func (m *metaValue) UnmarshalYAML(decode func(any) error) error {
	n, err := node(decode)
	if err != nil {
		return err
	}
	m.line, m.got = n.Line, got(n)
	switch n.Kind {
	case yaml.MappingNode:
		if err := checkKeys(n); err != nil {
			return err
		}
		var fields map[string]*metaValue
		if err := decode(&fields); err != nil {
			return located(n, err)
		}
		s := &structpb.Struct{Fields: make(map[string]*structpb.Value, len(fields))}
		for name, f := range fields {
			s.Fields[name] = f.value()
		}
		m.v = structpb.NewStructValue(s)
	case yaml.SequenceNode:
		var items []*metaValue
		if err := decode(&items); err != nil {
			return located(n, err)
		}
		l := &structpb.ListValue{Values: make([]*structpb.Value, len(items))}
		for i, item := range items {
			l.Values[i] = item.value()
		}
		m.v = structpb.NewListValue(l)
	default:
		if m.v, err = metaScalar(n, decode); err != nil {
			return located(n, err)
		}
	}
	return nil
}

// metaScalar converts scalar n by the type YAML resolves it to.
func metaScalar(n *yaml.Node, decode func(any) error) (*structpb.Value, error) {
	switch n.ShortTag() {
	case "!!null":
		return structpb.NewNullValue(), nil
	case "!!bool":
		var b bool
		err := decode(&b)
		return structpb.NewBoolValue(b), err
	case "!!int", "!!float":
		var f float64
		err := decode(&f)
		return structpb.NewNumberValue(f), err
	}
	return structpb.NewStringValue(n.Value), nil
}

// value is m as a Value; a nil m is a null value, which the decoder leaves
// nil.
func (m *metaValue) value() *structpb.Value {
	if m == nil || m.v == nil {
		return structpb.NewNullValue()
	}
	return m.v
}
