package config

import (
	"strconv"

	"google.golang.org/protobuf/types/known/structpb"
)

// warn_at on a limit lists soft thresholds, fractions of the limit's
// capacity: warn_at: [0.5, 0.8] makes an answer say when a descriptor's
// usage has reached half, then four fifths, of the limit, and counts each
// hit that reaches one, so that a gateway or an app can warn a tenant
// before the first refusal. It changes no decision. Its usage is the
// limit's capacity less what the answer reports remaining
// (docs/semantics.md, "Soft thresholds").

// MaxWarnAt is the most thresholds one limit may list: each is a label
// value of a metric and an entry the answers may carry, and a warning
// every few percent is a gauge, not a warning.
const MaxWarnAt = 5

// warnAt reads warn_at, a list of numbers (decoded as metadata is: any
// YAML value, a number keeping its type); a null warn_at is as good as
// none. Every error about it is at the list's line.
func (r *yamlReader) warnAt(f *fieldLines, m *metaValue) field[[]field[float64]] {
	at, set := f.at("warn_at", m.line)
	if !set || m.v == nil || r.err != nil {
		return field[[]field[float64]]{at: at}
	}
	if _, null := m.v.Kind.(*structpb.Value_NullValue); null {
		return field[[]field[float64]]{at: at}
	}
	l := m.v.GetListValue()
	if l == nil {
		r.fail(at.errorf("want a list of fractions of the limit such as [0.5, 0.8], got %s", m.got))
		return field[[]field[float64]]{at: at}
	}
	items := make([]field[float64], len(l.Values))
	for i, v := range l.Values {
		n, ok := v.Kind.(*structpb.Value_NumberValue)
		if !ok {
			r.fail(at.errorf("want a fraction of the limit such as 0.8, got %s", describe(v)))
			break
		}
		items[i] = field[float64]{n.NumberValue, at, true}
	}
	return field[[]field[float64]]{items, at, true}
}

// describe says what a metadata value is, for "want …, got …".
func describe(v *structpb.Value) string {
	switch k := v.Kind.(type) {
	case *structpb.Value_StringValue:
		return strconv.Quote(k.StringValue)
	case *structpb.Value_ListValue:
		return "a list"
	case *structpb.Value_StructValue:
		return "a mapping"
	case *structpb.Value_BoolValue:
		return strconv.FormatBool(k.BoolValue)
	}
	return "null"
}

// warnAt checks the thresholds of raw against r, a limit already
// validated: at most MaxWarnAt of them, each above 0 and below 1, in
// ascending order, on a limit with room (not a block rule, nor a
// leaky_bucket without a queue). Nil when the rule lists none.
func (v validator) warnAt(r *Rule, raw *rawRule) ([]float64, error) {
	f := raw.warnAt
	if !f.set {
		return nil, nil
	}
	switch {
	case len(f.v) == 0:
		return nil, f.at.errorf("empty list (leave warn_at out for no thresholds)")
	case len(f.v) > MaxWarnAt:
		return nil, f.at.errorf("%d thresholds, more than %d", len(f.v), MaxWarnAt)
	case r.Limit.Capacity() == 0:
		return nil, f.at.nameErrorf("a limit with no room (%s) has no usage to warn of", r.Limit)
	}
	out := make([]float64, len(f.v))
	for i, t := range f.v {
		switch {
		case !(t.v > 0 && t.v < 1):
			return nil, t.at.errorf("%s is not a fraction of the limit: want a number above 0 and below 1", FormatFraction(t.v))
		case i > 0 && t.v <= out[i-1]:
			return nil, t.at.errorf("%s after %s: list the thresholds in ascending order, each once",
				FormatFraction(t.v), FormatFraction(out[i-1]))
		}
		out[i] = t.v
	}
	return out, nil
}

// FormatFraction writes a threshold as the file would, in the fewest
// digits that read back the same (0.8, not 0.80000000000000004): in
// /rlconfig and as a metric's label value.
func FormatFraction(t float64) string { return strconv.FormatFloat(t, 'g', -1, 64) }
