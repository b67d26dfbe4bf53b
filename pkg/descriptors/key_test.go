package descriptors

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

var minute = limits.Limit{Algorithm: limits.SlidingWindow, Requests: 10, Period: time.Minute}

func TestKeyFormat(t *testing.T) {
	got := Key(KeyInput{Domain: "edge", Entries: []Entry{{"remote_address", "1.2.3.4"}}, Limit: minute})
	if !strings.HasPrefix(got, KeyPrefix+"{") {
		t.Fatalf("key %q lacks the prefix and hash tag", got)
	}
	want := ":sw:60000000:0:4:edge14:remote_address7:1.2.3.4"
	if !strings.HasSuffix(got, want) {
		t.Errorf("key = %q, want suffix %q", got, want)
	}
}

// TestKeyTag: KeyTag returns the key Key and AppendKey build, and the tag
// its braces render; every limit of one descriptor shares that tag.
func TestKeyTag(t *testing.T) {
	for _, in := range []KeyInput{
		{Domain: "edge", Entries: []Entry{{"remote_address", "1.2.3.4"}}, Limit: minute},
		{Domain: "edge", Entries: []Entry{{"remote_address", "1.2.3.4"}}, Limit: limits.Limit{Algorithm: limits.TokenBucket, Requests: 5, Period: time.Hour}, Index: 2},
		{Domain: "edge", Entries: []Entry{{"remote_address", "1.2.3.4"}}, Limit: minute, HashValues: true, Prefix: "p:"},
		{Domain: "edge", Entries: []Entry{{"k", strings.Repeat("v", MaxValueLen+1)}}, Limit: minute},
	} {
		key, tag := KeyTag(in)
		if want := Key(in); key != want {
			t.Errorf("KeyTag key %q, Key %q", key, want)
		}
		if want := string(AppendKey([]byte("x"), in)[1:]); key != want {
			t.Errorf("KeyTag key %q, AppendKey %q", key, want)
		}
		if want := "{" + string(appendHex64(nil, tag)) + "}"; !strings.Contains(key, want) {
			t.Errorf("key %q does not render tag %x as %s", key, tag, want)
		}
		if want := tagHash(in.Domain, in.Entries, in.HashValues); tag != want {
			t.Errorf("tag %x, want tagHash %x", tag, want)
		}
	}
	a := KeyInput{Domain: "edge", Entries: []Entry{{"k", "v"}}, Limit: minute}
	b := a
	b.Limit, b.Index = limits.Limit{Algorithm: limits.LeakyBucket, Requests: 1, Period: time.Second}, 1
	_, ta := KeyTag(a)
	_, tb := KeyTag(b)
	if ta != tb {
		t.Errorf("one descriptor's limits have tags %x and %x, want one", ta, tb)
	}
	c := a
	c.Entries = []Entry{{"k", "w"}}
	if _, tc := KeyTag(c); tc == ta {
		t.Errorf("two descriptors share tag %x", ta)
	}
}

func TestKeysDoNotCollide(t *testing.T) {
	keys := map[string]string{}
	add := func(name string, in KeyInput) {
		t.Helper()
		k := Key(in)
		if prev, ok := keys[k]; ok {
			t.Errorf("%s and %s share key %q", name, prev, k)
		}
		keys[k] = name
	}
	add("a_b:c", KeyInput{Domain: "d", Entries: []Entry{{"a_b", "c"}}, Limit: minute})
	add("a:b_c", KeyInput{Domain: "d", Entries: []Entry{{"a", "b_c"}}, Limit: minute})
	add("a:b + c:d", KeyInput{Domain: "d", Entries: []Entry{{"a", "b"}, {"c", "d"}}, Limit: minute})
	add("a:b:c:d in one", KeyInput{Domain: "d", Entries: []Entry{{"a", "b1:c1:d"}}, Limit: minute})
	add("other domain", KeyInput{Domain: "d2", Entries: []Entry{{"a", "b"}}, Limit: minute})
	add("index 1", KeyInput{Domain: "d", Entries: []Entry{{"a", "b"}}, Limit: minute, Index: 1})
	hour := minute
	hour.Period = time.Hour
	add("other period", KeyInput{Domain: "d", Entries: []Entry{{"a", "b"}}, Limit: hour})
	fw := minute
	fw.Algorithm = limits.FixedWindow
	add("other algorithm", KeyInput{Domain: "d", Entries: []Entry{{"a", "b"}}, Limit: fw})
}

func TestHashTagSharedAcrossLimits(t *testing.T) {
	base := KeyInput{Domain: "d", Entries: []Entry{{"user", "bob"}}, Limit: minute}
	other := base
	other.Index = 3
	other.Limit.Algorithm = limits.TokenBucket
	if tag(Key(base)) != tag(Key(other)) {
		t.Errorf("keys of one descriptor have different hash tags: %q, %q", Key(base), Key(other))
	}
	alice := base
	alice.Entries = []Entry{{"user", "alice"}}
	if tag(Key(base)) == tag(Key(alice)) {
		t.Errorf("different descriptors share a hash tag: %q", tag(Key(base)))
	}
}

