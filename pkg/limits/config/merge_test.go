package config

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// writeFiles writes name → contents into a fresh directory, and the
// directories a name has, and returns it.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, data := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// With MergeDomains, a domain's files add their top-level descriptors to
// one Domain, in the order Load reads the files; other domains stay apart.
func TestLoadMergeDomains(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"a.yaml": `domain: api
descriptors:
  - key: user
    value: alice
    rate_limit: {unit: minute, requests_per_unit: 1}
`,
		"b.yaml": `domain: api
descriptors:
  - key: user
    value: bob
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: path
    descriptors:
      - key: user
        value: alice
        rate_limit: {unit: minute, requests_per_unit: 3}
`,
		"c.yaml": `domain: other
descriptors:
  - key: user
    value: alice
    rate_limit: {unit: minute, requests_per_unit: 4}
`,
	})
	c, err := Options{MergeDomains: true}.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(c.Domains); got != 2 {
		t.Fatalf("domains: got %d, want 2 (api, other)", got)
	}
	api := c.Domains["api"]
	if want := filepath.Join(dir, "a.yaml"); api.File != want {
		t.Errorf("api's File: got %s, want its first file %s", api.File, want)
	}
	var got []string
	for _, d := range api.Descriptors {
		got = append(got, d.Key+"="+d.Value)
	}
	if want := []string{"user=alice", "user=bob", "path="}; !slices.Equal(got, want) {
		t.Errorf("api's descriptors: got %q, want %q", got, want)
	}
	if n := api.Descriptors[1].Rules[0].Limit.Requests; n != 2 {
		t.Errorf("user=bob: got %d requests, want b.yaml's 2", n)
	}
	if n := len(c.Domains["other"].Descriptors); n != 1 {
		t.Errorf("other's descriptors: got %d, want 1", n)
	}

	// Without the option the same directory is the duplicate domain error.
	if _, err := Load(dir); err == nil {
		t.Error("Load without MergeDomains: got no error, want the duplicate domain")
	}
}

// A top-level descriptor that two files of a merged domain both define is
// refused with both places, as envoyproxy/ratelimit refuses it; the
// same descriptor under different parents is not a duplicate.
func TestLoadMergeDomainsDuplicate(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"a.yaml": `domain: api
descriptors:
  - key: user
    value: bob
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: path
    rate_limit: {unit: minute, requests_per_unit: 1}
`,
		"b.yaml": `domain: api
descriptors:
  - key: user
    value: carol
    rate_limit: {unit: minute, requests_per_unit: 1}

  - key: path
    rate_limit: {unit: hour, requests_per_unit: 5}
`,
	})
	_, err := Options{MergeDomains: true}.Load(dir)
	want := filepath.Join(dir, "b.yaml") + ":7: api.path: duplicate descriptor of a merged domain, first in " +
		filepath.Join(dir, "a.yaml") + ":6"
	if err == nil || err.Error() != want {
		t.Fatalf("got error %v, want %s", err, want)
	}
	if _, ok := err.(*Error); !ok {
		t.Errorf("got a %T, want an *Error", err)
	}
}
