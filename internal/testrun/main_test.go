package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestProgressPrintsEndsAndFailures(t *testing.T) {
	var out bytes.Buffer
	p := &progress{out: &out, started: map[string]time.Time{}, output: map[testID]*strings.Builder{}, printed: time.Now()}
	for _, e := range []event{
		{Action: "start", Package: "x/ok"},
		{Action: "start", Package: "x/bad"},
		{Action: "output", Package: "x/ok", Test: "TestA", Output: "=== RUN   TestA\n"},
		{Action: "output", Package: "x/bad", Test: "TestPasses", Output: "=== RUN   TestPasses\n"},
		{Action: "pass", Package: "x/bad", Test: "TestPasses"},
		{Action: "output", Package: "x/bad", Test: "TestB", Output: "    b_test.go:9: want 1, got 2\n"},
		{Action: "fail", Package: "x/bad", Test: "TestB"},
		{Action: "output", Package: "x/bad", Output: "FAIL\tx/bad\t0.1s\n"},
		{Action: "pass", Package: "x/ok", Elapsed: 1.25},
	} {
		p.handle(e)
	}
	p.printed = time.Now().Add(-time.Minute)
	p.still(30 * time.Second)
	p.handle(event{Action: "fail", Package: "x/bad", Elapsed: 0.1})

	got := out.String()
	for _, want := range []string{"ok  \tx/ok\t1.2s\n", "still running: x/bad (", "b_test.go:9: want 1, got 2", "FAIL\tx/bad\t0.1s\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "=== RUN   TestA") || strings.Contains(got, "TestPasses") {
		t.Errorf("a passing package's output was printed:\n%s", got)
	}
	if len(p.passed) != 1 || len(p.failed) != 1 {
		t.Errorf("passed %v, failed %v; want one each", p.passed, p.failed)
	}
}

func TestSummaryCountsEveryStep(t *testing.T) {
	tally := filepath.Join(t.TempDir(), "tally")
	var out, errs bytes.Buffer
	if code := run([]string{"-tally", tally, "-begin"}, &out, &errs); code != 0 {
		t.Fatalf("-begin: exit %d: %s", code, errs.String())
	}
	if err := appendTally(tally, []string{"a", "b"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := appendTally(tally, []string{"c"}, []string{"d"}); err != nil {
		t.Fatal(err)
	}
	code := run([]string{"-tally", tally, "-summary"}, &out, &errs)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if last := lines[len(lines)-1]; last != "packages: 3 passed, 1 failed" {
		t.Errorf("last line %q, want %q", last, "packages: 3 passed, 1 failed")
	}
	if code != 1 {
		t.Errorf("exit %d with a failed package, want 1", code)
	}
	if !strings.Contains(out.String(), "failed: d\n") || !strings.Contains(out.String(), "elapsed: ") {
		t.Errorf("summary lacks the failed package or the elapsed time:\n%s", out.String())
	}

	if err := os.WriteFile(tally, []byte("pass a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if code := run([]string{"-tally", tally, "-summary"}, &out, &errs); code != 0 {
		t.Errorf("exit %d with every package passed, want 0:\n%s", code, out.String())
	}
}
