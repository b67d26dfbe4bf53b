package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestCheckConfigXDS(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("snapshot.yaml", `
- name: api
  domain: api
  descriptors:
    - key: path
      rate_limit: {unit: SECOND, requests_per_unit: 5}
      quota_mode: false
- name: web
  domain: web
  descriptors:
    - key: ip
      rate_limit: {unit: MINUTE, requests_per_unit: 100}
`)
	bad := write("bad.json", `[{"name": "api", "domain": "api", "descriptors": [{"key": "path", "rateLimit": {"requestsPerUnit": 5}}]}]`)
	for _, tc := range []struct {
		args           []string
		code           int
		stdout, stderr string
	}{
		{[]string{"-xds", good}, 0, good + ": OK, 2 resources, 2 domains, 2 limits (0 unlimited) on 2 descriptors\n", ""},
		{[]string{bad, "-xds"}, 1, "", bad + ": api: descriptors[0].rate_limit: has no unit\n"},
		{[]string{"-xds", filepath.Join(dir, "none.json")}, 1, "", "open " + filepath.Join(dir, "none.json") + ": no such file or directory\n"},
	} {
		var stdout, stderr bytes.Buffer
		code := checkConfig(tc.args, env(nil), &stdout, &stderr)
		if code != tc.code || stdout.String() != tc.stdout || stderr.String() != tc.stderr {
			t.Errorf("%v: got %d, %q, %q, want %d, %q, %q", tc.args, code, stdout.String(), stderr.String(), tc.code, tc.stdout, tc.stderr)
		}
	}
}
