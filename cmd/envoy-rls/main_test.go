package main

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/envoy-rls/envoy-rls/internal/cli"
	"github.com/envoy-rls/envoy-rls/internal/server"
)

// env is a lookup of the environment vars.
func env(vars map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

func runMain(t *testing.T, vars map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr strings.Builder
	code := run(args, env(vars), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// TestHelp: every way of asking for help prints the same help on stdout and
// exits 0; it lists the commands, one line each, and every flag with its
// environment twin and its default.
func TestHelp(t *testing.T) {
	_, want, _ := runMain(t, nil, "help")
	for _, args := range [][]string{{"-h"}, {"-help"}, {"--help"}, {"help"}, {"-config", "x.yaml", "-h"}} {
		code, out, errOut := runMain(t, nil, args...)
		if code != 0 || errOut != "" || out != want {
			t.Errorf("%q: exit %d, stderr %q, stdout:\n%s\nwant exit 0 and:\n%s", args, code, errOut, out, want)
		}
	}
	if !strings.HasPrefix(want, "usage: envoy-rls [flags]\n") {
		t.Errorf("help does not start with the usage line:\n%s", want)
	}
	for _, c := range commands() {
		line := regexp.MustCompile(`(?m)^  envoy-rls ` + regexp.QuoteMeta(strings.TrimSpace(c.name+" "+c.brief)) + ` +` + regexp.QuoteMeta(c.summary) + `$`)
		if !line.MatchString(want) {
			t.Errorf("help lacks the line of %s:\n%s", c.name, want)
		}
	}
	n := 0
	server.CommandLine(server.Help{}).FS.VisitAll(func(f *flag.Flag) {
		n++
		def := "default " + f.DefValue
		if f.DefValue == "" {
			def = "default empty"
		}
		notes := cli.EnvName(f.Name) + ", " + def
		if f.Name == "version" {
			notes = def
		}
		if !regexp.MustCompile(`(?m)^  -` + regexp.QuoteMeta(f.Name) + `( [a-z]+)?  \(` + regexp.QuoteMeta(notes) + `\)$`).MatchString(want) {
			t.Errorf("help lacks -%s (%s)", f.Name, notes)
		}
	})
	if n < 30 {
		t.Errorf("only %d server flags", n)
	}
	for _, line := range []string{
		"  -store-timeout duration  (RLS_STORE_TIMEOUT, default 50ms)",
		"  -failure-mode mode  (RLS_FAILURE_MODE, default allow)",
		"  -hash-values  (RLS_HASH_VALUES, default false)",
		"  -max-keys int  (RLS_MAX_KEYS, default 1000000)",
	} {
		if !strings.Contains(want, line+"\n") {
			t.Errorf("help lacks %q", line)
		}
	}

	// A usage error is not help: stderr, exit 2, and where to find help.
	code, out, errOut := runMain(t, nil, "-nope")
	if code != 2 || out != "" || errOut != "envoy-rls: flag provided but not defined: -nope\nusage: envoy-rls [flags] (-h for help)\n" {
		t.Errorf("-nope: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, _, errOut = runMain(t, nil, "-redis-ulr", "redis://localhost:6379")
	if code != 2 || !strings.HasPrefix(errOut, "envoy-rls: flag provided but not defined: -redis-ulr, did you mean -redis-url?\n") {
		t.Errorf("-redis-ulr: exit %d, stderr %q; want the flag it most likely meant", code, errOut)
	}
	code, _, errOut = runMain(t, nil, "serve")
	if code != 2 || !strings.Contains(errOut, `unexpected argument "serve" (commands: check-config, lint, explain, simulate, top, call, reset, version, help)`) {
		t.Errorf("serve: exit %d, stderr %q", code, errOut)
	}
}

// TestCommandHelp: each command's -h, and `help COMMAND`, print its usage
// and flags on stdout and exit 0.
func TestCommandHelp(t *testing.T) {
	for _, c := range commands() {
		if c.name == "help" {
			continue
		}
		code, out, errOut := runMain(t, nil, c.name, "-h")
		if want := "usage: envoy-rls " + strings.TrimSpace(c.name+" "+c.args) + "\n"; code != 0 || errOut != "" || !strings.HasPrefix(out, want) {
			t.Errorf("%s -h: exit %d, stderr %q, stdout:\n%s\nwant exit 0 and a start of %q", c.name, code, errOut, out, want)
		}
		if code, viaHelp, _ := runMain(t, nil, "help", c.name); code != 0 || viaHelp != out {
			t.Errorf("help %s: exit %d, stdout:\n%s\nwant the output of %s -h", c.name, code, viaHelp, c.name)
		}
	}
	if code, _, errOut := runMain(t, nil, "check-config", "-h"); code != 0 || errOut != "" {
		t.Errorf("check-config -h: exit %d, %q", code, errOut)
	}
	for _, args := range [][]string{{"help", "nope"}, {"help", "lint", "explain"}, {"help", "help"}} {
		if code, _, errOut := runMain(t, nil, args...); code != 2 || !strings.Contains(errOut, "usage: envoy-rls help [COMMAND]") {
			t.Errorf("%q: exit %d, stderr %q; want 2 and the usage", args, code, errOut)
		}
	}
}

// TestVersion: `version` and `-version` print the same three facts, and
// -version answers even when the environment holds a bad value.
func TestVersion(t *testing.T) {
	code, out, errOut := runMain(t, nil, "version")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if code != 0 || errOut != "" || len(lines) < 3 || !strings.HasPrefix(lines[0], "envoy-rls ") ||
		lines[1] != "go "+runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH ||
		!strings.Contains(out, "\n"+gcpEnvoyModule+" "+goModVersion(t, gcpEnvoyModule)+"\n") {
		t.Errorf("version: exit %d, stderr %q, stdout:\n%s", code, errOut, out)
	}
	for _, args := range [][]string{{"-version"}, {"--version"}, {"-version", "-config", "x"}} {
		if code, got, _ := runMain(t, map[string]string{"RLS_STORE_TIMEOUT": "abc"}, args...); code != 0 || got != out {
			t.Errorf("%q: exit %d, stdout:\n%s\nwant exit 0 and the output of version", args, code, got)
		}
	}
	if code, _, errOut := runMain(t, nil, "version", "extra"); code != 2 || !strings.Contains(errOut, `unexpected argument "extra"`) {
		t.Errorf("version extra: exit %d, stderr %q", code, errOut)
	}
}

const gcpEnvoyModule = "github.com/envoyproxy/go-control-plane/envoy"

// goModVersion is the version go.mod requires of module.
func goModVersion(t *testing.T, module string) string {
	t.Helper()
	data, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*(?:require\s+)?` + regexp.QuoteMeta(module) + `\s+(\S+)`).FindSubmatch(data)
	if m == nil {
		t.Fatalf("go.mod does not require %s", module)
	}
	return string(m[1])
}

func TestVersionText(t *testing.T) {
	gcp := []*debug.Module{
		{Path: "go.uber.org/zap", Version: "v1.28.0"},
		{Path: gcpEnvoyModule, Version: "v1.40.0"},
		{Path: "github.com/envoyproxy/go-control-plane/ratelimit", Version: "v0.1.0", Replace: &debug.Module{Path: "../ratelimit", Version: "(devel)"}},
	}
	for _, tc := range []struct {
		name     string
		set, rev string
		info     *debug.BuildInfo
		want     string
	}{
		{"set by -ldflags", "v1.2.3", "", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.9.0"}, Deps: gcp},
			"envoy-rls v1.2.3\ngo go1.26.0 GOOS/GOARCH\n" + gcpEnvoyModule + " v1.40.0\n../ratelimit (devel)\n"},
		{"module version", "", "", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.9.0"}, Deps: gcp[:2]},
			"envoy-rls v0.9.0\ngo go1.26.0 GOOS/GOARCH\n" + gcpEnvoyModule + " v1.40.0\n"},
		{"VCS revision of a changed tree", "", "", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}}},
			"envoy-rls " + release + " (abc123+dirty)\ngo go1.26.0 GOOS/GOARCH\ngithub.com/envoyproxy/go-control-plane unknown (no build info)\n"},
		{"no VCS stamp, the revision set by -ldflags (the image)", "", "def456", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}},
			"envoy-rls " + release + " (def456)\ngo go1.26.0 GOOS/GOARCH\ngithub.com/envoyproxy/go-control-plane unknown (no build info)\n"},
		{"no build info", "", "", nil,
			"envoy-rls " + release + "\ngo " + runtime.Version() + " GOOS/GOARCH\ngithub.com/envoyproxy/go-control-plane unknown (no build info)\n"},
	} {
		got := strings.Replace(versionText(tc.set, tc.rev, tc.info), runtime.GOOS+"/"+runtime.GOARCH, "GOOS/GOARCH", 1)
		if got != tc.want {
			t.Errorf("%s:\n%s\nwant:\n%s", tc.name, got, tc.want)
		}
	}
}

// TestVersionBinary: a built binary reports the version -ldflags set and
// the go-control-plane go.mod requires, from its own build info.
func TestVersionBinary(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "envoy-rls")
	build := exec.Command("go", "build", "-ldflags", "-X main.version=v9.8.7-test", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("envoy-rls version: %v", err)
	}
	// Then one line per go-control-plane module the binary holds, the
	// envoy module's among them.
	want := "envoy-rls v9.8.7-test\ngo " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + "\n"
	rest, ok := strings.CutPrefix(string(out), want)
	if !ok || !strings.Contains("\n"+rest, "\n"+gcpEnvoyModule+" "+goModVersion(t, gcpEnvoyModule)+"\n") {
		t.Errorf("envoy-rls version:\n%s\nwant it to start with:\n%s\nand to name %s %s", out, want, gcpEnvoyModule, goModVersion(t, gcpEnvoyModule))
	}
	for _, l := range strings.Split(strings.TrimSuffix(rest, "\n"), "\n") {
		if !strings.HasPrefix(l, gcpModules+"/") {
			t.Errorf("envoy-rls version: line %q is not a go-control-plane module", l)
		}
	}
}

// countLimits has nested descriptors, a rate_limits list and an unlimited
// limit, in a shape internal/lint's clean bootstrap reaches entirely.
const countLimits = `domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 600}
  - key: api_key
    rate_limits:
      - {name: per-second, algorithm: token_bucket, unit: second, requests_per_unit: 10, burst: 20}
      - {name: per-day, unit: day, requests_per_unit: 10000}
  - key: path
    value: /login
    descriptors:
      - key: remote_address
        rate_limit: {unit: minute, requests_per_unit: 5}
  - key: path
    value: /healthz
    rate_limit: {unlimited: true}
  - key: generic_key
    value: uploads
    rate_limit: {name: uploads, algorithm: leaky_bucket, unit: second, requests_per_unit: 10, burst: 4}
`

// TestCountsAgree: check-config and lint say the same of one file: every
// rate_limit body is a limit (each entry of a list, unlimited ones too).
func TestCountsAgree(t *testing.T) {
	limits := filepath.Join(t.TempDir(), "limits.yaml")
	if err := os.WriteFile(limits, []byte(countLimits), 0o644); err != nil {
		t.Fatal(err)
	}
	const want = "1 domain, 6 limits (1 unlimited) on 5 descriptors"
	code, out, errOut := runMain(t, nil, "check-config", limits)
	if code != 0 || out != limits+": OK, "+want+"\n" {
		t.Errorf("check-config: exit %d, stdout %q, stderr %q; want %q", code, out, errOut, want)
	}
	envoy := "../../internal/lint/testdata/clean/envoy.yaml"
	code, out, errOut = runMain(t, nil, "lint", "-envoy", envoy, "-limits", limits)
	if code != 0 || out != envoy+", "+limits+": OK, "+want+"\n" {
		t.Errorf("lint: exit %d, stdout %q, stderr %q; want %q", code, out, errOut, want)
	}

	// A flag after the path, and the path after --.
	if code, out, errOut := runMain(t, nil, "check-config", limits, "-max-delay", "2s"); code != 0 || !strings.HasSuffix(out, want+"\n") {
		t.Errorf("check-config PATH -max-delay 2s: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, _, errOut := runMain(t, nil, "check-config", limits, "-max-delay", "2"); code != 2 || !strings.Contains(errOut, `-max-delay "2": want a duration such as 50ms or 1s`) {
		t.Errorf("check-config PATH -max-delay 2: exit %d, stderr %q", code, errOut)
	}
	if code, _, _ := runMain(t, nil, "check-config", "--", limits); code != 0 {
		t.Errorf("check-config -- PATH: exit %d", code)
	}
	for _, args := range [][]string{{"check-config"}, {"check-config", limits, limits}} {
		if code, _, errOut := runMain(t, nil, args...); code != 2 || !strings.Contains(errOut, "want one PATH") {
			t.Errorf("%q: exit %d, stderr %q", args, code, errOut)
		}
	}
}

// TestDropInDispatch: as ratelimit, a refused variable stops the start
// with exit 2 and one line per refusal, each naming the drop-in; the
// subcommands run as they do under envoy-rls.
func TestDropInDispatch(t *testing.T) {
	var stdout, stderr strings.Builder
	code := dropIn(nil, env(map[string]string{"SHADOW_MODE": "yes", "PORT": "http"}), &stdout, &stderr)
	want := "ratelimit: PORT=\"http\": want a port number, 0 to 65535\nratelimit: SHADOW_MODE=\"yes\": want true or false\n"
	if code != 2 || stderr.String() != want {
		t.Errorf("got exit %d, stderr:\n%s\nwant exit 2 and\n%s", code, stderr.String(), want)
	}
	stdout.Reset()
	stderr.Reset()
	if code := dropIn([]string{"version"}, env(map[string]string{"PORT": "http"}), &stdout, &stderr); code != 0 || !strings.HasPrefix(stdout.String(), "envoy-rls ") {
		t.Errorf("ratelimit version: exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
}

// TestReleaseIsChangelogs: the release every build names is the newest
// version CHANGELOG.md describes, so that neither is bumped without the
// other.
func TestReleaseIsChangelogs(t *testing.T) {
	data, err := os.ReadFile("../../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^## (\S+)`).FindSubmatch(data)
	if m == nil {
		t.Fatal("CHANGELOG.md has no version heading (## VERSION …)")
	}
	if want := strings.TrimSuffix(release, "-dev"); string(m[1]) != want {
		t.Errorf("CHANGELOG.md's newest version is %s; release is %s, want %s (or %s-dev)", m[1], release, m[1], m[1])
	}
}
