package config

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse checks that Parse never panics, that every error is an *Error
// naming the file and a line inside it, and that every model it accepts is
// one the stores can decide. It is seeded with every fixture.
func FuzzParse(f *testing.F) {
	err := filepath.WalkDir("testdata", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if data, err := os.ReadFile(path); err == nil { // a symlink to a directory fails
			f.Add(data)
		}
		return nil
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Parse("fuzz.yaml", data)
		if err != nil {
			e, ok := err.(*Error)
			if !ok {
				t.Fatalf("got error of type %T (%v), want *Error", err, err)
			}
			if e.File != "fuzz.yaml" || e.Msg == "" {
				t.Fatalf("got %#v, want File fuzz.yaml and a Msg", e)
			}
			if lines := lineBreaks(data) + 1; e.Line < 0 || e.Line > lines {
				t.Fatalf("got line %d, want 0 to %d: %v", e.Line, lines, e)
			}
			return
		}
		if d.Name == "" {
			t.Fatal("got a domain without a name")
		}
		rules := checkDecidable(t, d.Descriptors)
		c := &Config{Domains: map[string]*Domain{d.Name: d}}
		if got := len(c.Lines()); got != rules {
			t.Fatalf("Lines: got %d lines, want one per rule, %d", got, rules)
		}
	})
}

// checkDecidable checks every rule under ds and counts them.
func checkDecidable(t *testing.T, ds []*Descriptor) int {
	t.Helper()
	n := 0
	for _, d := range ds {
		if d.Key == "" {
			t.Fatalf("line %d: got a descriptor with an empty key", d.Line)
		}
		for _, r := range d.Rules {
			n++
			if r.Unlimited {
				continue
			}
			if err := r.Limit.Validate(); err != nil {
				t.Fatalf("line %d: got limit %v, invalid: %v", r.Line, r.Limit, err)
			}
			if !r.FailureMode.Implemented() || r.CountRefused {
				t.Fatalf("line %d: got a rule this build cannot enforce: %+v", r.Line, r)
			}
		}
		n += checkDecidable(t, d.Descriptors)
	}
	return n
}

// lineBreaks counts YAML's line breaks in data, \r\n as two: a bound.
func lineBreaks(data []byte) int {
	n := 0
	for _, b := range []string{"\n", "\r", "\u0085", "\u2028", "\u2029"} {
		n += bytes.Count(data, []byte(b))
	}
	return n
}
