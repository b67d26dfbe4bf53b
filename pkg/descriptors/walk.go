package descriptors

// The one descriptor walker. Match (an RLS descriptor: entries in order),
// MatchSet (an RLQS bucket id: entries in no order) and lint (descriptors
// whose values it knows only in part) all walk the config tree with it, so
// that all three follow one rule:
//
//   - At a node, the children that may take an entry are tried in order of
//     Kind: its exact key and value, then the first wildcard value in config
//     order that matches, then its bare key. In a set, the entries not yet
//     consumed are tried in key order within each kind; in order, level i
//     takes entry i and no other.
//   - In order, a level commits to the first child that surely takes its
//     entry, as envoyproxy/ratelimit does: a walk that then stops is not
//     backed out of (the descriptor's order is the client's to choose).
//   - In a set, a way that leads nowhere (an entry left that no child
//     takes, or an end on a node without rules) is backed out of and the
//     next way taken: a bucket id has no order, so it reaches a limit
//     whenever some order of its entries does, and the first in the order
//     of preference above.
//
// A walk ends at the first way that surely ends on a limit. A child that
// takes an entry only for some of its values (lint's partly known values)
// never ends a walk or commits a level: the ways after it are walked too.

// Kind is how a child takes an entry; the walk tries them in this order.
type Kind uint8

const (
	// Exact: the child's key and value are the entry's.
	Exact Kind = iota
	// Wildcard: the child's value is a `*` pattern the entry's value
	// matches; of an entry's wildcards, the first in config order.
	Wildcard
	// Bare: the child has the entry's key and no value.
	Bare
)

// KindOf is the kind of child n is.
func KindOf(n *Node) Kind {
	switch {
	case n.Descriptor.Value == "":
		return Bare
	case n.Wildcard:
		return Wildcard
	}
	return Exact
}

// Choice is a child that may take an entry: Sure when it takes it whatever
// the entry's value is.
type Choice struct {
	Node *Node
	Sure bool
}

// Shapes are entries whose values a walk knows only in part: what lint
// walks (WalkShapes).
type Shapes interface {
	// Len is the number of entries; in a set walk they come in key order.
	Len() int
	// Take appends to buf the children of n of kind k that entry i may
	// take, in config order, each Sure when it takes the entry whatever
	// its value; of wildcards, none after a Sure one (it is the first
	// that matches).
	Take(n *Node, k Kind, i int, buf []Choice) []Choice
	// End is told of each way that consumed every entry: the nodes taken
	// level by level, and the entry each level consumed.
	End(path []*Node, order []int)
	// Stuck is told of each way that stopped at node n (the domain's root
	// at the top), depth entries consumed, with the entries left: none that
	// the level may take has a child that takes it.
	Stuck(n *Node, depth int, left []int)
}

// walker is the state of one walk of a set, or of shapes; an ordered
// walk of known values is one way, which follow takes.
type walker struct {
	ordered bool
	n       int
	// entries are the values known in full (MatchSet); else shapes has
	// them.
	entries []Entry
	shapes  Shapes
	buf     []Choice
	// Which entries are consumed on the current way (a set walk): bits of
	// used, or many past 64 entries.
	used uint64
	many []bool
	// base is len(path) at the start; the walk's part follows. The entry
	// each level consumed is in order (shapes: its index) or taken (known
	// values: the entry, in the caller's storage from baseTaken on).
	// unsure counts the steps of the current way that are not sure.
	base, baseTaken int
	path            []*Node
	order           []int
	taken           []Entry
	unsure          int
	// With known values: the first way that consumed every entry and
	// ended on a node without rules, and its entries in order.
	plain      *Node
	plainPath  []*Node
	plainTaken []Entry
}

// newWalker prepares a walk of entries (or shapes) that appends its way to
// path and, of entries, the entries in the order taken to taken.
func newWalker(ordered bool, entries []Entry, shapes Shapes, path []*Node, taken []Entry) walker {
	w := walker{ordered: ordered, n: len(entries), entries: entries, shapes: shapes,
		base: len(path), path: path, baseTaken: len(taken), taken: taken}
	if shapes != nil {
		w.n = shapes.Len()
	}
	if !ordered && w.n > 64 {
		w.many = make([]bool, w.n)
	}
	return w
}

