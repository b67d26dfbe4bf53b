package lint

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// tree is one domain's descriptors, indexed as envoy-rls indexes them, so
// that lint walks them with envoy-rls's own walker (descriptors.Shapes),
// for shapes whose values may be unknown.
type tree struct {
	domain *config.Domain
	ix     *descriptors.Index
	// limits are the nodes with rules, in file order.
	limits []*lnode
}

// lnode is a node of the config tree; its Path names it: key_value.key2.
type lnode = descriptors.Node

// treeDomain is the name a tree's one domain has in its index.
const treeDomain = ""

func newTree(d *config.Domain) *tree {
	t := &tree{domain: d, ix: descriptors.NewIndex(&config.Config{Domains: map[string]*config.Domain{treeDomain: d}})}
	t.addLimits(t.ix.Root(treeDomain))
	return t
}

func (t *tree) addLimits(n *lnode) {
	for _, c := range n.Children() {
		if len(c.Descriptor.Rules) > 0 {
			t.limits = append(t.limits, c)
		}
		t.addLimits(c)
	}
}

// matchResult is where a shape's walks end.
type matchResult struct {
	// full: some walk ends on a limit whatever the unknown values are
	// (a bare key or a wildcard took them).
	full bool
	// limited are the limits walks end on without restriction.
	limited []*lnode
	// restricted are the limits walks end on only for some values: an
	// unknown value met exact values.
	restricted []restriction
	// For why: the deepest level a walk reached before nothing matched,
	// and the node it stopped under; or a node a walk ended on that has
	// no rate_limit.
	depth    int
	stopped  *lnode
	noLimits *lnode
	// left are a bucket id's entries not consumed where its deepest walk
	// stopped (matchBucket).
	left []item
}

type restriction struct {
	node *lnode
	// values are the key="value" the walk needed.
	values []string
}

// match walks a descriptor shape down the tree in order, as envoy-rls
// matches a descriptor (descriptors.Index.Match): a known value takes one
// child, the first in the walker's order; an unknown value may take any
// (an exact value only for that value: a restriction).
func (t *tree) match(items []item) *matchResult {
	return t.walk(items, true)
}

// walk walks items down the tree, in order or as a set, and gathers where
// the walks end.
func (t *tree) walk(items []item, ordered bool) *matchResult {
	m := &matchResult{depth: -1}
	t.ix.WalkShapes(treeDomain, ordered, &shapeWalk{items: items, m: m})
	return m
}

// shapeWalk is lint's items as the walker sees them.
type shapeWalk struct {
	items []item
	m     *matchResult
}

var _ descriptors.Shapes = (*shapeWalk)(nil)

func (s *shapeWalk) Len() int { return len(s.items) }

// Take offers the children of n of kind k that item i may take: surely when
// its value is known, and, for an unknown value, an exact value only for
// that value and a wildcard only if some value it stands for matches.
func (s *shapeWalk) Take(n *lnode, k descriptors.Kind, i int, buf []descriptors.Choice) []descriptors.Choice {
	it := s.items[i]
	for _, c := range n.Children() {
		if c.Descriptor.Key != it.key || descriptors.KindOf(c) != k {
			continue
		}
		var sure, ok bool
		switch {
		case k == descriptors.Bare:
			sure, ok = true, true
		case it.val.kind == known && k == descriptors.Wildcard:
			ok = descriptors.WildcardMatch(c.Descriptor.Value, it.val.s)
			sure = ok
		case it.val.kind == known:
			ok = c.Descriptor.Value == it.val.s
			sure = ok
		case k == descriptors.Wildcard:
			ok = canMatch(c.Descriptor.Value, it.val)
		case it.val.kind == prefixed:
			ok = strings.HasPrefix(c.Descriptor.Value, it.val.s)
		default:
			ok = true
		}
		if ok {
			buf = append(buf, descriptors.Choice{Node: c, Sure: sure})
		}
		if sure && k == descriptors.Wildcard {
			break
		}
	}
	return buf
}

// End records a way that consumed every item, with the restrictions its
// exact values put on unknown values.
func (s *shapeWalk) End(path []*lnode, order []int) {
	var r []string
	for lvl, n := range path {
		if it := s.items[order[lvl]]; it.val.kind != known && descriptors.KindOf(n) == descriptors.Exact {
			r = append(r, it.key+"="+strconv.Quote(n.Descriptor.Value))
		}
	}
	s.m.end(path[len(path)-1], r)
}

// Stuck records the deepest way that stopped, for why.
func (s *shapeWalk) Stuck(n *lnode, depth int, left []int) {
	if depth <= s.m.depth {
		return
	}
	s.m.depth, s.m.stopped, s.m.left = depth, nil, nil
	if n.Descriptor != nil {
		s.m.stopped = n
	}
	for _, i := range left {
		s.m.left = append(s.m.left, s.items[i])
	}
}

// end records a walk that consumed every entry at n, under restrictions r.
func (m *matchResult) end(n *lnode, r []string) {
	switch {
	case len(n.Descriptor.Rules) == 0:
		if m.noLimits == nil {
			m.noLimits = n
		}
	case len(r) == 0:
		m.full = true
		m.limited = append(m.limited, n)
	default:
		m.restricted = append(m.restricted, restriction{n, r})
	}
}

// alternatives are the restrictions under which walks reach a limit, each
// once, in the order found.
func (m *matchResult) alternatives() []string {
	var alts []string
	seen := make(map[string]bool)
	for _, r := range m.restricted {
		a := strings.Join(r.values, " ")
		if !seen[a] {
			seen[a] = true
			alts = append(alts, a)
		}
	}
	return alts
}

// why says why a shape meets no limit.
func (m *matchResult) why(domain string, items []item) string {
	switch {
	case m.noLimits != nil:
		return fmt.Sprintf("it ends at %s.%s, which has no rate_limit", domain, m.noLimits.Path)
	case m.stopped == nil:
		return fmt.Sprintf("no top-level descriptor of domain %s matches %s", domain, items[0])
	}
	return fmt.Sprintf("no descriptor under %s.%s matches %s", domain, m.stopped.Path, items[m.depth])
}

// canMatch reports whether a value v stands for may match pattern.
func canMatch(pattern string, v value) bool {
	switch v.kind {
	case known:
		return descriptors.WildcardMatch(pattern, v.s)
	case prefixed:
		// Some v.s+x matches pattern iff v.s matches a leading part of
		// the pattern: x then matches the rest.
		for k := 0; k <= len(pattern); k++ {
			if descriptors.WildcardMatch(pattern[:k], v.s) {
				return true
			}
		}
		return false
	}
	return true
}
