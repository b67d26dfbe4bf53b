package descriptors

import (
	"strings"
	"testing"

	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

func rule(name string) []*config.Rule { return []*config.Rule{{Name: name}} }

// testConfig is envoyproxy/ratelimit's README example shape: exact values,
// wildcards in config order, bare keys and nesting.
func testConfig() *config.Config {
	return &config.Config{Domains: map[string]*config.Domain{
		"edge": {Name: "edge", Descriptors: []*config.Descriptor{
			{Key: "remote_address", Rules: rule("per-ip")},
			{Key: "remote_address", Value: "10.0.0.1", Rules: rule("vip")},
			{Key: "path", Value: "/api/*/items", Rules: rule("items")},
			{Key: "path", Value: "/api/*", Rules: rule("api")},
			{Key: "path", Value: "/login", Descriptors: []*config.Descriptor{
				{Key: "user", Rules: rule("login-user")},
			}},
			{Key: "plan", Value: "free", Rules: rule("free"), Descriptors: []*config.Descriptor{
				{Key: "api_key", Rules: rule("free-key")},
			}},
		}},
	}}
}

func TestMatch(t *testing.T) {
	ix := NewIndex(testConfig())
	tests := []struct {
		name    string
		domain  string
		entries []Entry
		known   bool
		want    string // the matched rule's name, "" for none
		path    string
	}{
		{"bare key", "edge", []Entry{{"remote_address", "1.2.3.4"}}, true, "per-ip", "remote_address"},
		{"exact beats bare", "edge", []Entry{{"remote_address", "10.0.0.1"}}, true, "vip", "remote_address_10.0.0.1"},
		{"wildcards in config order", "edge", []Entry{{"path", "/api/v1/items"}}, true, "items", "path_/api/*/items"},
		{"second wildcard", "edge", []Entry{{"path", "/api/v1/users"}}, true, "api", "path_/api/*"},
		{"nested", "edge", []Entry{{"path", "/login"}, {"user", "bob"}}, true, "login-user", "path_/login.user"},
		{"walk ends before the limit", "edge", []Entry{{"path", "/login"}}, true, "", ""},
		{"walk ends on a limit with children", "edge", []Entry{{"plan", "free"}}, true, "free", "plan_free"},
		{"deeper limit", "edge", []Entry{{"plan", "free"}, {"api_key", "k"}}, true, "free-key", "plan_free.api_key"},
		{"more entries than the tree", "edge", []Entry{{"remote_address", "1.2.3.4"}, {"x", "y"}}, true, "", ""},
		{"no such key", "edge", []Entry{{"nope", "x"}}, true, "", ""},
		{"unknown domain", "other", []Entry{{"remote_address", "1.2.3.4"}}, false, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, known, path := ix.Match(tt.domain, tt.entries, nil)
			if known != tt.known {
				t.Fatalf("known = %v, want %v", known, tt.known)
			}
			got, gotPath := "", ""
			if n != nil && len(n.Descriptor.Rules) > 0 {
				got, gotPath = n.Descriptor.Rules[0].Name, n.Path
				if len(path) != len(tt.entries) {
					t.Errorf("len(path) = %d, want %d", len(path), len(tt.entries))
				}
			}
			if got != tt.want || gotPath != tt.path {
				t.Errorf("Match = %q at %q, want %q at %q", got, gotPath, tt.want, tt.path)
			}
		})
	}
}

func TestWildcardMatch(t *testing.T) {
	tests := []struct {
		pattern, value string
		want           bool
	}{
		{"*", "", true},
		{"*", "anything", true},
		{"a*", "a", true},
		{"a*", "abc", true},
		{"a*", "ba", false},
		{"*c", "abc", true},
		{"a*c", "abbbc", true},
		{"a*c", "abbb", false},
		{"a*b*c", "aXbYc", true},
		{"a*b*c", "aXcYb", false},
		{"/api/*/items", "/api/v1/items", true},
		{"/api/*/items", "/api/v1/items/2", false},
		{"**", "x", true},
		{"abc", "abc", true},
		{"abc", "abd", false},
	}
	for _, tt := range tests {
		if got := WildcardMatch(tt.pattern, tt.value); got != tt.want {
			t.Errorf("WildcardMatch(%q, %q) = %v, want %v", tt.pattern, tt.value, got, tt.want)
		}
	}
}

func FuzzMatch(f *testing.F) {
	ix := NewIndex(testConfig())
	f.Add("edge", "path", "/api/v1/items", "user", "bob")
	f.Add("edge", "remote_address", "10.0.0.1", "", "")
	// Over-long values (hashed in keys, matched whole) and invalid UTF-8:
	// matching is byte-wise, so neither escapes its limit.
	long := strings.Repeat("v", 100_000)
	f.Add("edge", "remote_address", long, "", "")
	f.Add("edge", "path", "/api/"+long+"/items", "user", long)
	f.Add("edge", "path", "/login", "user", strings.Repeat("é", 64)+"\xc3")
	f.Add("edge", "remote_address", "\xff\xfe\x00", "\xc3\x28", "\xe2\x82")
	f.Add("edge", "path", "/api/\xff/items", "", "")
	f.Add("\xff", "remote_address", "10.0.0.1", "", "")
	f.Add("edge", "plan", "free", "api_key", "\xed\xa0\x80") // a UTF-16 surrogate
	f.Fuzz(func(t *testing.T, domain, k1, v1, k2, v2 string) {
		entries := []Entry{{k1, v1}, {k2, v2}}
		n, _, path := ix.Match(domain, entries, nil)
		if n != nil && len(path) != len(entries) {
			t.Fatalf("matched with a path of %d for %d entries", len(path), len(entries))
		}
		// Any value of a bare key gets a limit: no length or byte sequence
		// escapes it.
		if n, _, _ := ix.Match("edge", []Entry{{"remote_address", v1}}, nil); n == nil || len(n.Descriptor.Rules) == 0 {
			t.Fatalf("remote_address %.40q matched no limit", v1)
		}
		if !WildcardMatch("*", v1) || !WildcardMatch(v1, v1) {
			t.Fatalf("%.40q: * or the value itself does not match it", v1)
		}
		// Matching is linear in practice but O(len(pattern)×len(value)) at
		// worst; patterns come from the config and are short.
		if len(v1)*len(v2) <= 1<<22 {
			_ = WildcardMatch(v1, v2) // it must not panic or hang, whatever it answers
		}
	})
}

func BenchmarkMatch(b *testing.B) {
	ix := NewIndex(testConfig())
	entries := []Entry{{"path", "/login"}, {"user", "bob"}}
	path := make([]*Node, 0, 4)
	b.ReportAllocs()
	for b.Loop() {
		n, _, p := ix.Match("edge", entries, path[:0])
		if n == nil || len(p) != 2 {
			b.Fatal("no match")
		}
	}
}
