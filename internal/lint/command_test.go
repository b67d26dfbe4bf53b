package lint

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The lint command's output and exit status. The pairs are the testdata.

func runLint(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr strings.Builder
	code := Command(args, nil, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

const lintTestdata = "testdata/"

func TestLintCommand(t *testing.T) {
	pair := func(dir string) []string {
		return []string{"-envoy", lintTestdata + dir + "/envoy.yaml", "-limits", lintTestdata + dir + "/limits.yaml"}
	}
	badYAML := filepath.Join(t.TempDir(), "envoy.yaml")
	if err := os.WriteFile(badYAML, []byte("static_resources: {listeners: [{name: l, adress: {}}]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		args     []string
		code     int
		stdout   []string // every line, in order
		inStderr string
	}{
		{name: "clean", args: pair("clean"), code: 0,
			stdout: []string{lintTestdata + "clean/envoy.yaml, " + lintTestdata + "clean/limits.yaml: OK, 1 domain, 5 limits (1 unlimited) on 5 descriptors"}},
		{name: "after --, a flag is an argument", args: append([]string{"--"}, pair("clean")...), code: 2,
			inStderr: `envoy-rls lint: unexpected argument "-envoy"`},
		{name: "clean with --flags", code: 0,
			args:   []string{"--envoy=" + lintTestdata + "clean/envoy.yaml", "--limits=" + lintTestdata + "clean/limits.yaml", "-max-delay", "1s"},
			stdout: []string{lintTestdata + "clean/envoy.yaml, " + lintTestdata + "clean/limits.yaml: OK, 1 domain, 5 limits (1 unlimited) on 5 descriptors"}},
		{name: "leaky", args: pair("leaky"), code: 1, stdout: []string{
			`leaky-timeout: listener "ingress" filter "envoy.filters.http.ratelimit": edge.generic_key_uploads: leaky_bucket "uploads" (testdata/leaky/limits.yaml:7) may delay a request 500ms, longer than the filter's default timeout 20ms (it sets none): a request whose turn is further away is refused instead of delayed; set the filter's timeout above 500ms`,
		}},
		{name: "domain", args: pair("domain"), code: 1, stdout: []string{
			`domain: listener "ingress" filter "envoy.filters.http.ratelimit": edge-prod: the filter's domain "edge-prod" is not in the limits (domains: edge)`,
			`domain: vhost "backend" route "admin" typed_per_filter_config: edge-admin: the per-route domain "edge-admin" is not in the limits (domains: edge)`,
			`unreachable: edge: no rate limit filter uses domain "edge": its 1 limit can never be reached`,
		}},
		{name: "domain, -partial: the domain findings stay, the unreachable domain goes", args: append([]string{"-partial"}, pair("domain")...), code: 1, stdout: []string{
			`domain: listener "ingress" filter "envoy.filters.http.ratelimit": edge-prod: the filter's domain "edge-prod" is not in the limits (domains: edge)`,
			`domain: vhost "backend" route "admin" typed_per_filter_config: edge-admin: the per-route domain "edge-admin" is not in the limits (domains: edge)`,
		}},
		{name: "clean, -partial", args: append(pair("clean"), "-partial"), code: 0,
			stdout: []string{lintTestdata + "clean/envoy.yaml, " + lintTestdata + "clean/limits.yaml: OK (partial: limits no route reaches are not reported), 1 domain, 5 limits (1 unlimited) on 5 descriptors"}},
		{name: "limits beyond -max-delay", args: append(pair("leaky"), "-max-delay", "100ms"), code: 2,
			inStderr: "leaky_bucket"},
		{name: "missing bootstrap", args: []string{"-envoy", lintTestdata + "nope.yaml", "-limits", lintTestdata + "clean/limits.yaml"}, code: 2,
			inStderr: "nope.yaml"},
		{name: "missing limits", args: []string{"-envoy", lintTestdata + "clean/envoy.yaml", "-limits", lintTestdata + "nope.yaml"}, code: 2,
			inStderr: "nope.yaml"},
		{name: "bad bootstrap", args: []string{"-envoy", badYAML, "-limits", lintTestdata + "clean/limits.yaml"}, code: 2,
			inStderr: `unknown field "adress"`},
		{name: "a positional argument", args: append(pair("clean"), "extra"), code: 2,
			inStderr: "envoy-rls lint: unexpected argument \"extra\": the files are -envoy, -forward-auth and -limits\nusage: envoy-rls lint"},
		{name: "an unknown flag", args: []string{"-nope"}, code: 2, inStderr: "flag provided but not defined: -nope\nusage: envoy-rls lint"},
		{name: "a bad duration", args: []string{"-max-delay", "soon"}, code: 2,
			inStderr: "envoy-rls lint: -max-delay \"soon\": want a duration such as 50ms or 1s\nusage: envoy-rls lint"},
		{name: "a bad duration after the files", args: append(pair("clean"), "-max-delay", "1"), code: 2,
			inStderr: "envoy-rls lint: -max-delay \"1\": want a duration such as 50ms or 1s\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runLint(t, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, out, errOut)
			}
			var lines []string
			if out != "" {
				lines = strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			}
			if strings.Join(lines, "\n") != strings.Join(tc.stdout, "\n") {
				t.Errorf("stdout:\n%s\nwant:\n%s", out, strings.Join(tc.stdout, "\n"))
			}
			if tc.inStderr == "" && errOut != "" || !strings.Contains(errOut, tc.inStderr) {
				t.Errorf("stderr %q, want it to hold %q", errOut, tc.inStderr)
			}
		})
	}
}
