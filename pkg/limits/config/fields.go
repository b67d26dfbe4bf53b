package config

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/envoy-rls/envoy-rls/internal/suggest"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// level is a kind of mapping of the limits file with its known fields.
type level struct {
	// where completes "unknown field ..." ("in a descriptor").
	where string
	// fields are the names the mapping's struct decodes, in its order
	// (which breaks ties between equally near suggestions).
	fields []string
}

// newLevel is the level of the mappings decoded into T: the names of T's
// fields are the yaml tags that the decoder reads, so the list of known
// fields cannot drift from what the decoder accepts.
func newLevel[T any](where string) *level {
	l := &level{where: where}
	t := reflect.TypeFor[T]()
	for i := range t.NumField() {
		if t.Field(i).Type == reflect.TypeFor[kindScalars]() {
			l.fields = append(l.fields, kindNames()...)
			continue
		}
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name != "" {
			l.fields = append(l.fields, name)
		}
	}
	return l
}

// kindNames are the names of the modifiers' fields, in the table's order.
func kindNames() []string {
	var names []string
	for _, m := range limits.Modifiers {
		for _, f := range m.Fields {
			names = append(names, f.Name)
		}
	}
	return names
}

var (
	rootLevel       = newLevel[yamlDomain]("at the top level")
	descriptorLevel = newLevel[yamlDescriptor]("in a descriptor")
	ruleLevel       = newLevel[yamlRule]("in a rate limit")
	replacesLevel   = newLevel[yamlReplace]("in a replaces entry")
	holdsLevel      = newLevel[yamlHolds]("in holds")
)

// home says where a field that is unknown at one level belongs instead, for
// the mistake of an indentation off by one.
var home = []struct {
	l    *level
	says string
}{
	{descriptorLevel, "it belongs in a descriptor"},
	{ruleLevel, "it belongs in rate_limit"},
}

func (l *level) known(name string) bool {
	for _, f := range l.fields {
		if f == name {
			return true
		}
	}
	return false
}

// unknown is the message for field name, unknown at level l: a field of
// another level gets where it belongs, a typo gets the nearest known field
// within two edits.
func (l *level) unknown(name string) string {
	msg := "unknown field " + l.where
	for _, h := range home {
		if h.l != l && h.l.known(name) {
			return fmt.Sprintf("%s (%s)", msg, h.says)
		}
	}
	return suggest.DidYouMean(msg, name, l.fields)
}
