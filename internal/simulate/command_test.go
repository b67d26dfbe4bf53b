package simulate

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// noEnv is an environment without variables.
func noEnv(string) (string, bool) { return "", false }

func command(args ...string) (int, string, string) {
	return commandEnv(noEnv, args...)
}

func commandEnv(env func(string) (string, bool), args ...string) (int, string, string) {
	var stdout, stderr strings.Builder
	code := Command(args, env, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// TestCommandTable: a CSV trace through two files side by side, the
// table's rows exact: 10 a minute admits the first 10 whatever the
// algorithm, and bob's descriptor with a path matches no limit.
func TestCommandTable(t *testing.T) {
	code, out, errOut := command("-limits", "testdata/fixed10.yaml", "-compare", "testdata/sliding10.yaml", "-domain", "sim", "-trace", "testdata/trace.csv", "-bucket", "5s")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	want := `domain sim, buckets of 5s from 2026-01-01T00:00:00Z; 1 of the trace's requests matched no limit

| time | rule | fixed10.yaml admitted | fixed10.yaml refused | sliding10.yaml admitted | sliding10.yaml refused |
| ---: | --- | ---: | ---: | ---: | ---: |
| 0s | per-user | 5 | 0 | 5 | 0 |
| 5s | per-user | 5 | 0 | 5 | 0 |
| 10s | per-user | 0 | 4 | 0 | 4 |
| total | per-user | 10 | 4 | 10 | 4 |
`
	if out != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", out, want)
	}
}

// TestCommandSameNames: two files of one name are told apart by their
// paths.
func TestCommandSameNames(t *testing.T) {
	code, out, errOut := command("-limits", "testdata/fixed10.yaml", "-compare", "testdata/../testdata/fixed10.yaml", "-domain", "sim", "-trace", "testdata/trace.csv", "-bucket", "1m")
	if want := "| time | rule | testdata/fixed10.yaml admitted | testdata/fixed10.yaml refused | testdata/../testdata/fixed10.yaml admitted |"; code != 0 || !strings.Contains(out, want) {
		t.Errorf("exit %d, stderr %q, stdout:\n%s\nwant the heading %q", code, errOut, out, want)
	}
}

// TestChartDeterministic: the same trace draws the same SVG, byte for
// byte, run after run.
func TestChartDeterministic(t *testing.T) {
	dir := t.TempDir()
	var charts [][]byte
	for i := range 2 {
		path := filepath.Join(dir, "chart"+string(rune('a'+i))+".svg")
		if code, _, errOut := command("-limits", "testdata/fixed10.yaml", "-compare", "testdata/sliding10.yaml", "-domain", "sim", "-trace", "testdata/trace.csv", "-svg", path); code != 0 {
			t.Fatalf("exit %d, stderr %q", code, errOut)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		charts = append(charts, b)
	}
	if !bytes.HasPrefix(charts[0], []byte("<?xml")) || !bytes.Contains(charts[0], []byte("<svg")) {
		t.Fatalf("not an SVG: %.200s", charts[0])
	}
	if !bytes.Equal(charts[0], charts[1]) {
		t.Error("two runs on the same trace drew different SVGs")
	}
	for _, label := range []string{"fixed10.yaml per-user", "sliding10.yaml per-user", "admitted per 1s", "refused per 1s"} {
		if !bytes.Contains(charts[0], []byte(label)) {
			t.Errorf("the chart lacks %q", label)
		}
	}
}

// TestCommandErrors: usage errors, a bad trace and a domain the limits
// lack exit 2 with the reason; an unwritable chart exits 1.
func TestCommandErrors(t *testing.T) {
	base := []string{"-limits", "testdata/fixed10.yaml", "-domain", "sim"}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-domain", "sim", "-trace", "testdata/trace.csv"}, 2, "-limits is required"},
		{[]string{"-limits", "testdata/fixed10.yaml", "-trace", "testdata/trace.csv"}, 2, "-domain is required"},
		{base, 2, "give one trace: -trace CSV or -shape NAME"},
		{append(base, "-trace", "testdata/trace.csv", "-shape", "poisson"), 2, "give one trace"},
		{append(base, "-shape", "nope", "-rate", "5"), 2, `unknown trace shape "nope"`},
		{append(base, "-shape", "poisson:x", "-rate", "5"), 2, `load "x" is not a number`},
		{append(base, "-shape", "poisson"), 2, "-shape needs -rate"},
		{append(base, "-shape", "poisson", "-rate", "5", "-duration", "0s"), 2, "duration 0s: want at least 1µs"},
		{append(base, "-trace", "testdata/malformed.csv"), 2, `testdata/malformed.csv: line 3: descriptor entry 1 "user": want KEY=VALUE`},
		{append(base, "-trace", "testdata/empty.csv"), 2, "the trace has no requests"},
		{append(base, "-trace", "testdata/trace.csv", "-bucket", "0s"), 2, "-bucket must be positive"},
		{append(base, "-trace", "testdata/unsorted.csv"), 2, "testdata/unsorted.csv: line 4: not sorted: 2026-01-01T00:00:00.5Z is before the previous line's 2026-01-01T00:00:01Z"},
		{append(base, "-trace", "testdata/missing.csv"), 2, "missing.csv: no such file"},
		{[]string{"-limits", "testdata/fixed10.yaml", "-domain", "nope", "-trace", "testdata/trace.csv"}, 2, `testdata/fixed10.yaml: domain "nope" is not in the limits`},
		{[]string{"-limits", "testdata/nope.yaml", "-domain", "sim", "-trace", "testdata/trace.csv"}, 2, "nope.yaml"},
		{append(base, "-trace", "testdata/trace.csv", "extra"), 2, `unexpected argument "extra"`},
		{append(base, "-trace", "testdata/trace.csv", "-svg", filepath.Join(t.TempDir(), "no", "dir.svg")), 1, "dir.svg"},
	} {
		code, _, errOut := command(c.args...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", c.args, code, errOut, c.code, c.want)
		}
	}
}

// TestCommandShape: the edge adversary (10 just before a minute's edge,
// 10 just after, every other edge) at 10 a minute: the fixed window lets
// all 40 of 4 minutes through, twice the limit around each burst, the
// sliding window refuses each burst's second half. The same seed prints
// the same table.
func TestCommandShape(t *testing.T) {
	args := []string{"-limits", "testdata/fixed10.yaml", "-compare", "testdata/sliding10.yaml", "-domain", "sim", "-shape", "edge", "-rate", "10", "-duration", "4m", "-key", "user", "-bucket", "4m"}
	code, out, errOut := command(args...)
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if want := "| total | per-user | 40 | 0 | 20 | 20 |\n"; !strings.HasSuffix(out, want) {
		t.Errorf("stdout:\n%s\nwant a last row %q", out, want)
	}
	if _, again, _ := command(args...); again != out {
		t.Errorf("the same seed printed\n%s\nthen\n%s", out, again)
	}
	// The last burst ends seconds after 3 minutes; the table still
	// covers the trace's 4.
	_, out, _ = command(append(args, "-bucket", "30s")...)
	if !strings.Contains(out, "| 3m30s | per-user | 0 | 0 | 0 | 0 |\n") {
		t.Errorf("-bucket 30s: stdout:\n%s\nwant a row for the quiet last 30 s", out)
	}
}

// TestCommandServerSettings: -default-algorithm, from the flag or the
// server's RLS_ twin, is the algorithm of a limit that names none: the
// edge adversary gets twice through a fixed window, not through a
// sliding one. A name that is no algorithm is a usage error.
func TestCommandServerSettings(t *testing.T) {
	args := []string{"-limits", "testdata/unnamed.yaml", "-domain", "sim", "-shape", "edge", "-rate", "10", "-duration", "4m", "-key", "user", "-bucket", "4m"}
	for _, c := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{nil, nil, "| total | per-user | 20 | 20 |\n"},
		{nil, []string{"-default-algorithm", "fixed_window"}, "| total | per-user | 40 | 0 |\n"},
		{map[string]string{"RLS_DEFAULT_ALGORITHM": "fixed_window"}, nil, "| total | per-user | 40 | 0 |\n"},
	} {
		env := func(k string) (string, bool) { v, ok := c.env[k]; return v, ok }
		code, out, errOut := commandEnv(env, append(args, c.args...)...)
		if code != 0 || !strings.HasSuffix(out, c.want) {
			t.Errorf("%v %q: exit %d, stderr %q, stdout:\n%s\nwant a last row %q", c.env, c.args, code, errOut, out, c.want)
		}
	}
	if code, _, errOut := command(append(args, "-default-algorithm", "nope")...); code != 2 || !strings.Contains(errOut, "-default-algorithm: ") {
		t.Errorf("-default-algorithm nope: exit %d, stderr %q; want 2", code, errOut)
	}
}

// docsChart is the command that draws docs/simulate-onoff.svg.
var docsChart = []string{"-limits", "testdata/sliding100.yaml", "-compare", "testdata/token150.yaml", "-domain", "api", "-shape", "onoff:1.2", "-rate", "100", "-duration", "6m", "-key", "user", "-bucket", "30s"}

// TestDocsChart: docs/simulate-onoff.svg is what its command draws today,
// byte for byte. After a change that moves it on purpose, regenerate it
// with the command docs/simulate.md gives.
func TestDocsChart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "chart.svg")
	if code, _, errOut := command(append(docsChart, "-svg", path)...); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("../../docs/simulate-onoff.svg")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("docs/simulate-onoff.svg is not what %q draws: regenerate it", docsChart)
	}
}
