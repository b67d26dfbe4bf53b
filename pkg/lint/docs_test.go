package lint

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// docLintCommand is an `envoy-rls lint` command line as the docs write it:
// up to the end of its code span or line.
var docLintCommand = regexp.MustCompile("envoy-rls lint([^`\n]*)")

// docCommands returns every distinct `envoy-rls lint ...` command line of
// the repository's docs (docs/*.md, README.md) and of the comments of its
// example configs (config/*.yaml), with where each is first written. A
// synopsis (`[-envoy PATH]`) is no command and is left out.
func docCommands(t *testing.T, root string) (cmds []string, where map[string]string) {
	t.Helper()
	var files []string
	for _, glob := range []string{"docs/*.md", "README.md", "config/*.yaml"} {
		m, err := filepath.Glob(filepath.Join(root, glob))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	where = make(map[string]string)
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			if strings.HasSuffix(file, ".yaml") && !strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			for _, m := range docLintCommand.FindAllStringSubmatch(line, -1) {
				args := strings.TrimRight(strings.TrimSpace(m[1]), ").,;:")
				if strings.ContainsAny(args, "[]") {
					continue
				}
				if _, seen := where[args]; !seen {
					rel, _ := filepath.Rel(root, file)
					where[args] = rel + ":" + strconv.Itoa(i+1)
					cmds = append(cmds, args)
				}
			}
		}
	}
	return cmds, where
}

// TestDocLintCommands runs every `envoy-rls lint` command the docs and the
// example configs' comments tell a user to run, from the repository's root
// as they are written, and wants each to pass (exit 0) on the shipped
// files: a CI gate built from the docs must pass on the project's own
// examples.
func TestDocLintCommands(t *testing.T) {
	t.Chdir("../..")
	cmds, where := docCommands(t, ".")
	// The commands the docs are known to give: the test must find them,
	// or its extraction broke.
	for _, want := range []string{
		"-envoy config/envoy.yaml -limits config/limits.yaml",
		"-partial -envoy config/envoy-rlqs.yaml -limits config/limits.yaml",
		"-partial -envoy config/envoy-login.yaml -limits config/limits.yaml",
	} {
		if !slices.Contains(cmds, want) {
			t.Errorf("the docs no longer give `envoy-rls lint %s` (found: %q)", want, cmds)
		}
	}
	for _, args := range cmds {
		code, stdout, stderr := runLint(t, strings.Fields(args)...)
		if code != 0 {
			t.Errorf("%s: `envoy-rls lint %s` exits %d, want 0:\n%s%s", where[args], args, code, stdout, stderr)
		}
	}
}
