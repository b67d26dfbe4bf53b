package descriptors

import (
	"cmp"
	"math"
	"slices"
	"strings"
)

// linearWildcards is the most wildcard children a node walks one by one
// rather than index. The index costs a map lookup and a binary search or
// two, 40 to 80 ns whatever the number; a walk of 6 costs 25 ns when the
// first matches and 100 when none or the last does, so about as much on
// average, and a walk of 10 already more (BenchmarkWildcardChild).
const linearWildcards = 6

// wildcards holds a node's wildcard children so that find returns the one
// the config-order walk would: the earliest in config order whose key is
// the entry's and whose pattern matches its value. A config may hold
// 10,000s of them under one key, so a large set is indexed, at load, by
// each pattern's literal prefix or suffix, and a lookup tries only the
// patterns whose literal prefix or suffix the value has.
type wildcards struct {
	// ordered are the children in config order, when there are few;
	// nil when byKey indexes them.
	ordered []*Node
	byKey   map[string]*wildcardGroup
}

// wildcardGroup indexes the wildcard children of one key. Each pattern is
// filed under its longer literal end: the bytes before its first `*` (in
// prefixes) or after its last (in suffixes), whichever says more about
// the values it can match. A pattern with neither, `*` or `*x*`, has the
// empty prefix, which every value has.
type wildcardGroup struct {
	prefixes, suffixes affixSet
}

// affixSet files patterns under a literal prefix (or, with fromEnd, a
// literal suffix) of theirs. Its affixes are sorted and distinct so that
// one binary search finds every affix a value starts with: any string
// sorted between an affix and a value that starts with it starts with it
// too, so each such affix is one the last affix not after the value starts
// with, and parent chains those.
type affixSet struct {
	fromEnd bool
	// affixes are sorted, byte-wise from the end when fromEnd.
	affixes []string
	// parent[i] is the longest affix that affixes[i] itself starts (or
	// ends) with, -1 for none.
	parent []int32
	// cands[start[i]:start[i+1]] are the patterns filed under affixes[i],
	// in config order, so a lookup stops at the first that matches.
	cands []candidate
	start []int32
}

// candidate is one wildcard child and its place in config order.
type candidate struct {
	pos  int32
	node *Node
}

// newWildcards prepares children, a node's wildcard children in config
// order, for find.
func newWildcards(children []*Node) wildcards {
	if len(children) <= linearWildcards {
		return wildcards{ordered: children}
	}
	return indexWildcards(children)
}

// indexWildcards indexes children whatever their number.
func indexWildcards(children []*Node) wildcards {
	byKey := make(map[string][]candidate)
	for i, c := range children {
		byKey[c.Descriptor.Key] = append(byKey[c.Descriptor.Key], candidate{int32(i), c})
	}
	w := wildcards{byKey: make(map[string]*wildcardGroup, len(byKey))}
	for key, cands := range byKey {
		var prefixed, suffixed []candidate
		for _, c := range cands {
			p, s := literalEnds(c.node.Descriptor.Value)
			if len(s) > len(p) {
				suffixed = append(suffixed, c)
			} else {
				prefixed = append(prefixed, c)
			}
		}
		w.byKey[key] = &wildcardGroup{prefixes: newAffixSet(prefixed, false), suffixes: newAffixSet(suffixed, true)}
	}
	return w
}

// literalEnds returns the bytes of pattern before its first `*` and after
// its last.
func literalEnds(pattern string) (prefix, suffix string) {
	prefix, _, _ = strings.Cut(pattern, "*")
	return prefix, pattern[strings.LastIndexByte(pattern, '*')+1:]
}

