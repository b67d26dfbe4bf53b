package lint

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// tree is one domain's descriptors, walked as package descriptors walks
// them, but for shapes whose values may be unknown.
type tree struct {
	domain *config.Domain
	roots  []*lnode
	// limits are the nodes with rules, in file order.
	limits []*lnode
}

type lnode struct {
	d *config.Descriptor
	// path names the node as descriptors.Node.Path does: key_value.key2.
	path string
	kids []*lnode
	wild bool
}

func newTree(d *config.Domain) *tree {
	t := &tree{domain: d}
	t.roots = t.add(d.Descriptors, "")
	return t
}

func (t *tree) add(ds []*config.Descriptor, parent string) []*lnode {
	nodes := make([]*lnode, 0, len(ds))
	for _, d := range ds {
		path := descriptors.ChildPath(parent, d)
		n := &lnode{d: d, path: path, wild: strings.Contains(d.Value, "*")}
		if len(d.Rules) > 0 {
			t.limits = append(t.limits, n)
		}
		n.kids = t.add(d.Descriptors, path)
		nodes = append(nodes, n)
	}
	return nodes
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

func (t *tree) match(items []item) *matchResult {
	m := &matchResult{depth: -1}
	if len(items) > 0 {
		t.walk(t.roots, items, 0, nil, nil, m)
	}
	return m
}

func (t *tree) walk(kids []*lnode, items []item, depth int, parent *lnode, restr []string, m *matchResult) {
	cands := candidates(kids, items[depth])
	if len(cands) == 0 && depth > m.depth {
		m.depth, m.stopped = depth, parent
	}
	for _, c := range cands {
		r := restr
		if c.restrict != "" {
			r = append(restr[:len(restr):len(restr)], c.restrict)
		}
		if depth+1 < len(items) {
			t.walk(c.node.kids, items, depth+1, c.node, r, m)
			continue
		}
		m.end(c.node, r)
	}
}

// end records a walk that consumed every entry at n, under restrictions r.
func (m *matchResult) end(n *lnode, r []string) {
	switch {
	case len(n.d.Rules) == 0:
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
		return fmt.Sprintf("it ends at %s.%s, which has no rate_limit", domain, m.noLimits.path)
	case m.stopped == nil:
		return fmt.Sprintf("no top-level descriptor of domain %s matches %s", domain, items[0])
	}
	return fmt.Sprintf("no descriptor under %s.%s matches %s", domain, m.stopped.path, items[m.depth])
}

type candidate struct {
	node *lnode
	// restrict is the key="value" an unknown value must be to take node.
	restrict string
}

// candidates are the nodes among kids that an entry may take. A known value
// takes one, as envoy-rls does: the exact value, else the first matching
// wildcard, else the bare key. An unknown value may take any of them: exact
// values only for that value (a restriction).
func candidates(kids []*lnode, it item) []candidate {
	var exact, wild, bare []candidate
	for _, n := range kids {
		if n.d.Key != it.key {
			continue
		}
		switch {
		case n.d.Value == "":
			bare = append(bare, candidate{node: n})
		case n.wild:
			if canMatch(n.d.Value, it.val) {
				wild = append(wild, candidate{node: n})
			}
		default:
			switch it.val.kind {
			case known:
				if n.d.Value == it.val.s {
					exact = append(exact, candidate{node: n})
				}
			case prefixed:
				if strings.HasPrefix(n.d.Value, it.val.s) {
					exact = append(exact, candidate{n, it.key + "=" + strconv.Quote(n.d.Value)})
				}
			default:
				exact = append(exact, candidate{n, it.key + "=" + strconv.Quote(n.d.Value)})
			}
		}
	}
	if it.val.kind == known {
		for _, cs := range [][]candidate{exact, wild, bare} {
			if len(cs) > 0 {
				return cs[:1]
			}
		}
		return nil
	}
	return append(append(exact, wild...), bare...)
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
