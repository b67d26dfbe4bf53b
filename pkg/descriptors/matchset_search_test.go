package descriptors

import (
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"

	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// d is a descriptor for the tables: "key" or "key=value", with a rule
// named name when name is not empty.
func d(kv, name string, kids ...*config.Descriptor) *config.Descriptor {
	k, v, _ := strings.Cut(kv, "=")
	c := &config.Descriptor{Key: k, Value: v, Descriptors: kids}
	if name != "" {
		c.Rules = rule(name)
	}
	return c
}

func ids(kvs ...string) []Entry {
	var es []Entry
	for _, kv := range kvs {
		k, v, _ := strings.Cut(kv, "=")
		es = append(es, Entry{k, v})
	}
	return es
}

func indexOf(descs ...*config.Descriptor) *Index {
	return NewIndex(&config.Config{Domains: map[string]*config.Domain{"edge": {Name: "edge", Descriptors: descs}}})
}

// TestMatchSetBacksUp: trees where the best child at some level leads
// nowhere, and the id reaches a limit only by another way.
func TestMatchSetBacksUp(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ix    *Index
		id    []Entry
		want  string // the rule reached, "" for none
		order string // the keys in the order consumed
	}{
		{
			// The shipped example's case: a plan no exact value names.
			// The bare api_key sorts first and is taken first; nothing
			// under it takes plan, so the walk backs up to the bare plan.
			name: "unnamed plan under a bare key that sorts first",
			ix:   indexOf(d("api_key", "per-key"), d("plan=free", "", d("api_key", "free-key")), d("plan", "", d("api_key", "plan-key"))),
			id:   ids("plan=gold", "api_key=k"), want: "plan-key", order: "plan api_key",
		},
		{
			name: "named plan keeps the exact way",
			ix:   indexOf(d("api_key", "per-key"), d("plan=free", "", d("api_key", "free-key")), d("plan", "", d("api_key", "plan-key"))),
			id:   ids("plan=free", "api_key=k"), want: "free-key", order: "plan api_key",
		},
		{
			// An exact value shadows a deeper default: user=admin is
			// taken first and has no children.
			name: "exact value with no children shadows a deeper bare key",
			ix:   indexOf(d("user=admin", "admin"), d("path", "", d("user", "path-user"))),
			id:   ids("path=/x", "user=admin"), want: "path-user", order: "path user",
		},
		{
			name: "exact value whose subtree lacks the key",
			ix:   indexOf(d("user=admin", "", d("region", "admin-region")), d("user", "", d("path", "user-path"))),
			id:   ids("user=admin", "path=/x"), want: "user-path", order: "user path",
		},
		{
			// The exact child of user is tried, then its bare child.
			name: "same entry, exact then bare",
			ix:   indexOf(d("user=admin", "", d("x", "admin-x")), d("user", "", d("y", "user-y"))),
			id:   ids("user=admin", "y=1"), want: "user-y", order: "user y",
		},
		{
			name: "wildcard leads nowhere, bare does",
			ix:   indexOf(d("path=/api/*", "", d("x", "api-x")), d("path", "", d("y", "path-y"))),
			id:   ids("path=/api/v1", "y=1"), want: "path-y", order: "path y",
		},
		{
			// The walk ends on a node without rules; another way ends on
			// a limit.
			name: "an end without rules is passed for one with",
			ix:   indexOf(d("a", "", d("b", "")), d("b", "", d("a", "b-a"))),
			id:   ids("a=1", "b=2"), want: "b-a", order: "b a",
		},
		{
			name: "no way at all",
			ix:   indexOf(d("a", "", d("b", "a-b")), d("c", "c")),
			id:   ids("a=1", "c=2"), want: "",
		},
		{
			name: "three levels, the last key first",
			ix:   indexOf(d("a", "", d("b", "")), d("c", "", d("b", "", d("a", "c-b-a")))),
			id:   ids("a=1", "b=2", "c=3"), want: "c-b-a", order: "c b a",
		},
	} {
		end, known, path, ordered := tc.ix.MatchSet("edge", tc.id, nil, nil)
		got, order := "", ""
		if end != nil && len(end.Descriptor.Rules) > 0 {
			got = end.Descriptor.Rules[0].Name
			var keys []string
			for _, e := range ordered {
				keys = append(keys, e.Key)
			}
			order = strings.Join(keys, " ")
			if len(path) != len(tc.id) {
				t.Errorf("%s: path of %d nodes, want %d", tc.name, len(path), len(tc.id))
			}
		}
		if !known || got != tc.want || order != tc.order {
			t.Errorf("%s: got %q in order %q, want %q in order %q", tc.name, got, order, tc.want, tc.order)
		}
	}
}