func TestLongValuesAreHashed(t *testing.T) {
	long := strings.Repeat("x", 10_000)
	k1 := Key(KeyInput{Domain: "d", Entries: []Entry{{"api_key", long}}, Limit: minute})
	k2 := Key(KeyInput{Domain: "d", Entries: []Entry{{"api_key", long + "y"}}, Limit: minute})
	if len(k1) > 200 {
		t.Errorf("key of a 10 kB value is %d bytes", len(k1))
	}
	if k1 == k2 {
		t.Errorf("two long values share a key")
	}
}

func tag(key string) string {
	i, j := strings.IndexByte(key, '{'), strings.IndexByte(key, '}')
	return key[i+1 : j]
}

// decodeKey parses a key back into its parts; it fails on any key that
// AppendKey could not have produced. The fuzz test uses it to show that the
// encoding is injective.
func decodeKey(t *testing.T, key string) (head string, parts []string) {
	t.Helper()
	j := strings.IndexByte(key, '}')
	rest := key[j+2:]
	// ALGO:PERIOD:INDEX:
	for i := 0; i < 3; i++ {
		k := strings.IndexByte(rest, ':')
		head += rest[:k+1]
		rest = rest[k+1:]
	}
	for rest != "" {
		if rest[0] == '#' {
			parts = append(parts, rest[:33])
			rest = rest[33:]
			continue
		}
		k := strings.IndexByte(rest, ':')
		n, err := strconv.Atoi(rest[:k])
		if err != nil {
			t.Fatalf("bad length in %q: %v", key, err)
		}
		parts = append(parts, rest[k+1:k+1+n])
		rest = rest[k+1+n:]
	}
	return head, parts
}

func FuzzKey(f *testing.F) {
	f.Add("d", "a_b", "c", "a", "b_c", 0)
	f.Add("d", "1:x", "", "", "2:y", 1)
	f.Add("", "", strings.Repeat("v", 200), "k", "", 2)
	// Over-long parts: just under, at and over the bound, a 100 kB one, and
	// invalid UTF-8, a multi-byte rune cut at the bound included.
	f.Add("d", "k", strings.Repeat("v", MaxValueLen), "k", strings.Repeat("v", MaxValueLen+1), 0)
	f.Add(strings.Repeat("d", 1000), strings.Repeat("k", 129), strings.Repeat("v", 100_000), "k", "", 3)
	f.Add("d", "user", strings.Repeat("é", 64), "user", strings.Repeat("é", 64)+"\xc3", 0)
	f.Add("\xff", "\xfe\xff", "\xc3\x28", "\xe2\x82", "\xed\xa0\x80", 1)
	f.Add("d", "k", "#0123456789abcdef0123456789abcdef", "k", "33:#", 0) // look like hashes
	f.Fuzz(func(t *testing.T, domain, k1, v1, k2, v2 string, index int) {
		if index < 0 || index > 1000 {
			return
		}
		in := KeyInput{Domain: domain, Entries: []Entry{{k1, v1}, {k2, v2}}, Limit: minute, Index: index}
		key := Key(in)
		head, parts := decodeKey(t, key)
		want := []string{domain, k1, v1, k2, v2}
		if len(parts) != len(want) {
			t.Fatalf("decoded %d parts from %q, want %d", len(parts), key, len(want))
		}
		for i, p := range parts {
			if len(want[i]) > MaxValueLen {
				if !strings.HasPrefix(p, "#") {
					t.Fatalf("long part %d not hashed in %q", i, key)
				}
				continue
			}
			if p != want[i] {
				t.Fatalf("part %d = %q, want %q (key %q)", i, p, want[i], key)
			}
		}
		if strings.Count(key[:strings.IndexByte(key, '}')+1], "{") != 1 {
			t.Fatalf("hash tag of %q is not the first {…}", key)
		}
		// The key is bounded whatever the lengths: the head, then at most
		// MaxValueLen and its length prefix per part.
		bound := len(KeyPrefix) + len("{0123456789abcdef}:") + len(head) + len(want)*(MaxValueLen+len(strconv.Itoa(MaxValueLen))+1)
		if len(key) > bound {
			t.Fatalf("key of %d bytes, above the bound of %d", len(key), bound)
		}
		// A long part is hashed whole: changing its last byte changes the key.
		for i, w := range want {
			if len(w) <= MaxValueLen {
				continue
			}
			changed := append([]string(nil), want...)
			b := []byte(w)
			b[len(b)-1] ^= 1
			changed[i] = string(b)
			other := Key(KeyInput{Domain: changed[0], Entries: []Entry{{changed[1], changed[2]}, {changed[3], changed[4]}}, Limit: minute, Index: index})
			if other == key {
				t.Fatalf("part %d changed in its last byte, same key %q", i, key)
			}
		}
	})
}

func BenchmarkAppendKey(b *testing.B) {
	in := KeyInput{Domain: "edge", Entries: []Entry{{"remote_address", "203.0.113.7"}, {"path", "/api/v1/items"}}, Limit: minute}
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendKey(buf[:0], in)
	}
}
