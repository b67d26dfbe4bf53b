package main

import (
	"strings"
	"testing"
)

// TestSimulateExitCodes: envoy-rls simulate replays a trace (exit 0, the
// table on stdout) and refuses a usage error or a bad trace with exit 2,
// as the other commands do.
func TestSimulateExitCodes(t *testing.T) {
	const dir = "../../internal/simulate/testdata/"
	code, out, errOut := runMain(t, nil, "simulate", "-limits", dir+"fixed10.yaml", "-domain", "sim", "-trace", dir+"trace.csv", "-bucket", "1m")
	if want := "| total | per-user | 10 | 4 |\n"; code != 0 || errOut != "" || !strings.HasSuffix(out, want) {
		t.Errorf("exit %d, stderr %q, stdout:\n%s\nwant exit 0 and a last row %q", code, errOut, out, want)
	}
	code, _, errOut = runMain(t, nil, "simulate", "-limits", dir+"fixed10.yaml", "-trace", dir+"trace.csv")
	if code != 2 || !strings.HasPrefix(errOut, "envoy-rls simulate: -domain is required") || !strings.Contains(errOut, "usage: envoy-rls simulate -limits PATH") {
		t.Errorf("no -domain: exit %d, stderr %q; want 2, the reason and the usage", code, errOut)
	}
	code, _, errOut = runMain(t, nil, "simulate", "-limits", dir+"fixed10.yaml", "-domain", "sim", "-trace", dir+"unsorted.csv")
	if code != 2 || !strings.Contains(errOut, "unsorted.csv: line 4: ") {
		t.Errorf("unsorted trace: exit %d, stderr %q; want 2 and the line", code, errOut)
	}
}