// An end without rules is still told when no way reaches a limit, with
// its path, so that a caller can say where the id ended.
func TestMatchSetEndWithoutRules(t *testing.T) {
	ix := indexOf(d("path=/login", "", d("user", "login-user")))
	end, _, path, ordered := ix.MatchSet("edge", ids("path=/login"), nil, nil)
	if end == nil || len(end.Descriptor.Rules) != 0 || len(path) != 1 || len(ordered) != 1 || end.Path != "path_/login" {
		t.Fatalf("got end %v, path %d, ordered %d; want path_/login without rules", end, len(path), len(ordered))
	}
	// Storage passed in is reused and kept before the walk's part.
	prefix := []*Node{nil}
	_, _, path, _ = ix.MatchSet("edge", ids("nope=1"), prefix, nil)
	if len(path) != 1 {
		t.Fatalf("a failed walk left %d nodes, want the 1 passed in", len(path))
	}
}

// greedy is MatchSet before it backed up: the best child at each level,
// never undone. Every id it matched to a limit must match the same limit.
func greedy(ix *Index, domain string, entries []Entry) *Node {
	n := ix.domains[domain]
	left := append([]Entry(nil), entries...)
	sort.Slice(left, func(i, j int) bool { return left[i].Key < left[j].Key })
	for len(left) > 0 {
		i, next := -1, (*Node)(nil)
		for kind := Exact; kind <= Bare && next == nil; kind++ {
			for j, e := range left {
				if c := n.childOf(kind, e); c != nil {
					i, next = j, c
					break
				}
			}
		}
		if next == nil {
			return nil
		}
		left = append(left[:i], left[i+1:]...)
		n = next
	}
	return n
}

// way is one walk of an id: at each level, the kind of child taken and the
// entry (its index in key order).
type way struct {
	end    *Node
	choice []int // kind*64 + index, level by level
}

// allWays enumerates every walk that consumes every entry, by brute force
// over the orders of the entries and the kinds of child at each level,
// independently of MatchSet's search.
func allWays(ix *Index, domain string, entries []Entry) []way {
	sorted := append([]Entry(nil), entries...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Key < sorted[j].Key })
	var out []way
	perm := make([]int, len(sorted))
	for i := range perm {
		perm[i] = i
	}
	var permute func(k int)
	permute = func(k int) {
		if k == len(perm) {
			kinds := make([]Kind, len(perm))
			for {
				n := ix.domains[domain]
				ok := true
				for lvl, i := range perm {
					if n = n.childOf(kinds[lvl], sorted[i]); n == nil {
						ok = false
						break
					}
				}
				if ok {
					w := way{end: n}
					for lvl, i := range perm {
						w.choice = append(w.choice, int(kinds[lvl])*64+i)
					}
					out = append(out, w)
				}
				lvl := 0
				for ; lvl < len(kinds) && kinds[lvl] == Bare; lvl++ {
					kinds[lvl] = Exact
				}
				if lvl == len(kinds) {
					return
				}
				kinds[lvl]++
			}
		}
		for i := k; i < len(perm); i++ {
			perm[k], perm[i] = perm[i], perm[k]
			permute(k + 1)
			perm[k], perm[i] = perm[i], perm[k]
		}
	}
	permute(0)
	return out
}

// less orders ways as MatchSet prefers them: level by level, the kind of
// child first, then the entry's place in key order. An entry's index
// counts only the entries still left at that level.
func less(a, b way) bool {
	ka, kb := rank(a), rank(b)
	for i := range ka {
		if ka[i] != kb[i] {
			return ka[i] < kb[i]
		}
	}
	return false
}

func rank(w way) []int {
	used := map[int]bool{}
	r := make([]int, len(w.choice))
	for lvl, c := range w.choice {
		kind, i := c/64, c%64
		pos := 0
		for j := 0; j < i; j++ {
			if !used[j] {
				pos++
			}
		}
		used[i] = true
		r[lvl] = kind*64 + pos
	}
	return r
}

