package lint

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// A lint command as the docs write it: in a code span, which may wrap
// across lines, or alone on a line of a code block.
var (
	docLintSpan = regexp.MustCompile("`envoy-rls lint([^`]*)`")
	docLintLine = regexp.MustCompile(`(?m)^\s*(?:\$ )?envoy-rls lint([^` + "`" + `\n]*)$`)
	// docPlaceholder is an argument in capitals (PATH, FILE) of a synopsis.
	docPlaceholder = regexp.MustCompile(`(^|\s)[A-Z]{2,}(\s|$)`)
)

// docCommands returns every distinct `envoy-rls lint ...` command line of
// the repository's docs (docs/*.md, README.md) and of the comments of its
// example configs (config/*.yaml), with the file that first gives each. A
// synopsis (`[-envoy PATH]`, `-envoy PATH`: a bracket or a placeholder in
// capitals) is no command and is left out.
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
		text := string(data)
		if strings.HasSuffix(file, ".yaml") {
			// The comments alone, without their #, so that a command
			// wrapped across two of them reads as one.
			var comments []string
			for _, line := range strings.Split(text, "\n") {
				if c, ok := strings.CutPrefix(strings.TrimSpace(line), "#"); ok {
					comments = append(comments, c)
				}
			}
			text = strings.Join(comments, "\n")
		}
		var found [][]string
		found = append(found, docLintSpan.FindAllStringSubmatch(text, -1)...)
		found = append(found, docLintLine.FindAllStringSubmatch(text, -1)...)
		for _, m := range found {
			args := strings.Join(strings.Fields(m[1]), " ")
			if strings.ContainsAny(args, "[]") || docPlaceholder.MatchString(args) {
				continue
			}
			if _, seen := where[args]; !seen {
				where[args], _ = filepath.Rel(root, file)
				cmds = append(cmds, args)
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
		"-envoy config/envoy-llm.yaml -limits config/limits-llm.yaml",
		"-partial -forward-auth config/forward-auth.yaml -limits config/limits.yaml",
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
