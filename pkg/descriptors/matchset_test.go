package descriptors

import "testing"

// An RLQS bucket id is a map: its entries come in any order and the tree
// decides which one each level consumes.
func TestMatchSet(t *testing.T) {
	ix := NewIndex(testConfig())
	tests := []struct {
		name    string
		entries []Entry
		want    string
	}{
		{"one bare key", []Entry{{"remote_address", "1.2.3.4"}}, "per-ip"},
		{"exact before bare", []Entry{{"remote_address", "10.0.0.1"}}, "vip"},
		{"wildcard", []Entry{{"path", "/api/v1/items"}}, "items"},
		{"nested, given in order", []Entry{{"path", "/login"}, {"user", "ann"}}, "login-user"},
		{"nested, given out of order", []Entry{{"user", "ann"}, {"path", "/login"}}, "login-user"},
		{"nested under exact", []Entry{{"api_key", "k"}, {"plan", "free"}}, "free-key"},
		{"an entry left over", []Entry{{"plan", "free"}, {"colour", "red"}}, ""},
		{"no child named", []Entry{{"colour", "red"}}, ""},
		{"stops at a node without rules", []Entry{{"path", "/login"}}, ""},
	}
	var path []*Node
	var ordered []Entry
	for _, tt := range tests {
		end, known, p, o := ix.MatchSet("edge", tt.entries, path[:0], ordered[:0])
		path, ordered = p, o
		got := ""
		if end != nil && len(end.Descriptor.Rules) > 0 {
			got = end.Descriptor.Rules[0].Name
			if len(path) != len(tt.entries) || len(ordered) != len(tt.entries) {
				t.Errorf("%s: path %d, ordered %d, want %d", tt.name, len(path), len(ordered), len(tt.entries))
			}
		}
		if !known || got != tt.want {
			t.Errorf("%s: got %q (known %v), want %q", tt.name, got, known, tt.want)
		}
	}
	if _, known, _, _ := ix.MatchSet("nowhere", []Entry{{"a", "b"}}, nil, nil); known {
		t.Error("an unknown domain is known")
	}
}

// BenchmarkMatchSet is an RLQS bucket id's walk, its entries out of the
// tree's order, reusing the caller's storage as pkg/rlqs does.
func BenchmarkMatchSet(b *testing.B) {
	ix := NewIndex(testConfig())
	entries := []Entry{{"user", "ann"}, {"path", "/login"}}
	path, ordered := make([]*Node, 0, 4), make([]Entry, 0, 4)
	b.ReportAllocs()
	for b.Loop() {
		n, _, p, _ := ix.MatchSet("edge", entries, path[:0], ordered[:0])
		if n == nil || len(p) != 2 {
			b.Fatal("no match")
		}
	}
}
