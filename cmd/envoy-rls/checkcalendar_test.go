package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// TestCheckConfigCalendar: check-config loads a calendar quota and lists it
// with its window now; a zone misspelt is the error, with the name meant.
func TestCheckConfigCalendar(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "billing.yaml")
	os.WriteFile(good, []byte("domain: billing\ndescriptors:\n  - key: plan\n    rate_limit: {unit: month, requests_per_unit: 10000, calendar: true, time_zone: Europe/Berlin}\n"), 0o644) //nolint:errcheck // read below
	var stdout, stderr bytes.Buffer
	if code := checkConfig([]string{good}, env(nil), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if want := "  calendar: billing.plan: month in Europe/Berlin, now "; !strings.Contains(stdout.String(), want) {
		t.Errorf("stdout %q lacks %q", stdout.String(), want)
	}
	if stderr.Len() > 0 {
		t.Errorf("a calendar fixed window (the default) warned of: %q", stderr.String())
	}
	// A sliding window on a calendar loads, with a warning that says why.
	sliding := filepath.Join(dir, "sliding.yaml")
	os.WriteFile(sliding, []byte("domain: billing\ndescriptors:\n  - key: plan\n    rate_limit: {unit: day, requests_per_unit: 2, calendar: true, algorithm: sliding_window}\n"), 0o644) //nolint:errcheck // read below
	stdout.Reset()
	if code := checkConfig([]string{sliding}, env(nil), &stdout, &stderr); code != 0 ||
		!strings.HasPrefix(stderr.String(), "warning: "+sliding+":4: billing.plan: algorithm: sliding_window with calendar: true weighs the last calendar window's count into this one") {
		t.Errorf("a sliding calendar window: exit %d, stderr %q, want 0 and a warning", code, stderr.String())
	}
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("domain: billing\ndescriptors:\n  - key: plan\n    rate_limit: {unit: month, requests_per_unit: 1, calendar: true, time_zone: Europe/Berln}\n"), 0o644) //nolint:errcheck // read below
	stdout.Reset()
	stderr.Reset()
	if code := checkConfig([]string{bad}, env(nil), &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "bad.yaml:4: time_zone: unknown time zone \"Europe/Berln\"") || !strings.Contains(stderr.String(), "did you mean Europe/Berlin?") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
}

// TestCalendarLinesAt: the line of a month in New York in February 2024.
func TestCalendarLinesAt(t *testing.T) {
	d, err := config.Parse("x.yaml", []byte("domain: b\ndescriptors:\n  - key: plan\n    value: pro\n    rate_limits:\n      - {unit: month, requests_per_unit: 5, calendar: true, time_zone: America/New_York}\n      - {unit: second, requests_per_unit: 5}\n"))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	writeModifiers(&b, &config.Config{Domains: map[string]*config.Domain{"b": d}}, time.Date(2024, 2, 10, 0, 0, 0, 0, time.UTC))
	if want := "  calendar: b.plan_pro: month in America/New_York, now 2024-02-01T00:00:00-05:00 to 2024-03-01T00:00:00-05:00\n"; b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}
