package config

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// FuzzParse checks that Parse never panics, that every error is an *Error
// naming the file and a line inside it, and that every model it accepts is
// one the stores can decide. It is seeded with every fixture and with the
// edges of the algorithms' bounds and of rate_limits lists.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"domain: a\ndescriptors:\n  - key: k\n    rate_limit: {algorithm: leaky_bucket, unit: second, requests_per_unit: 10, burst: 10}\n",
		"domain: a\ndescriptors:\n  - key: k\n    rate_limit: {algorithm: leaky_bucket, unit: minute, unit_multiplier: 2, requests_per_unit: 7, burst: 0}\n",
		"domain: a\ndescriptors:\n  - key: k\n    rate_limit: {algorithm: sliding_log, unit: hour, requests_per_unit: 10000, count_refused: true}\n",
		"domain: a\ndescriptors:\n  - key: k\n    rate_limit: {algorithm: token_bucket, unit: day, requests_per_unit: 1, burst: 4294967296}\n",
		"domain: a\ndescriptors:\n  - key: k\n    rate_limits:\n      - {unit: second, requests_per_unit: 10}\n      - {algorithm: fixed_window, unit: day, requests_per_unit: 10000, count_refused: true}\n",
		"domain: a\ndescriptors:\n  - key: k\n    rate_limits: [{unit: second, requests_per_unit: 1}, {unit: second, unit_multiplier: 60, requests_per_unit: 1}, {unlimited: false, unit: minute, requests_per_unit: 1}]\n",
		"domain: a\ndescriptors:\n  - key: k\n    rate_limits: [&l {algorithm: token_bucket, unit: second, requests_per_unit: 5}, *l]\n",
		"domain: a\ndescriptors:\n  - key: k\n    rate_limits: [{unlimited: true, name: x, replaces: [{name: y}]}]\n",
		"domain: a\ndescriptors:\n  - key: k\n    rate_limits: []\n    rate_limit: {unlimited: true}\n",
		"domain: a\nholds: {id: rid, settle: done, lease: 24h}\ndescriptors:\n  - key: k\n    value: rid\n    rate_limit: {unit: second, requests_per_unit: 1}\n",
		"domain: a\nholds: {id: rid, settle: rid, lease: 1ns}\ndescriptors:\n  - key: done\n    descriptors: [{key: rid}]\n",
	} {
		f.Add([]byte(seed))
	}
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
		checkHolds(t, d.Holds, d.Descriptors)
		rules := checkDecidable(t, d.Descriptors)
		c := &Config{Domains: map[string]*Domain{d.Name: d}}
		if got := len(c.Lines()); got != rules {
			t.Fatalf("Lines: got %d lines, want one per rule, %d", got, rules)
		}
	})
}

// checkDecidable checks every rule under ds, with the default options, and
// counts them.
func checkDecidable(t *testing.T, ds []*Descriptor) int {
	t.Helper()
	n := 0
	for _, d := range ds {
		if d.Key == "" {
			t.Fatalf("line %d: got a descriptor with an empty key", d.Line)
		}
		counting := map[string]bool{}
		for _, r := range d.Rules {
			n++
			if r.Unlimited {
				if len(d.Rules) > 1 {
					t.Fatalf("line %d: got an unlimited rule among %d", r.Line, len(d.Rules))
				}
				if r.Limit != (limits.Limit{}) || r.CountRefused {
					t.Fatalf("line %d: got an unlimited rule with a limit: %+v", r.Line, r)
				}
				continue
			}
			l := r.Limit
			if err := l.Validate(); err != nil {
				t.Fatalf("line %d: got limit %v, invalid: %v", r.Line, l, err)
			}
			if r.CountRefused != l.CountRefused {
				t.Fatalf("line %d: got CountRefused %t, Limit.CountRefused %t", r.Line, r.CountRefused, l.CountRefused)
			}
			if w := l.MaxWait(); w > DefaultMaxDelay || w < 0 {
				t.Fatalf("line %d: got limit %v, with a wait of %s", r.Line, l, w)
			}
			if l.Algorithm != limits.TokenBucket && l.Algorithm != limits.LeakyBucket && l.Burst != 0 {
				t.Fatalf("line %d: got limit %v, with burst %d", r.Line, l, l.Burst)
			}
			id := fmt.Sprint(l.Algorithm, l.Requests, l.Period, l.Burst)
			if counting[id] {
				t.Fatalf("line %d: got limit %v twice on one descriptor", r.Line, l)
			}
			counting[id] = true
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

// checkHolds checks that holds h, if any, are ones the service can apply:
// two different keys, a lease within its bounds, and no descriptor under
// ds on either key.
func checkHolds(t *testing.T, h *Holds, ds []*Descriptor) {
	t.Helper()
	if h == nil {
		return
	}
	if h.ID == "" || h.Settle == "" || h.ID == h.Settle || h.Lease <= 0 || h.Lease > limits.MaxLease {
		t.Fatalf("got holds %+v", h)
	}
	for _, d := range ds {
		if d.Key == h.ID || d.Key == h.Settle {
			t.Fatalf("line %d: got a descriptor on key %q of holds %+v", d.Line, d.Key, h)
		}
		checkHolds(t, h, d.Descriptors)
	}
}
