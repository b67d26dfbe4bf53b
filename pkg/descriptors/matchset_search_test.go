package descriptors

import (
	"fmt"
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