// checkMatchSet holds MatchSet to the brute force on one tree and id: it
// finds a limit exactly when some way reaches one, the first such way in
// order of preference, and whatever greedy matched to a limit.
func checkMatchSet(t *testing.T, ix *Index, id []Entry) {
	t.Helper()
	end, _, path, ordered := ix.MatchSet("edge", id, nil, nil)
	var best *way
	var plain *way
	for _, w := range allWays(ix, "edge", id) {
		w := w
		if len(w.end.Descriptor.Rules) > 0 {
			if best == nil || less(w, *best) {
				best = &w
			}
		} else if plain == nil || less(w, *plain) {
			plain = &w
		}
	}
	desc := fmt.Sprintf("id %v", id)
	switch {
	case best != nil:
		if end != best.end {
			t.Fatalf("%s: MatchSet ended at %v, the first way reaching a limit ends at %s", desc, end, best.end.Path)
		}
	case plain != nil:
		if end != plain.end {
			t.Fatalf("%s: no limit; MatchSet ended at %v, want the first way's end %s", desc, end, plain.end.Path)
		}
	default:
		if end != nil {
			t.Fatalf("%s: no way consumes every entry, MatchSet ended at %s", desc, end.Path)
		}
		return
	}
	// The path it gives is a walk: each node a child of the one before
	// that takes the entry given for it, every entry once.
	if len(path) != len(id) || len(ordered) != len(id) || path[len(path)-1] != end {
		t.Fatalf("%s: path %d, ordered %d, want %d ending at the end", desc, len(path), len(ordered), len(id))
	}
	n := ix.domains["edge"]
	seen := map[Entry]int{}
	for lvl, e := range ordered {
		seen[e]++
		found := false
		for kind := Exact; kind <= Bare; kind++ {
			if n.childOf(kind, e) == path[lvl] {
				found = true
			}
		}
		if !found {
			t.Fatalf("%s: level %d: %s is no child of the node before that takes %v", desc, lvl, path[lvl].Path, e)
		}
		n = path[lvl]
	}
	for _, e := range id {
		if seen[e] != 1 {
			t.Fatalf("%s: entry %v consumed %d times", desc, e, seen[e])
		}
	}
	if g := greedy(ix, "edge", id); g != nil && len(g.Descriptor.Rules) > 0 && g != end {
		t.Fatalf("%s: the greedy walk reached %s, MatchSet %s", desc, g.Path, end.Path)
	}
}

// randomTree builds a tree over few keys and values, so that exact values,
// wildcards and bare keys collide often.
func randomTree(r *rand.Rand) *Index {
	keys := []string{"a", "b", "c", "d"}
	values := []string{"", "", "x", "y", "x*", "*y"}
	names := 0
	var level func(depth int) []*config.Descriptor
	level = func(depth int) []*config.Descriptor {
		var out []*config.Descriptor
		seen := map[string]bool{}
		for range r.Intn(4) {
			k, v := keys[r.Intn(len(keys))], values[r.Intn(len(values))]
			if seen[k+"="+v] {
				continue
			}
			seen[k+"="+v] = true
			c := &config.Descriptor{Key: k, Value: v}
			if r.Intn(2) == 0 {
				names++
				c.Rules = rule(fmt.Sprint("r", names))
			}
			if depth < 3 {
				c.Descriptors = level(depth + 1)
			}
			out = append(out, c)
		}
		return out
	}
	return indexOf(level(0)...)
}

func randomID(r *rand.Rand) []Entry {
	keys := []string{"a", "b", "c", "d"}
	values := []string{"x", "y", "xy", "z"}
	r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	id := make([]Entry, 1+r.Intn(4))
	for i := range id {
		id[i] = Entry{keys[i], values[r.Intn(len(values))]}
	}
	return id
}

func TestMatchSetAgainstBruteForce(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for range 3000 {
		ix := randomTree(r)
		for range 5 {
			checkMatchSet(t, ix, randomID(r))
		}
	}
}

func FuzzMatchSet(f *testing.F) {
	for _, seed := range []int64{0, 1, 42, 1 << 40} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed int64) {
		r := rand.New(rand.NewSource(seed))
		checkMatchSet(t, randomTree(r), randomID(r))
	})
}

// More than 64 entries (marks kept past a word's bits): a chain of 65 bare
// keys is walked in key order whatever order the id gives.
func TestMatchSetManyEntries(t *testing.T) {
	var leaf *config.Descriptor
	var id []Entry
	for i := 64; i >= 0; i-- {
		k := fmt.Sprintf("k%02d", i)
		name := ""
		if i == 64 {
			name = "deep"
		}
		var kids []*config.Descriptor
		if leaf != nil {
			kids = []*config.Descriptor{leaf}
		}
		leaf = d(k, name, kids...)
		id = append(id, Entry{k, "v"})
	}
	end, _, path, _ := indexOf(leaf).MatchSet("edge", id, nil, nil)
	if end == nil || len(end.Descriptor.Rules) == 0 || end.Descriptor.Rules[0].Name != "deep" || len(path) != 65 {
		t.Fatalf("65 entries: ended at %v after %d nodes, want deep after 65", end, len(path))
	}
}
