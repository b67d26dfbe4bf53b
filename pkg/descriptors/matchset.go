package descriptors

import (
	"slices"
	"strings"
)

// MatchSet walks domain's tree with entries given in no order, as an RLQS
// bucket id holds them (a map), and finds the limit they reach: a node with
// rules, reached with every entry consumed, by the first way that reaches
// one in the walk's order of preference, backing up from the ways that
// lead nowhere (walk.go has the rule).
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
// than the part of the tree the entries' keys span. The ways tried first
// are the ones a walk without backing up would take, so every id that such
// a walk matched to a limit still matches the same limit.
func (ix *Index) MatchSet(domain string, entries []Entry, path []*Node, ordered []Entry) (end *Node, known bool, _ []*Node, _ []Entry) {
	root, ok := ix.domains[domain]
	if !ok {
		return nil, false, path, ordered
	}
	if len(entries) == 0 {
		return nil, true, path, ordered
	}
	sorted := append([]Entry(nil), entries...)
	slices.SortFunc(sorted, func(a, b Entry) int { return strings.Compare(a.Key, b.Key) })
	w := newWalker(false, sorted, nil, path, ordered)
	switch {
	case w.walk(root, 0):
		end = w.path[len(w.path)-1]
	case w.plain != nil:
		// No limit: the first way that consumed every entry, for the
		// caller to tell where it ended.
		end = w.plain
		w.path = append(w.path[:w.base], w.plainPath...)
		w.taken = append(w.taken[:w.baseTaken], w.plainTaken...)
	default:
		return nil, true, w.path[:w.base], w.taken[:w.baseTaken]
	}
	return end, true, w.path, w.taken
}
