package descriptors

import "sort"

// MatchSet walks domain's tree with entries given in no order, as an RLQS
// bucket id holds them (a map). At each level it consumes the entry that
// names a child of the node reached: an exact key and value first, then a
// wildcard value, then a bare key, ties broken by key order so that one id
// always walks the same way. It returns the node reached once every entry
// is consumed, or nil when some entry named no child; path receives the
// node matched at each level, in the order consumed, and ordered receives
// the entries in that order (reuse both storages across calls).
func (ix *Index) MatchSet(domain string, entries []Entry, path []*Node, ordered []Entry) (end *Node, known bool, _ []*Node, _ []Entry) {
	root, ok := ix.domains[domain]
	if !ok {
		return nil, false, path, ordered
	}
	if len(entries) == 0 {
		return nil, true, path, ordered
	}
	left := append([]Entry(nil), entries...)
	sort.Slice(left, func(i, j int) bool { return left[i].Key < left[j].Key })
	n := root
	for len(left) > 0 {
		i, next := n.bestChild(left)
		if next == nil {
			return nil, true, path, ordered
		}
		path = append(path, next)
		ordered = append(ordered, left[i])
		left = append(left[:i], left[i+1:]...)
		n = next
	}
	return n, true, path, ordered
}

// bestChild finds, among left, the entry whose child of n matches best:
// exact before wildcard before bare, the first in left's order among equals.
func (n *Node) bestChild(left []Entry) (int, *Node) {
	for i, e := range left {
		if c, ok := n.exact[pair{e.Key, e.Value}]; ok {
			return i, c
		}
	}
	for i, e := range left {
		if c := n.wildcards.find(e); c != nil {
			return i, c
		}
	}
	for i, e := range left {
		if c, ok := n.bare[e.Key]; ok {
			return i, c
		}
	}
	return -1, nil
}
