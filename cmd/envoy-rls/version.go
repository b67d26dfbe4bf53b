package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/envoy-rls/envoy-rls/internal/cli"
)

// version is envoy-rls's version when the build sets it
// (-ldflags "-X main.version=v1.2.3"); empty, the build info's module
// version or VCS revision stands in.
var version string

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
	fmt.Fprint(stdout, versionText(version, info))
	return 0
}

// versionText renders the version of a build: set is the -ldflags
// version, info the build info (nil when the binary has none).
func versionText(set string, info *debug.BuildInfo) string {
	var b strings.Builder
	fmt.Fprintf(&b, "envoy-rls %s\n", buildVersion(set, info))
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
// (a tagged build's, or Go's pseudo-version of the commit), else the VCS
// revision, marked +dirty when the tree had changes.
func buildVersion(set string, info *debug.BuildInfo) string {
	if set != "" {
		return set
	}
	if info == nil {
		return "unknown (no build info)"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch {
		case s.Key == "vcs.revision":
			rev = s.Value
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = "+dirty"
		}
	}
	if rev != "" {
		return "(devel) " + rev + dirty
	}
	return "(devel)"
}
