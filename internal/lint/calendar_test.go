package lint

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLintCalendar: lint reads calendar quotas as the server does. The
// clean pair with its api_key limit made a calendar month in Berlin is
// still clean (a calendar limit is reached like any); with a misspelt zone,
// the limits do not load and lint says where, with the name meant.
func TestLintCalendar(t *testing.T) {
	data, err := os.ReadFile(lintTestdata + "clean/limits.yaml")
	if err != nil {
		t.Fatal(err)
	}
	token := "      algorithm: token_bucket\n      unit: second\n      requests_per_unit: 10\n      burst: 20\n"
	if !strings.Contains(string(data), token) {
		t.Fatal("testdata/clean/limits.yaml changed: its api_key limit is not where this test looks")
	}
	dir := t.TempDir()
	write := func(zone string) string {
		p := filepath.Join(dir, "limits.yaml")
		body := strings.Replace(string(data), token, "      algorithm: fixed_window\n      unit: month\n      requests_per_unit: 10000\n      calendar: true\n      time_zone: "+zone+"\n", 1)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	limits := write("Europe/Berlin")
	code, stdout, stderr := runLint(t, "-envoy", lintTestdata+"clean/envoy.yaml", "-limits", limits)
	if code != 0 || !strings.Contains(stdout, ": OK, 1 domain, 5 limits (1 unlimited) on 5 descriptors") {
		t.Errorf("calendar month in Berlin: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if stderr != "" {
		t.Errorf("calendar month in Berlin, fixed window: warned of: %q", stderr)
	}
	// A sliding window on a calendar is warned of, without a finding.
	sliding := strings.Replace(string(data), token, "      algorithm: sliding_window\n      unit: day\n      requests_per_unit: 2\n      calendar: true\n", 1)
	if err := os.WriteFile(limits, []byte(sliding), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runLint(t, "-envoy", lintTestdata+"clean/envoy.yaml", "-limits", limits)
	if want := "warning: " + limits + ":"; code != 0 || !strings.HasPrefix(stderr, want) || !strings.Contains(stderr, "sliding_window with calendar: true") {
		t.Errorf("a sliding calendar window: exit %d, stderr %q, want 0 and %q", code, stderr, want)
	}
	limits = write("Europe/Berln")
	code, _, stderr = runLint(t, "-envoy", lintTestdata+"clean/envoy.yaml", "-limits", limits)
	if want := `limits.yaml:15: time_zone: unknown time zone "Europe/Berln"`; code != 2 || !strings.Contains(stderr, want) || !strings.Contains(stderr, "did you mean Europe/Berlin?") {
		t.Errorf("a misspelt zone: exit %d, stderr %q, want %q", code, stderr, want)
	}
}
