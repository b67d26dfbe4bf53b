package descriptors

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

func TestKeyPrefixOption(t *testing.T) {
	in := KeyInput{Domain: "edge", Entries: []Entry{{"user", "bob"}}, Limit: minute}
	def := Key(in)
	in.Prefix = "tenant-a:rls:"
	got := Key(in)
	if !strings.HasPrefix(got, "tenant-a:rls:{") {
		t.Fatalf("key %q does not start with the prefix and the hash tag", got)
	}
	if tag(got) != tag(def) {
		t.Errorf("the prefix changed the hash tag: %q, want %q", tag(got), tag(def))
	}
	if strings.TrimPrefix(got, in.Prefix) != strings.TrimPrefix(def, KeyPrefix) {
		t.Errorf("key %q differs from %q beyond the prefix", got, def)
	}
}

func TestCheckKeyPrefix(t *testing.T) {
	for _, tc := range []struct {
		prefix string
		want   string // "" means valid
	}{
		{"rls:", ""},
		{"team-a:rls:", ""},
		{"", "must not be empty"},
		{"a{b}:", "must not contain"},
		{"a}", "must not contain"},
	} {
		err := CheckKeyPrefix(tc.prefix)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("CheckKeyPrefix(%q) = %v, want nil", tc.prefix, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("CheckKeyPrefix(%q) = %v, want an error mentioning %q", tc.prefix, err, tc.want)
		}
	}
}

func hashedPart(v string) string {
	sum := sha256.Sum256([]byte(v))
	return "#" + hex.EncodeToString(sum[:16])
}

func TestHashValues(t *testing.T) {
	in := KeyInput{Domain: "edge", Entries: []Entry{{"api_key", "sk-secret-1"}, {"path", "/a"}}, Limit: minute, HashValues: true}
	key := Key(in)
	for _, v := range []string{"sk-secret-1", "/a"} {
		if strings.Contains(key, v) {
			t.Errorf("key %q holds the value %q", key, v)
		}
	}
	_, parts := decodeKey(t, key)
	want := []string{"edge", "api_key", hashedPart("sk-secret-1"), "path", hashedPart("/a")}
	if strings.Join(parts, " ") != strings.Join(want, " ") {
		t.Errorf("parts of %q = %q, want %q", key, parts, want)
	}

	// The same descriptor keeps one slot for all its limits; another value
	// has a key and a tag of its own.
	other := in
	other.Index = 1
	if tag(Key(other)) != tag(key) {
		t.Errorf("limits of one descriptor have different hash tags: %q, %q", Key(other), key)
	}
	other = in
	other.Entries = []Entry{{"api_key", "sk-secret-2"}, {"path", "/a"}}
	if Key(other) == key || tag(Key(other)) == tag(key) {
		t.Errorf("two values share a key or a tag: %q, %q", Key(other), key)
	}
	// The tag is computed over the hashes, not the values.
	plain := in
	plain.HashValues = false
	if tag(Key(plain)) == tag(key) {
		t.Errorf("the hash tag %q is the plain value's", tag(key))
	}
	// A long value is hashed the same way either way.
	long := strings.Repeat("x", MaxValueLen+1)
	a := KeyInput{Domain: "d", Entries: []Entry{{"k", long}}, Limit: minute}
	b := a
	b.HashValues = true
	_, pa := decodeKey(t, Key(a))
	_, pb := decodeKey(t, Key(b))
	if pa[2] != pb[2] || pa[2] != hashedPart(long) {
		t.Errorf("long value: %q without -hash-values, %q with, want both %q", pa[2], pb[2], hashedPart(long))
	}
}

// FuzzKeyOptions shows that the key stays injective and keeps its prefix and
// hash tag with a custom prefix and hashed values.
func FuzzKeyOptions(f *testing.F) {
	f.Add("d", "a_b", "c", "a", "b_c", "rls:", true)
	f.Add("d", "1:x", "", "", "2:y", "x:", true)
	f.Add("", "", strings.Repeat("v", 200), "k", "#0", "p", false)
	f.Fuzz(func(t *testing.T, domain, k1, v1, k2, v2, prefix string, hashValues bool) {
		if CheckKeyPrefix(prefix) != nil {
			return
		}
		in := KeyInput{Domain: domain, Entries: []Entry{{k1, v1}, {k2, v2}}, Limit: minute, Prefix: prefix, HashValues: hashValues}
		key := Key(in)
		if !strings.HasPrefix(key, prefix+"{") {
			t.Fatalf("key %q does not start with %q and the hash tag", key, prefix+"{")
		}
		_, parts := decodeKey(t, key[len(prefix):])
		want := []string{domain, k1, v1, k2, v2}
		if len(parts) != len(want) {
			t.Fatalf("decoded %d parts from %q, want %d", len(parts), key, len(want))
		}
		for i, p := range parts {
			value := i == 2 || i == 4
			switch {
			case (value && hashValues) || len(want[i]) > MaxValueLen:
				if p != hashedPart(want[i]) {
					t.Fatalf("part %d = %q, want the hash %q (key %q)", i, p, hashedPart(want[i]), key)
				}
			case p != want[i]:
				t.Fatalf("part %d = %q, want %q (key %q)", i, p, want[i], key)
			}
		}
	})
}

func BenchmarkKeyHashValues(b *testing.B) {
	in := KeyInput{Domain: "edge", Entries: []Entry{{"remote_address", "203.0.113.7"}, {"path", "/api/items"}}, Limit: minute, HashValues: true}
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendKey(buf[:0], in)
	}
}
