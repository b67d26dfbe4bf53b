package descriptors

import (
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// refChild is the walk the wildcard index replaces, written out from the
// config: the exact value (the last of duplicates, as the map keeps it),
// then the first wildcard in config order that matches, then the bare key
// (the last of duplicates).
func refChild(children []*config.Descriptor, e Entry) *config.Descriptor {
	var exact, bare *config.Descriptor
	for _, d := range children {
		switch {
		case d.Key != e.Key:
		case d.Value == "":
			bare = d
		case !strings.Contains(d.Value, "*") && d.Value == e.Value:
			exact = d
		}
	}
	if exact != nil {
		return exact
	}
	for _, d := range children {
		if d.Key == e.Key && strings.Contains(d.Value, "*") && WildcardMatch(d.Value, e.Value) {
			return d
		}
	}
	return bare
}

// randPattern is a short pattern over a small alphabet with at least one
// `*`, so that prefixes repeat and nest and the stars fall at the start, in
// the middle, at the end, or several in a row.
func randPattern(rng *rand.Rand) string {
	const alphabet = "ab.*"
	b := make([]byte, rng.IntN(7))
	for i := range b {
		b[i] = alphabet[rng.IntN(len(alphabet))]
	}
	star := rng.IntN(len(b) + 1)
	return string(b[:star]) + "*" + string(b[star:])
}

// randValue is a random value, or often one a pattern of children matches
// (its stars replaced with random runs) or the pattern itself, so that
// lookups find something.
func randValue(rng *rand.Rand, children []*config.Descriptor) string {
	const alphabet = "ab.*"
	run := func(n int) string {
		b := make([]byte, rng.IntN(n))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	if len(children) == 0 || rng.IntN(4) == 0 {
		return run(10)
	}
	p := children[rng.IntN(len(children))].Value
	if rng.IntN(8) == 0 {
		return p
	}
	var b strings.Builder
	for _, part := range strings.Split(p, "*") {
		if b.Len() > 0 || rng.IntN(2) == 0 {
			b.WriteString(run(4))
		}
		b.WriteString(part)
	}
	return b.String()
}

// randChildren is one level of a config: wildcards under a few keys, some
// exact values and bare keys, n descriptors in all.
func randChildren(rng *rand.Rand, n int) []*config.Descriptor {
	keys := []string{"k", "l", "m"}
	children := make([]*config.Descriptor, n)
	for i := range children {
		d := &config.Descriptor{Key: keys[rng.IntN(len(keys))], Line: i}
		switch r := rng.IntN(10); {
		case r == 0:
			// bare key
		case r == 1:
			d.Value = strings.ReplaceAll(randPattern(rng), "*", "")
		case r == 2 && i > 0:
			// a duplicate of an earlier descriptor: the first must win
			prev := children[rng.IntN(i)]
			d.Key, d.Value = prev.Key, prev.Value
		default:
			d.Value = randPattern(rng)
		}
		children[i] = d
	}
	return children
}

// checkChildren checks that the index of children, and the node children
// build, return what refChild does for random values under every key.
func checkChildren(t *testing.T, rng *rand.Rand, children []*config.Descriptor, lookups int) {
	t.Helper()
	root := &Node{}
	root.add(children, "")
	var wild []*Node
	for _, d := range children {
		if strings.Contains(d.Value, "*") {
			wild = append(wild, &Node{Descriptor: d, Wildcard: true})
		}
	}
	forced := indexWildcards(wild)
	for range lookups {
		e := Entry{Key: []string{"k", "l", "m", "n"}[rng.IntN(4)], Value: randValue(rng, children)}
		want := refChild(children, e)
		var got *config.Descriptor
		if c := root.first(e); c != nil {
			got = c.Descriptor
		}
		if got != want {
			t.Fatalf("first(%q) = %s, want %s\nconfig: %s", e, descr(got), descr(want), configString(children))
		}
		// The index, even of fewer wildcards than the node would index.
		wantWild := refChild(withoutLiteral(children), e)
		got = nil
		if c := forced.find(e); c != nil {
			got = c.Descriptor
		}
		if got != wantWild {
			t.Fatalf("indexed find(%q) = %s, want %s\nconfig: %s", e, descr(got), descr(wantWild), configString(children))
		}
	}
}

// withoutLiteral is children's wildcards alone.
func withoutLiteral(children []*config.Descriptor) []*config.Descriptor {
	var w []*config.Descriptor
	for _, d := range children {
		if strings.Contains(d.Value, "*") {
			w = append(w, d)
		}
	}
	return w
}

func descr(d *config.Descriptor) string {
	if d == nil {
		return "nil"
	}
	return strconv.Quote(d.Key+"="+d.Value) + " #" + strconv.Itoa(d.Line)
}

func configString(children []*config.Descriptor) string {
	var b strings.Builder
	for _, d := range children {
		b.WriteString(descr(d) + " ")
	}
	return b.String()
}

// TestWildcardIndex checks on random configs, from a few wildcards (walked)
// to a few hundred (indexed), that the index finds the child the
// config-order walk finds. DESCRIPTORS_FUZZ_N sets the number of configs.
func TestWildcardIndex(t *testing.T) {
	configs := 300
	if s := os.Getenv("DESCRIPTORS_FUZZ_N"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("DESCRIPTORS_FUZZ_N=%q: %v", s, err)
		}
		configs = n
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range configs {
		n := rng.IntN(40)
		if rng.IntN(10) == 0 {
			n = 100 + rng.IntN(300)
		}
		checkChildren(t, rng, randChildren(rng, n), 200)
	}
}

// TestWildcardIndexShapes checks hand-picked configs the random ones may
// miss: one prefix shared by many patterns, patterns that are prefixes or
// suffixes of others, the empty prefix and suffix, duplicates.
func TestWildcardIndexShapes(t *testing.T) {
	shapes := [][]string{
		{"*", "a*", "ab*", "abc*", "abcd*", "*d", "*cd", "*bcd", "a*d", "**", "a**d"},
		{"abcd*", "abc*", "ab*", "a*", "*", "*bcd", "*cd", "*d"},
		{"x*1", "x*2", "x*3", "x*4", "x*5", "x*6", "x*7", "x*8", "x*9", "x*", "x*1"},
		{"/api/*/items", "/api/*", "/api/v1/*", "*/items", "*/*/*", "/api/v1/items*", "*.json", "/*.json"},
		{"a*a", "aa*aa", "a*a*a", "*aa*", "aaa*", "*aaa", "a*", "*a", "a*a"},
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, shape := range shapes {
		var children []*config.Descriptor
		for i, p := range shape {
			children = append(children, &config.Descriptor{Key: "k", Value: p, Line: i})
		}
		checkChildren(t, rng, children, 2000)
	}
}

// FuzzWildcardIndex checks that the index finds what the config-order walk
// finds, for patterns (split at `|`, each under key k or l by its length)
// and a value.
func FuzzWildcardIndex(f *testing.F) {
	f.Add("a*|ab*|*b|a*b|*|**", "ab")
	f.Add("/api/*/items|/api/*|*/items|*.json", "/api/v1/items")
	f.Add("x*1|x*2|x*3|x*4|x*5|x*6|x*7|x*8|x*9|x*", "xx9")
	f.Add("a*a|aa*aa|a*a*a|*aa*|aaa*|*aaa|a*|*a|a*a|a", "aaa")
	f.Add("\xff*\x00|*\xff|\xff\xfe*", "\xff\xfe\x00")
	f.Fuzz(func(t *testing.T, patterns, value string) {
		var children []*config.Descriptor
		for i, p := range strings.Split(patterns, "|") {
			if !strings.Contains(p, "*") {
				p += "*"
			}
			children = append(children, &config.Descriptor{Key: []string{"k", "l"}[len(p)%2], Value: p, Line: i})
		}
		var wild []*Node
		for _, d := range children {
			wild = append(wild, &Node{Descriptor: d, Wildcard: true})
		}
		ix := indexWildcards(wild)
		for _, key := range []string{"k", "l", "m"} {
			e := Entry{Key: key, Value: value}
			want := refChild(children, e)
			var got *config.Descriptor
			if c := ix.find(e); c != nil {
				got = c.Descriptor
			}
			if got != want {
				t.Fatalf("find(%q) = %s, want %s", e, descr(got), descr(want))
			}
		}
	})
}

// BenchmarkWildcardChild finds, among n wildcards of one key, the one a
// value only the last matches, walking them in config order (walk) and
// with the index (index): patterns with a literal prefix (`v7-*`) or a
// literal suffix (`*.v7`).
func BenchmarkWildcardChild(b *testing.B) {
	for _, shape := range []struct {
		name           string
		pattern, value func(i int) string
	}{
		{"prefix", func(i int) string { return "v" + strconv.Itoa(i) + "-*" }, func(i int) string { return "v" + strconv.Itoa(i) + "-suffix" }},
		{"suffix", func(i int) string { return "*.v" + strconv.Itoa(i) }, func(i int) string { return "prefix.v" + strconv.Itoa(i) }},
	} {
		for _, n := range []int{10, 10_000} {
			var wild []*Node
			for i := range n {
				wild = append(wild, &Node{Descriptor: &config.Descriptor{Key: "route", Value: shape.pattern(i)}, Wildcard: true})
			}
			e := Entry{Key: "route", Value: shape.value(n - 1)}
			for _, ix := range []struct {
				name string
				w    wildcards
			}{
				{"walk", wildcards{ordered: wild}},
				{"index", indexWildcards(wild)},
			} {
				b.Run(shape.name+"/wildcards="+strconv.Itoa(n)+"/"+ix.name, func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						if ix.w.find(e) != wild[n-1] {
							b.Fatal("not the last wildcard")
						}
					}
				})
			}
		}
	}
}
