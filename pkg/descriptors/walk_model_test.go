package descriptors_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/envoy-rls/envoy-rls/internal/walktest"
	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// The walker's users in this package, Match and MatchSet, against the model
// of the rule (walktest); lint's walks are held to the same model in
// internal/lint.
func TestWalkAgainstModel(t *testing.T) {
	walktest.Each(1, 3000, func(c *config.Config, ids [][]descriptors.Entry) {
		ix := descriptors.NewIndex(c)
		for _, id := range ids {
			checkMatch(t, ix, id)
			checkMatchSet(t, ix, id)
		}
	})
}

func FuzzWalk(f *testing.F) {
	for _, seed := range []int64{0, 1, 42, 1 << 40} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed int64) {
		walktest.Each(seed, 1, func(c *config.Config, ids [][]descriptors.Entry) {
			ix := descriptors.NewIndex(c)
			checkMatch(t, ix, ids[0])
			checkMatchSet(t, ix, ids[0])
		})
	})
}

// checkMatch holds Match to the model (walktest.Ordered): it ends where the
// model does, and its path is the way there, or as far as it went.
func checkMatch(t *testing.T, ix *descriptors.Index, id []descriptors.Entry) {
	t.Helper()
	end, _, path := ix.Match(walktest.Domain, id, nil)
	if want := walktest.Ordered(ix.Root(walktest.Domain), id); end != want {
		t.Fatalf("descriptor %v: Match ended at %v, the model at %v", id, end, want)
	}
	checkWay(t, ix, id, path, fmt.Sprintf("descriptor %v", id))
	if end != nil && (len(path) != len(id) || path[len(path)-1] != end) {
		t.Fatalf("descriptor %v: a path of %d nodes, want %d ending at the end", id, len(path), len(id))
	}
}

// checkMatchSet holds MatchSet to the model (walktest.Set): it finds a
// limit exactly when some way reaches one, the first such way in order of
// preference, and whatever greedy matched to a limit.
func checkMatchSet(t *testing.T, ix *descriptors.Index, id []descriptors.Entry) {
	t.Helper()
	end, _, path, ordered := ix.MatchSet(walktest.Domain, id, nil, nil)
	desc := fmt.Sprintf("id %v", id)
	if want := walktest.Set(ix.Root(walktest.Domain), id); end != want {
		t.Fatalf("%s: MatchSet ended at %v, the model at %v", desc, end, want)
	}
	if g := greedy(ix, id); g != nil && len(g.Descriptor.Rules) > 0 && g != end {
		t.Fatalf("%s: the greedy walk reached %s, MatchSet %v", desc, g.Path, end)
	}
	if end == nil {
		return
	}
	if len(path) != len(id) || len(ordered) != len(id) || path[len(path)-1] != end {
		t.Fatalf("%s: path %d, ordered %d, want %d ending at the end", desc, len(path), len(ordered), len(id))
	}
	checkWay(t, ix, ordered, path, desc)
	seen := map[descriptors.Entry]int{}
	for _, e := range ordered {
		seen[e]++
	}
	for _, e := range id {
		if seen[e] != 1 {
			t.Fatalf("%s: entry %v consumed %d times", desc, e, seen[e])
		}
	}
}

// checkWay checks that path is a walk of entries: each node a child of the
// one before that takes the entry of its level.
func checkWay(t *testing.T, ix *descriptors.Index, entries []descriptors.Entry, path []*descriptors.Node, desc string) {
	t.Helper()
	n := ix.Root(walktest.Domain)
	for lvl, c := range path {
		if walktest.Child(n, descriptors.KindOf(c), entries[lvl]) != c {
			t.Fatalf("%s: level %d: %s is no child of the node before that takes %v", desc, lvl, c.Path, entries[lvl])
		}
		n = c
	}
}

// greedy is MatchSet before it backed up: the best child at each level,
// never undone. Every id it matched to a limit must match the same limit.
func greedy(ix *descriptors.Index, entries []descriptors.Entry) *descriptors.Node {
	n := ix.Root(walktest.Domain)
	left := slices.Clone(entries)
	slices.SortFunc(left, func(a, b descriptors.Entry) int { return strings.Compare(a.Key, b.Key) })
	for len(left) > 0 {
		i, next := -1, (*descriptors.Node)(nil)
		for k := descriptors.Exact; k <= descriptors.Bare && next == nil; k++ {
			for j, e := range left {
				if c := walktest.Child(n, k, e); c != nil {
					i, next = j, c
					break
				}
			}
		}
		if next == nil {
			return nil
		}
		left = slices.Delete(left, i, i+1)
		n = next
	}
	return n
}