// walk walks the ways from n, depth entries consumed, and reports whether
// one surely ended on a limit (the walk is then over).
func (w *walker) walk(n *Node, depth int) bool {
	if depth == w.n {
		return w.end(n)
	}
	took := false
	for k := Exact; k <= Bare; k++ {
		for i := range w.n {
			if w.ordered {
				i = depth
			} else if w.consumed(i) {
				continue
			}
			if w.shapes == nil {
				// A known value: at most one child of a kind.
				if c := n.childOf(k, w.entries[i]); c != nil {
					took = true
					if w.step(c, true, i, depth) {
						return true
					}
					if w.ordered {
						return false // committed (Match takes this way with follow)
					}
				}
			} else {
				lo := len(w.buf)
				w.buf = w.shapes.Take(n, k, i, w.buf)
				for j := lo; j < len(w.buf); j++ {
					c := w.buf[j]
					took = true
					if w.step(c.Node, c.Sure, i, depth) {
						w.buf = w.buf[:lo]
						return true
					}
					if c.Sure && w.ordered {
						w.buf = w.buf[:lo]
						return false
					}
				}
				w.buf = w.buf[:lo]
			}
			if w.ordered {
				break
			}
		}
	}
	if !took && w.shapes != nil {
		w.stuck(n, depth)
	}
	return false
}

// step takes child c for entry i at level depth and walks on; it reports
// whether the walk is over, the way left as walked.
func (w *walker) step(c *Node, sure bool, i, depth int) bool {
	w.path = append(w.path, c)
	if w.shapes != nil {
		w.order = append(w.order, i)
	} else {
		w.taken = append(w.taken, w.entries[i])
	}
	w.consume(i, true)
	if !sure {
		w.unsure++
	}
	if w.walk(c, depth+1) {
		return true
	}
	if !sure {
		w.unsure--
	}
	w.consume(i, false)
	w.path = w.path[:len(w.path)-1]
	if w.shapes != nil {
		w.order = w.order[:len(w.order)-1]
	} else {
		w.taken = w.taken[:len(w.taken)-1]
	}
	return false
}

// end records a way that consumed every entry, ending at n, and reports
// whether it ends the walk: it ends on a limit by sure steps only.
func (w *walker) end(n *Node) bool {
	if w.shapes != nil {
		w.shapes.End(w.path[w.base:], w.order)
	} else if len(n.Descriptor.Rules) == 0 && w.plain == nil {
		w.plain = n
		w.plainPath = append([]*Node(nil), w.path[w.base:]...)
		w.plainTaken = append([]Entry(nil), w.taken[w.baseTaken:]...)
	}
	return len(n.Descriptor.Rules) > 0 && w.unsure == 0
}

func (w *walker) stuck(n *Node, depth int) {
	left := make([]int, 0, w.n-depth)
	for i := range w.n {
		if w.ordered && i >= depth || !w.ordered && !w.consumed(i) {
			left = append(left, i)
		}
	}
	w.shapes.Stuck(n, depth, left)
}

func (w *walker) consumed(i int) bool {
	if w.many != nil {
		return w.many[i]
	}
	return w.used&(1<<i) != 0
}

func (w *walker) consume(i int, on bool) {
	switch {
	case w.ordered:
	case w.many != nil:
		w.many[i] = on
	case on:
		w.used |= 1 << i
	default:
		w.used &^= 1 << i
	}
}

// follow appends to path the one way an ordered walk of known entries
// (Match) takes from n, as far as it goes: a known value is taken surely,
// so every level commits to its first child and the walk is one way,
// followed without the walker's backing up or recursion.
func follow(n *Node, entries []Entry, path []*Node) []*Node {
	for _, e := range entries {
		if n = n.first(e); n == nil {
			break
		}
		path = append(path, n)
	}
	return path
}

// first is the child of n that takes e first in order of Kind, or nil:
// childOf for each kind in turn, unrolled for the request path.
func (n *Node) first(e Entry) *Node {
	if c, ok := n.exact[pair{e.Key, e.Value}]; ok {
		return c
	}
	if c := n.wildcards.find(e); c != nil {
		return c
	}
	return n.bare[e.Key]
}

// childOf is n's child of kind k that takes e, or nil.
func (n *Node) childOf(k Kind, e Entry) *Node {
	switch k {
	case Exact:
		return n.exact[pair{e.Key, e.Value}]
	case Wildcard:
		return n.wildcards.find(e)
	}
	return n.bare[e.Key]
}

// WalkShapes walks domain's tree with shapes, in order or as a set, telling
// shapes of every way the walk takes by the rule above. It reports whether
// the domain is configured.
func (ix *Index) WalkShapes(domain string, ordered bool, shapes Shapes) bool {
	root, ok := ix.domains[domain]
	if !ok {
		return false
	}
	if shapes.Len() > 0 {
		w := newWalker(ordered, nil, shapes, nil, nil)
		w.walk(root, 0)
	}
	return true
}

// Root is domain's root node, whose Children are its top-level
// descriptors; nil when the domain is not configured.
func (ix *Index) Root(domain string) *Node { return ix.domains[domain] }

// Children are n's children in config order.
func (n *Node) Children() []*Node { return n.kids }
