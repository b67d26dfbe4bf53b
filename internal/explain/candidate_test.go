package explain

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

// TestExplainCommandCandidate: `envoy-rls explain` shows a limit's
// candidate under it, with its own key and state, in text and in JSON.
func TestExplainCommandCandidate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "limits.yaml")
	limits := "domain: test\ndescriptors:\n  - key: k\n    rate_limit:\n      name: one\n      algorithm: fixed_window\n      unit: hour\n      requests_per_unit: 10\n" +
		"      candidate: {algorithm: token_bucket, unit: minute, requests_per_unit: 2, burst: 4}\n"
	if err := os.WriteFile(path, []byte(limits), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runExplain(t, nil, "-config", path, "test", "k=a")
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	outputHas(t, out,
		"  [0] one: fixed_window, 10 per hour, failure mode allow (the service's), shadow false (line 5)\n",
		"      state: remaining 10 of 10, reset 0s; a request of cost 1 would be allowed",
		"      candidate (not enforced): token_bucket, 2 per minute, burst 4 (line 9)\n",
		"        key:   rls:{",
		"        state: remaining 4 of 4, reset 0s; a request of cost 1 would be allowed by it too\n")
	code, out, _ = runExplain(t, nil, "-json", "-config", path, "test", "k=a")
	var ex rls.Explanation
	if err := json.Unmarshal([]byte(out), &ex); code != 0 || err != nil {
		t.Fatalf("-json: exit %d, %v:\n%s", code, err, out)
	}
	c := ex.Limits[0].Candidate
	if c == nil || c.Algorithm != "token_bucket" || c.Burst != 4 || c.State == nil || c.State.Remaining != 4 || c.Key == ex.Limits[0].Key {
		t.Errorf("-json candidate: %s", out)
	}
}

// outputHas reports each of wants that out lacks.
func outputHas(t *testing.T, out string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}
