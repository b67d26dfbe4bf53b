package lint

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// lint -forward-auth: forward-auth policies checked as routes, alone or
// beside a bootstrap. The files are testdata/forward-auth's and the
// shipped config/.

func TestLintForwardAuth(t *testing.T) {
	const dir = lintTestdata + "forward-auth/"
	const shipped = "../../config/"
	badPolicy := filepath.Join(t.TempDir(), "forward-auth.yaml")
	if err := os.WriteFile(badPolicy, []byte("policies:\n  - name: edge\n    domain: edge\n    rate_limits:\n      - actions:\n          - destination_cluster: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		args     []string
		code     int
		stdout   []string // every line, in order, when set
		inStdout string
		inStderr string
	}{
		{name: "findings", code: 1,
			args: []string{"-forward-auth", dir + "forward-auth.yaml", "-limits", dir + "limits.yaml"},
			stdout: []string{
				`unmatched: forward-auth policy "keys" rate_limits[0]: edge: descriptor (api_key=*) matches no limit: no top-level descriptor of domain edge matches api_key=*; forward-auth sends it only when header "x-api-key" is present`,
				`unmatched: forward-auth policy "keys" rate_limits[1]: edge: descriptor (path=*, remote_address=*) matches a limit only for values path="/login"`,
				`concurrency: forward-auth policy "uploads" rate_limits[0]: edge.uploads: takes slots of the concurrency limit (testdata/forward-auth/limits.yaml:12) and never gives them back: forward-auth is asked before the request and never when it ends, so each slot stays held for the whole lease (30s); limit the policy with a rate instead`,
				`domain: forward-auth policy "typo": egde: the policy's domain "egde" is not in the limits (domains: edge): the endpoint answers its calls 404`,
			}},
		{name: "a reservation forward-auth never settles", code: 1,
			args: []string{"-partial", "-forward-auth", dir + "holds.yaml", "-limits", lintTestdata + "holds/limits.yaml"},
			stdout: []string{
				`holds: forward-auth policy "llm" rate_limits[0]: llm: domain "llm" declares holds (testdata/holds/limits.yaml:2) and descriptor (budget="tokens", api_key=*, request_id=*) carries its entry "request_id": forward-auth is asked before the request and never when it ends, so a reservation is never settled (it stays held for the lease, 10m0s) and a settle comes before the request is served; leave the entry out, for a plain hit`,
			}},
		{name: "the shipped policy reaches part of the edge limits", code: 0,
			args:   []string{"-partial", "-forward-auth", shipped + "forward-auth.yaml", "-limits", shipped + "limits.yaml"},
			stdout: []string{shipped + "forward-auth.yaml, " + shipped + "limits.yaml: OK (partial: limits no route reaches are not reported), 1 domain, 17 limits (0 unlimited) on 12 descriptors"}},
		{name: "the shipped policy beside the shipped bootstrap", code: 0,
			args:   []string{"-envoy", shipped + "envoy.yaml", "-forward-auth", shipped + "forward-auth.yaml", "-limits", shipped + "limits.yaml"},
			stdout: []string{shipped + "envoy.yaml, " + shipped + "forward-auth.yaml, " + shipped + "limits.yaml: OK, 1 domain, 17 limits (0 unlimited) on 12 descriptors"}},
		{name: "without -partial, the limits the policy never reaches", code: 1,
			args:     []string{"-forward-auth", shipped + "forward-auth.yaml", "-limits", shipped + "limits.yaml"},
			inStdout: `unreachable: edge.plan_free.api_key: no route sends a descriptor that reaches this limit (../../config/limits.yaml:62)`},
		{name: "a policy file that does not load reads as at the server's start", code: 2,
			args:     []string{"-forward-auth", badPolicy, "-limits", dir + "limits.yaml"},
			inStderr: "envoy-rls lint: " + badPolicy + ":6: destination_cluster: not available behind forward-auth"},
		{name: "a missing policy file", code: 2,
			args:     []string{"-forward-auth", dir + "nope.yaml", "-limits", dir + "limits.yaml"},
			inStderr: "nope.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runLint(t, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, out, errOut)
			}
			if tc.stdout != nil && strings.TrimSuffix(out, "\n") != strings.Join(tc.stdout, "\n") {
				t.Errorf("stdout:\n%s\nwant:\n%s", out, strings.Join(tc.stdout, "\n"))
			}
			if !strings.Contains(out, tc.inStdout) {
				t.Errorf("stdout %q, want it to hold %q", out, tc.inStdout)
			}
			if tc.inStderr == "" && errOut != "" || !strings.Contains(errOut, tc.inStderr) {
				t.Errorf("stderr %q, want it to hold %q", errOut, tc.inStderr)
			}
		})
	}
}
