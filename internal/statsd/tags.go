package statsd

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
)

// Tag is one of the tags every stat carries (envoyproxy/ratelimit's
// EXTRA_TAGS).
type Tag struct{ Key, Value string }

// ParseTags reads KEY:VALUE,KEY:VALUE, as envoyproxy/ratelimit reads
// EXTRA_TAGS: each pair one colon, the key not empty. The tags are sorted
// by key, a value's dots and a key's or a value's colons, bars, commas,
// hashes, spaces and bytes outside printable ASCII made underscores, and a pair
// with an empty value left out, as lyft/gostats serializes them.
func ParseTags(s string) ([]Tag, error) {
	var tags []Tag
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	for _, pair := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(pair, ":")
		if !ok || k == "" || strings.Contains(v, ":") {
			return nil, fmt.Errorf("%q: want KEY:VALUE pairs separated by commas", pair)
		}
		if v == "" {
			continue
		}
		tags = slices.DeleteFunc(tags, func(t Tag) bool { return t.Key == k })
		tags = append(tags, Tag{Key: clean(k, false), Value: clean(v, true)})
	}
	slices.SortFunc(tags, func(a, b Tag) int { return strings.Compare(a.Key, b.Key) })
	return tags, nil
}

// clean makes the bytes that would end a name's part, a stat's name or a
// tag underscores: a value's dots, as lyft/gostats does a tag's value, and
// every byte a stat key could not hold (descriptors.StatByteSafe), so that
// a tag cannot add a line or a tag of its own.
func clean(v string, dots bool) string {
	b := []byte(v)
	for i, c := range b {
		if !descriptors.StatByteSafe(c) || dots && c == '.' {
			b[i] = '_'
		}
	}
	return string(b)
}

// Mogrifier renames the stats whose names its pattern matches, and tags
// them, for DogStatsD (envoyproxy/ratelimit's DOG_STATSD_MOGRIFIER_*):
// $1, $2… in the name and the tags' values are the pattern's groups.
type Mogrifier struct {
	Pattern string            `json:"pattern"`
	Name    string            `json:"name"`
	Tags    map[string]string `json:"tags,omitempty"`

	re   *regexp.Regexp
	keys []string // Tags' keys, sorted
}

// Compile checks the mogrifier as envoyproxy/ratelimit does: a pattern
// that compiles, a name, and tags with keys and values.
func (m *Mogrifier) Compile() error {
	if m.Pattern == "" {
		return errors.New("no pattern")
	}
	re, err := regexp.Compile(m.Pattern)
	if err != nil {
		return fmt.Errorf("pattern %q: %w", m.Pattern, err)
	}
	if m.Name == "" {
		return errors.New("no name")
	}
	m.keys = m.keys[:0]
	for k, v := range m.Tags {
		if k == "" || v == "" {
			return fmt.Errorf("tag %q:%q: want a key and a value", k, v)
		}
		m.keys = append(m.keys, k)
	}
	slices.Sort(m.keys)
	m.re = re
	return nil
}

// ParseMogrifiers reads a JSON list of mogrifiers
// ([{"pattern": …, "name": …, "tags": {…}}]) and compiles each.
func ParseMogrifiers(s string) ([]Mogrifier, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var ms []Mogrifier
	d := json.NewDecoder(strings.NewReader(s))
	d.DisallowUnknownFields()
	if err := d.Decode(&ms); err != nil {
		return nil, fmt.Errorf("want a JSON list of {\"pattern\", \"name\", \"tags\"}: %w", err)
	}
	for i := range ms {
		if err := ms[i].Compile(); err != nil {
			return nil, fmt.Errorf("mogrifier %d: %w", i+1, err)
		}
	}
	return ms, nil
}

// mogrify renames name by the first mogrifier whose pattern matches it,
// and appends its tags to tags; a name none matches stays as it is.
func mogrify(ms []Mogrifier, name string, tags []string) (string, []string) {
	for i := range ms {
		m := &ms[i]
		groups := m.re.FindStringSubmatch(name)
		if groups == nil {
			continue
		}
		for _, k := range m.keys {
			tags = append(tags, k+":"+expand(m.Tags[k], groups))
		}
		return expand(m.Name, groups), tags
	}
	return name, tags
}

var groupRef = regexp.MustCompile(`\$\d+`)

// expand replaces $N in pattern with the Nth group; a group the pattern
// does not have stays as written.
func expand(pattern string, groups []string) string {
	return groupRef.ReplaceAllStringFunc(pattern, func(ref string) string {
		i, err := strconv.Atoi(ref[1:])
		if err != nil || i >= len(groups) {
			return ref
		}
		return groups[i]
	})
}
