package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/envoy-rls/envoy-rls/internal/cli"
)

// release is the version this tree is: the newest heading of CHANGELOG.md
// (TestReleaseIsChangelogs), so that every build, however made, says which
// release it is or is on the way to.
const release = "0.2.0-dev"

// version, when the build sets it (-ldflags "-X main.version=v1.2.3"),
// replaces the version line's first word: a release build's tag.
// revision, set the same way (-X main.revision=abc123), names the commit
// where the build has no VCS stamp of its own: the image, whose build
// context holds no .git.
var version, revision string

// gcpModules is the prefix of go-control-plane's modules: the Envoy API
// (and, for xDS, the ratelimit config) envoy-rls speaks is theirs, so a bug
// report needs their versions as much as envoy-rls's.
const gcpModules = "github.com/envoyproxy/go-control-plane"

// versionCommand is `envoy-rls version` and `envoy-rls -version`.
func versionCommand(args []string, _ func(string) (string, bool), stdout, stderr io.Writer) int {
	cl := cli.New("envoy-rls version", "", "Prints the version of envoy-rls, the Go that built it and the\ngo-control-plane modules it speaks Envoy's API with.\n")
	rest, err := cl.ParseArgs(args)
	if err == nil && len(rest) > 0 {
		err = fmt.Errorf("unexpected argument %q", rest[0])
	}
	if err != nil {
		return cl.Failed(err, stdout, stderr)
	}
	info, _ := debug.ReadBuildInfo()
	fmt.Fprint(stdout, versionText(version, revision, info))
	return 0
}

// versionText renders the version of a build: set and rev are the
// -ldflags version and revision, info the build info (nil when the binary
// has none).
func versionText(set, rev string, info *debug.BuildInfo) string {
	var b strings.Builder
	fmt.Fprintf(&b, "envoy-rls %s\n", buildVersion(set, rev, info))
	goVersion := runtime.Version()
	if info != nil && info.GoVersion != "" {
		goVersion = info.GoVersion
	}
	fmt.Fprintf(&b, "go %s %s/%s\n", goVersion, runtime.GOOS, runtime.GOARCH)
	var found bool
	if info != nil {
		for _, m := range info.Deps {
			if m.Path != gcpModules && !strings.HasPrefix(m.Path, gcpModules+"/") {
				continue
			}
			if m.Replace != nil {
				m = m.Replace
			}
			fmt.Fprintf(&b, "%s %s\n", m.Path, m.Version)
			found = true
		}
	}
	if !found {
		fmt.Fprintf(&b, "%s unknown (no build info)\n", gcpModules)
	}
	return b.String()
}

// buildVersion is set if the build set it, else the main module's version
// (a tagged build fetched as a module), else release; followed by the
// commit it was built from, when the build knows it: the VCS stamp Go
// writes (marked +dirty when the tree had changes), or rev, which the
// Dockerfile sets.
func buildVersion(set, rev string, info *debug.BuildInfo) string {
	if set != "" {
		return set
	}
	if info != nil && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	var vcs, dirty string
	if info != nil {
		for _, s := range info.Settings {
			switch {
			case s.Key == "vcs.revision":
				vcs = s.Value
			case s.Key == "vcs.modified" && s.Value == "true":
				dirty = "+dirty"
			}
		}
	}
	switch {
	case vcs != "":
		return release + " (" + vcs + dirty + ")"
	case rev != "":
		return release + " (" + rev + ")"
	}
	return release
}
