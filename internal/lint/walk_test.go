package lint

import (
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/envoy-rls/envoy-rls/internal/walktest"
	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// TestWalkersAgainstModel holds the descriptor walker's three users to one
// model of its rule (walktest), on the same random trees and entries:
// Match and MatchSet, and lint's walks of a descriptor (match) and of a
// bucket id (matchBucket). With every value known, lint finds what the
// model finds; with some unknown (any value, or a prefix), every limit that
// some value of theirs reaches is among those lint reports.
func TestWalkersAgainstModel(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	walktest.Each(1, 2000, func(c *config.Config, ids [][]descriptors.Entry) {
		ix, tr := descriptors.NewIndex(c), newTree(c.Domains[walktest.Domain])
		root := ix.Root(walktest.Domain)
		for _, id := range ids {
			set := slices.Clone(id)
			slices.SortFunc(set, func(a, b descriptors.Entry) int { return strings.Compare(a.Key, b.Key) })
			for _, ordered := range []bool{true, false} {
				entries, model := id, walktest.Ordered
				end, _, _ := ix.Match(walktest.Domain, id, nil)
				if !ordered {
					entries, model = set, walktest.Set
					end, _, _, _ = ix.MatchSet(walktest.Domain, id, nil, nil)
				}
				desc := fmt.Sprintf("%v (ordered %v)", entries, ordered)
				want := model(root, entries)
				if end != want {
					t.Fatalf("%s: the index's walk ended at %v, the model at %v", desc, end, want)
				}
				checkLintKnown(t, tr, entries, ordered, want, desc)
				checkLintUnknown(t, r, tr, entries, ordered, root, model, desc)
			}
		}
	})
}

func items(entries []descriptors.Entry) []item {
	its := make([]item, len(entries))
	for i, e := range entries {
		its[i] = item{e.Key, value{known, e.Value}}
	}
	return its
}

// checkLintKnown: with every value known, lint's walk is certain and ends
// where the model's does.
func checkLintKnown(t *testing.T, tr *tree, entries []descriptors.Entry, ordered bool, want *descriptors.Node, desc string) {
	t.Helper()
	m := tr.walk(items(entries), ordered)
	if len(m.restricted) > 0 {
		t.Fatalf("%s: known values met restrictions %v", desc, m.restricted)
	}
	switch {
	case want != nil && len(want.Descriptor.Rules) > 0:
		if !m.full || len(m.limited) != 1 || m.limited[0].Path != want.Path {
			t.Fatalf("%s: lint reached %v (full %v), the model %s", desc, m.limited, m.full, want.Path)
		}
	case m.full || len(m.limited) > 0:
		t.Fatalf("%s: lint reached %v, the model no limit", desc, m.limited)
	case (want == nil) != (m.noLimits == nil) || want != nil && want.Path != m.noLimits.Path:
		t.Fatalf("%s: lint ended without a limit at %v, the model at %v", desc, m.noLimits, want)
	}
}

// checkLintUnknown makes some values unknown and checks that every limit
// a value of theirs reaches is one lint reports.
func checkLintUnknown(t *testing.T, r *rand.Rand, tr *tree, entries []descriptors.Entry, ordered bool, root *descriptors.Node,
	model func(*descriptors.Node, []descriptors.Entry) *descriptors.Node, desc string) {
	t.Helper()
	its := items(entries)
	for i := range its {
		switch r.Intn(3) {
		case 0:
			its[i].val = value{kind: anyValue}
		case 1:
			its[i].val = value{prefixed, its[i].val.s[:r.Intn(len(its[i].val.s)+1)]}
		}
	}
	m := tr.walk(its, ordered)
	// Lint's tree is its own index of the config: nodes are told by path.
	reached := map[string]bool{}
	for _, n := range m.limited {
		reached[n.Path] = true
	}
	for _, rs := range m.restricted {
		reached[rs.node.Path] = true
	}
	// Every assignment of values the unknown ones stand for.
	var assign func(i int, es []descriptors.Entry)
	assign = func(i int, es []descriptors.Entry) {
		if i == len(its) {
			if end := model(root, es); end != nil && len(end.Descriptor.Rules) > 0 && !reached[end.Path] {
				t.Fatalf("%s as %v: the model reaches %s, lint (of %v) reported %v", desc, es, end.Path, its, reached)
			}
			return
		}
		for _, v := range walktest.Values {
			if its[i].val.kind == known && v != its[i].val.s || its[i].val.kind == prefixed && !strings.HasPrefix(v, its[i].val.s) {
				continue
			}
			assign(i+1, append(es[:i:i], descriptors.Entry{Key: its[i].key, Value: v}))
		}
	}
	assign(0, nil)
}
