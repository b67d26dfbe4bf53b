package descriptors

import (
	"slices"
	"strings"
)

// MatchSet walks domain's tree with entries given in no order, as an RLQS
// bucket id holds them (a map), and finds the limit they reach: a node with
// rules, reached with every entry consumed. At each level an entry is
// consumed by a child of the node reached that it names: its exact key and
// value first, then the first wildcard value (in config order) that it
// matches, then its bare key, ties broken by key order so that one id
// always walks the same way. When a way leads nowhere (an entry is left
// that no child below takes, or the walk ends on a node without rules) the
// walk backs up and takes the next way, so an id reaches a limit whenever
// some order of its entries does, and the first in that preference.
//
// end is that node; or, when no way reaches a limit, the first node
// without rules that a way ended on, or nil when none consumed every
// entry. path receives the node matched at each level, in the order
// consumed, and ordered the entries in that order (reuse both storages
// across calls).
//
// With distinct keys, as a bucket id's are, the search visits each node of
// the tree at most once (a node's key says which entry it consumes, and
// its place which entries were consumed above it), so it costs no more
// than the part of the tree the entries' keys span. The ways tried first are the ones a walk without backing up
// would take, so every id that such a walk matched to a limit still
// matches the same limit.
func (ix *Index) MatchSet(domain string, entries []Entry, path []*Node, ordered []Entry) (end *Node, known bool, _ []*Node, _ []Entry) {
	root, ok := ix.domains[domain]
	if !ok {
		return nil, false, path, ordered
	}
	if len(entries) == 0 {
		return nil, true, path, ordered
	}
	w := setWalk{left: append([]Entry(nil), entries...), basePath: len(path), baseOrdered: len(ordered), path: path, ordered: ordered}
	slices.SortFunc(w.left, func(a, b Entry) int { return strings.Compare(a.Key, b.Key) })
	if len(w.left) > 64 {
		w.many = make([]bool, len(w.left))
	}
	if n := w.search(root, 0); n != nil {
		return n, true, w.path, w.ordered
	}
	if w.plain == nil {
		return nil, true, w.path[:w.basePath], w.ordered[:w.baseOrdered]
	}
	// No limit: the first way that consumed every entry, for the caller
	// to tell where it ended.
	w.path = append(w.path[:w.basePath], w.plainPath...)
	w.ordered = append(w.ordered[:w.baseOrdered], w.plainOrdered...)
	return w.plain, true, w.path, w.ordered
}

// setWalk is the state of one MatchSet search.
type setWalk struct {
	left []Entry // sorted by key
	// Which of left are consumed on the current way: bits of used, or
	// many past 64 entries.
	used uint64
	many []bool
	// The lengths of path and ordered at the start: the walk's part
	// follows.
	basePath, baseOrdered int
	path                  []*Node
	ordered               []Entry
	// The first way that consumed every entry and ended on a node
	// without rules.
	plain        *Node
	plainPath    []*Node
	plainOrdered []Entry
}

// Kinds of child, in order of preference.
const (
	exactChild = iota
	wildcardChild
	bareChild
)

// search extends the current way from n, depth entries consumed, and
// returns the node with rules that a way from there ends on, or nil.
func (w *setWalk) search(n *Node, depth int) *Node {
	if depth == len(w.left) {
		if len(n.Descriptor.Rules) > 0 {
			return n
		}
		if w.plain == nil {
			w.plain = n
			w.plainPath = append([]*Node(nil), w.path[w.basePath:]...)
			w.plainOrdered = append([]Entry(nil), w.ordered[w.baseOrdered:]...)
		}
		return nil
	}
	for kind := exactChild; kind <= bareChild; kind++ {
		for i, e := range w.left {
			if w.consumed(i) {
				continue
			}
			c := n.childOf(kind, e)
			if c == nil {
				continue
			}
			w.consume(i, true)
			w.path = append(w.path, c)
			w.ordered = append(w.ordered, e)
			if end := w.search(c, depth+1); end != nil {
				return end
			}
			w.consume(i, false)
			w.path = w.path[:len(w.path)-1]
			w.ordered = w.ordered[:len(w.ordered)-1]
		}
	}
	return nil
}

func (w *setWalk) consumed(i int) bool {
	if w.many != nil {
		return w.many[i]
	}
	return w.used&(1<<i) != 0
}

func (w *setWalk) consume(i int, on bool) {
	switch {
	case w.many != nil:
		w.many[i] = on
	case on:
		w.used |= 1 << i
	default:
		w.used &^= 1 << i
	}
}

// childOf is n's child of the kind given that takes e, or nil.
func (n *Node) childOf(kind int, e Entry) *Node {
	switch kind {
	case exactChild:
		return n.exact[pair{e.Key, e.Value}]
	case wildcardChild:
		return n.wildcards.find(e)
	}
	return n.bare[e.Key]
}