func newAffixSet(cands []candidate, fromEnd bool) affixSet {
	s := affixSet{fromEnd: fromEnd, cands: cands}
	if len(cands) == 0 {
		return s
	}
	slices.SortFunc(cands, func(a, b candidate) int {
		return cmp.Or(s.compare(s.affix(a), s.affix(b)), cmp.Compare(a.pos, b.pos))
	})
	// stack holds the chain of affixes the current one may start with.
	var stack []int32
	for i, c := range cands {
		a := s.affix(c)
		if n := len(s.affixes); n > 0 && s.affixes[n-1] == a {
			continue
		}
		for len(stack) > 0 && !s.has(a, s.affixes[stack[len(stack)-1]]) {
			stack = stack[:len(stack)-1]
		}
		parent := int32(-1)
		if len(stack) > 0 {
			parent = stack[len(stack)-1]
		}
		stack = append(stack, int32(len(s.affixes)))
		s.affixes = append(s.affixes, a)
		s.parent = append(s.parent, parent)
		s.start = append(s.start, int32(i))
	}
	s.start = append(s.start, int32(len(cands)))
	return s
}

// find returns the child the config-order walk finds for e, or nil.
func (w *wildcards) find(e Entry) *Node {
	if w.byKey == nil {
		for _, c := range w.ordered {
			if c.Descriptor.Key == e.Key && WildcardMatch(c.Descriptor.Value, e.Value) {
				return c
			}
		}
		return nil
	}
	g := w.byKey[e.Key]
	if g == nil {
		return nil
	}
	best := candidate{pos: math.MaxInt32}
	g.prefixes.find(e.Value, &best)
	g.suffixes.find(e.Value, &best)
	return best.node
}

// find sets best to the earliest candidate of s that matches value, if it
// comes before best.
func (s *affixSet) find(value string, best *candidate) {
	i := s.lastNotAfter(value)
	if i < 0 {
		return
	}
	// The affixes value has are affixes[i]'s that are no longer than what
	// the two share.
	shared := s.shared(s.affixes[i], value)
	for i >= 0 && len(s.affixes[i]) > shared {
		i = int(s.parent[i])
	}
	for ; i >= 0; i = int(s.parent[i]) {
		n := len(s.affixes[i])
		for _, c := range s.cands[s.start[i]:s.start[i+1]] {
			if c.pos >= best.pos {
				break
			}
			// The affix is literal and value has it: match the rest.
			p, v := c.node.Descriptor.Value, value
			if s.fromEnd {
				p, v = p[:len(p)-n], v[:len(v)-n]
			} else {
				p, v = p[n:], v[n:]
			}
			if WildcardMatch(p, v) {
				*best = c
				break
			}
		}
	}
}

// lastNotAfter returns the index of the last affix not after value, -1 for
// none.
func (s *affixSet) lastNotAfter(value string) int {
	lo, hi := 0, len(s.affixes)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if s.compare(s.affixes[m], value) <= 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo - 1
}

// affix is the literal end c is filed under.
func (s *affixSet) affix(c candidate) string {
	p, suffix := literalEnds(c.node.Descriptor.Value)
	if s.fromEnd {
		return suffix
	}
	return p
}

// compare orders strings byte-wise, from the end when fromEnd.
func (s *affixSet) compare(a, b string) int {
	if !s.fromEnd {
		return strings.Compare(a, b)
	}
	for i := 1; i <= len(a) && i <= len(b); i++ {
		if c := cmp.Compare(a[len(a)-i], b[len(b)-i]); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(a), len(b))
}

// has reports whether v starts (or, fromEnd, ends) with affix.
func (s *affixSet) has(v, affix string) bool {
	if s.fromEnd {
		return strings.HasSuffix(v, affix)
	}
	return strings.HasPrefix(v, affix)
}

// shared is how many bytes a and b share at the start (or, fromEnd, the
// end).
func (s *affixSet) shared(a, b string) int {
	n := min(len(a), len(b))
	if s.fromEnd {
		a, b = a[len(a)-n:], b[len(b)-n:]
		for i := range n {
			if a[n-1-i] != b[n-1-i] {
				return i
			}
		}
		return n
	}
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}
