package descriptors

import (
	"regexp"
	"strings"
	"testing"

	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// statConfig has a node of every kind the stat key treats apart.
const statConfig = `domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: api_key
    value_to_metric: true
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: plan
    value: free
    descriptors:
      - key: api_key
        rate_limit: {unit: second, requests_per_unit: 10}
  - key: path
    value: /api/*
    descriptors:
      - key: method
        rate_limit: {unit: second, requests_per_unit: 10}
  - key: route
    value: r*
    value_to_metric: true
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: file
    value: f*
    share_threshold: true
    value_to_metric: true
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: client
    detailed_metric: true
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: tenant
    descriptors:
      - key: user
        detailed_metric: true
        rate_limit: {unit: second, requests_per_unit: 10}
  - key: share
    value: s*
    share_threshold: true
    descriptors:
      - key: user
        detailed_metric: true
        rate_limit: {unit: second, requests_per_unit: 10}
`

func statIndex(t testing.TB) *Index {
	t.Helper()
	d, err := config.Parse("limits.yaml", []byte(statConfig))
	if err != nil {
		t.Fatal(err)
	}
	return NewIndex(&config.Config{Domains: map[string]*config.Domain{d.Name: d}})
}

func TestAppendStatKey(t *testing.T) {
	ix := statIndex(t)
	tests := []struct {
		name    string
		entries []Entry
		want    string
		varies  bool
	}{
		{"key alone", []Entry{{"remote_address", "1.2.3.4"}}, "edge.remote_address", false},
		{"key alone, value_to_metric", []Entry{{"api_key", "k1"}}, "edge.api_key_k1", true},
		{"key alone, value_to_metric, empty value", []Entry{{"api_key", ""}}, "edge.api_key", true},
		{"nested, key and value then key", []Entry{{"plan", "free"}, {"api_key", "k1"}}, "edge.plan_free.api_key", false},
		{"wildcard keeps its pattern", []Entry{{"path", "/api/v1"}, {"method", "GET"}}, "edge.path_/api/*.method", false},
		{"wildcard, value_to_metric", []Entry{{"route", "r42"}}, "edge.route_r42", true},
		{"shared wildcard keeps its pattern", []Entry{{"file", "f1"}}, "edge.file_f*", false},
		{"detailed_metric", []Entry{{"client", "c1"}}, "edge.client_c1", true},
		{"detailed_metric, empty value keeps the _", []Entry{{"client", ""}}, "edge.client_", true},
		{"detailed_metric, nested", []Entry{{"tenant", "t1"}, {"user", "u1"}}, "edge.tenant_t1.user_u1", true},
		{"detailed_metric under a shared wildcard", []Entry{{"share", "s1"}, {"user", "u1"}}, "edge.share_s*.user_u1", true},
		{"detailed_metric under a shared wildcard, empty value", []Entry{{"share", "s1"}, {"user", ""}}, "edge.share_s*.user", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, _, path := ix.Match("edge", tt.entries, nil)
			if n == nil {
				t.Fatal("no match")
			}
			if got := string(AppendStatKey(nil, "edge", tt.entries, path)); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			if got := StatKeyVaries(tt.entries, path); got != tt.varies {
				t.Errorf("StatKeyVaries = %v, want %v", got, tt.varies)
			}
		})
	}
}

// TestAppendStatKeyPartialWalk: for Envoy's limit override, a walk that
// stopped early names the levels it matched as the config does and the
// others by their keys alone.
func TestAppendStatKeyPartialWalk(t *testing.T) {
	ix := statIndex(t)
	entries := []Entry{{"plan", "free"}, {"zone", "z1"}, {"x", "y"}}
	n, _, path := ix.Match("edge", entries, nil)
	if n != nil || len(path) != 1 {
		t.Fatalf("walk: node %v, %d levels; want none and 1", n, len(path))
	}
	if got, want := string(AppendStatKey(nil, "edge", entries, path)), "edge.plan_free.zone.x"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if StatKeyVaries(entries, path) {
		t.Error("a partial walk without value_to_metric varies")
	}
}

// ipv4Like is the rule SanitizeStatKey follows, as a regular expression.
var ipv4Like = regexp.MustCompile(`\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}`)

// sanitizeByRegexp is SanitizeStatKey written the slow way.
func sanitizeByRegexp(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c < '!' || c > '~' || strings.IndexByte(":|,#", c) >= 0 {
			b[i] = '_'
		}
	}
	s = string(b)
	return ipv4Like.ReplaceAllStringFunc(s, func(ip string) string { return strings.ReplaceAll(ip, ".", "_") })
}

func TestSanitizeStatKey(t *testing.T) {
	tests := []struct{ in, want string }{
		{"edge.remote_address_10.0.0.1", "edge.remote_address_10_0_0_1"},
		{"edge.key_a:b|c", "edge.key_a_b_c"},
		{"edge.x_1234.5.6.7", "edge.x_1234_5_6_7"},
		{"edge.x_1.2.3.4567", "edge.x_1_2_3_4567"},
		{"edge.x_1.2.3", "edge.x_1.2.3"},
		{"edge.x_1.2.3.4.5.6.7.8", "edge.x_1_2_3_4.5_6_7_8"},
		{"edge.x_1..2.3.4", "edge.x_1..2.3.4"},
		{"edge.x_1..2.3.4.5", "edge.x_1..2_3_4_5"},
		{"edge.x_1.2.3.", "edge.x_1.2.3."},
		{"edge.path_/api/v1/users?id=7&x=[a]", "edge.path_/api/v1/users?id=7&x=[a]"},
		{"edge.user_ann@example.com", "edge.user_ann@example.com"},
		{"edge.x_a\nevil.injected_1_c.total_hits:3|c", "edge.x_a_evil.injected_1_c.total_hits_3_c"},
		{"edge.x_a,b#c d", "edge.x_a_b_c_d"},
		{"edge.x_m\xfcn\xc3\xbc\x00\r\x7f", "edge.x_m_n_____"},
	}
	for _, tt := range tests {
		if got := string(SanitizeStatKey([]byte(tt.in))); got != tt.want {
			t.Errorf("SanitizeStatKey(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if got := sanitizeByRegexp(tt.in); got != tt.want {
			t.Errorf("the regexp gives %q for %q: the table is wrong", got, tt.in)
		}
	}
}

// TestSanitizeStatKeyEveryByte: of the 256 byte values, the printable
// ASCII characters but for space, `:`, `|`, `,` and `#` stay as they are,
// and every other becomes `_`, wherever it is in the key.
func TestSanitizeStatKeyEveryByte(t *testing.T) {
	for b := range 256 {
		c := byte(b)
		keep := c > ' ' && c < 0x7f && c != ':' && c != '|' && c != ',' && c != '#'
		want := "edge.k_" + string([]byte{c}) + "z"
		if !keep {
			want = "edge.k__z"
		}
		if got := string(SanitizeStatKey([]byte("edge.k_" + string([]byte{c}) + "z"))); got != want {
			t.Errorf("byte %#02x: got %q, want %q", c, got, want)
		}
		if StatByteSafe(c) != keep {
			t.Errorf("StatByteSafe(%#02x) = %v, want %v", c, !keep, keep)
		}
	}
}

func FuzzSanitizeStatKey(f *testing.F) {
	for _, s := range []string{"edge.a_1.2.3.4", "1234.5.6.7.8", "a:b|c", "9.9.9.9.9.9", "1.2.3.4567.8.9.0.1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := string(SanitizeStatKey([]byte(s))), sanitizeByRegexp(s); got != want {
			t.Errorf("SanitizeStatKey(%q) = %q, want %q", s, got, want)
		}
	})
}
