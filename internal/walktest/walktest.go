// Package walktest is a model of the descriptor walk's rule
// (descriptors/walk.go) by brute force, independent of the walker and of
// the index it walks, for the property tests of the walker's users: Match
// (an ordered descriptor), MatchSet (an RLQS bucket id) and lint (entries
// whose values it knows in part).
package walktest

import (
	"fmt"
	"math/rand"
	"slices"
	"strings"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// Domain is the one domain of the trees RandomTree builds.
const Domain = "edge"

// Child is the child of n of kind k that takes e, read from n's children
// in config order (not from the index): the exact value; the first
// wildcard whose pattern matches; the bare key.
func Child(n *descriptors.Node, k descriptors.Kind, e descriptors.Entry) *descriptors.Node {
	for _, c := range n.Children() {
		if c.Descriptor.Key != e.Key || descriptors.KindOf(c) != k {
			continue
		}
		switch {
		case k == descriptors.Bare,
			k == descriptors.Exact && c.Descriptor.Value == e.Value,
			k == descriptors.Wildcard && descriptors.WildcardMatch(c.Descriptor.Value, e.Value):
			return c
		}
	}
	return nil
}

// Ordered is where the walk of an ordered descriptor ends: each level
// takes the child of the first kind that has one and never backs up; nil
// when a level has none (or entries is empty).
func Ordered(root *descriptors.Node, entries []descriptors.Entry) *descriptors.Node {
	n := root
	for _, e := range entries {
		var next *descriptors.Node
		for k := descriptors.Exact; k <= descriptors.Bare && next == nil; k++ {
			next = Child(n, k, e)
		}
		if next == nil {
			return nil
		}
		n = next
	}
	if len(entries) == 0 {
		return nil
	}
	return n
}

// Way is one walk of a set's entries: the node taken at each level, and
// its rank in the order of preference.
type Way struct {
	End  *descriptors.Node
	rank []int
}

// Ways are every walk of a set's entries that consumes them all, by brute
// force over the orders of the entries and the kinds of child at each
// level, in the order of preference: level by level, the kind of child
// first, then the entry's place, among those left, in key order.
func Ways(root *descriptors.Node, entries []descriptors.Entry) []Way {
	sorted := slices.Clone(entries)
	slices.SortStableFunc(sorted, func(a, b descriptors.Entry) int { return strings.Compare(a.Key, b.Key) })
	var out []Way
	var walk func(n *descriptors.Node, left []descriptors.Entry, rank []int)
	walk = func(n *descriptors.Node, left []descriptors.Entry, rank []int) {
		if len(left) == 0 {
			out = append(out, Way{End: n, rank: slices.Clone(rank)})
			return
		}
		for k := descriptors.Exact; k <= descriptors.Bare; k++ {
			for i, e := range left {
				if c := Child(n, k, e); c != nil {
					rest := slices.Delete(slices.Clone(left), i, i+1)
					walk(c, rest, append(rank, int(k)*64+i))
				}
			}
		}
	}
	if len(sorted) > 0 {
		walk(root, sorted, nil)
	}
	// Enumerated in order already; sorting says what the order is.
	slices.SortStableFunc(out, func(a, b Way) int { return slices.Compare(a.rank, b.rank) })
	return out
}

// Set is where the walk of a set's entries ends: the first way that ends
// on a limit (a node with rules); else the first that consumes every
// entry; else nil.
func Set(root *descriptors.Node, entries []descriptors.Entry) *descriptors.Node {
	ways := Ways(root, entries)
	for _, w := range ways {
		if len(w.End.Descriptor.Rules) > 0 {
			return w.End
		}
	}
	if len(ways) > 0 {
		return ways[0].End
	}
	return nil
}

// Keys and Values are what RandomTree and RandomEntries draw from: few, so
// that exact values, wildcards and bare keys collide often. Values are an
// entry's; a tree's may be patterns of them.
var (
	Keys   = []string{"a", "b", "c", "d"}
	Values = []string{"x", "y", "xy", "z"}
)

// RandomTree builds a config of one domain, Domain, up to four levels
// deep, with rules on about half its nodes.
func RandomTree(r *rand.Rand) *config.Config {
	values := []string{"", "", "x", "y", "x*", "*y"}
	names := 0
	var level func(depth int) []*config.Descriptor
	level = func(depth int) []*config.Descriptor {
		var out []*config.Descriptor
		seen := map[string]bool{}
		for range r.Intn(4) {
			k, v := Keys[r.Intn(len(Keys))], values[r.Intn(len(values))]
			if seen[k+"="+v] {
				continue
			}
			seen[k+"="+v] = true
			c := &config.Descriptor{Key: k, Value: v}
			if r.Intn(2) == 0 {
				names++
				c.Rules = []*config.Rule{{Name: fmt.Sprint("r", names)}}
			}
			if depth < 3 {
				c.Descriptors = level(depth + 1)
			}
			out = append(out, c)
		}
		return out
	}
	return &config.Config{Domains: map[string]*config.Domain{Domain: {Name: Domain, Descriptors: level(0)}}}
}

// RandomEntries draws one to four entries of distinct keys, in a random
// order.
func RandomEntries(r *rand.Rand) []descriptors.Entry {
	keys := slices.Clone(Keys)
	r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	es := make([]descriptors.Entry, 1+r.Intn(4))
	for i := range es {
		es[i] = descriptors.Entry{Key: keys[i], Value: Values[r.Intn(len(Values))]}
	}
	return es
}

// Each calls f with trees random trees from seed (RandomTree), each with
// five random sets of entries (RandomEntries).
func Each(seed int64, trees int, f func(c *config.Config, ids [][]descriptors.Entry)) {
	r := rand.New(rand.NewSource(seed))
	for range trees {
		c := RandomTree(r)
		ids := make([][]descriptors.Entry, 5)
		for i := range ids {
			ids[i] = RandomEntries(r)
		}
		f(c, ids)
	}
}
