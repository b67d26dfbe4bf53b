package chart

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// binFlag is a row of docs/flags.md, the table internal/server's flags generate.
type binFlag struct {
	name, typ, env, def, meaning string
}

// flagRow matches a row: | `-name type` | `RLS_NAME` | default | meaning |.
var flagRow = regexp.MustCompile("^\\| `-([a-z0-9-]+)(?: ([a-z]+))?` \\| (?:`(RLS_[A-Z0-9_]+)`)? *\\| (.*?) \\| (.*) \\|$")

// flagTable is docs/flags.md by flag name.
func flagTable(t testing.TB) map[string]binFlag {
	t.Helper()
	flags := map[string]binFlag{}
	for _, line := range strings.Split(string(readFile(t, filepath.Join(repoRoot(t), "docs", "flags.md"))), "\n") {
		m := flagRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		def := strings.Trim(m[4], "`")
		if def == "empty" {
			def = ""
		}
		flags[m[1]] = binFlag{name: m[1], typ: m[2], env: m[3], def: def, meaning: m[5]}
	}
	if len(flags) < 50 {
		t.Fatalf("docs/flags.md: %d flags parsed; the table's format changed", len(flags))
	}
	return flags
}

// envTwins maps each RLS_ variable to its flag.
func envTwins(flags map[string]binFlag) map[string]binFlag {
	out := map[string]binFlag{}
	for _, f := range flags {
		if f.env != "" {
			out[f.env] = f
		}
	}
	return out
}

// parsedArgs checks that every argument is a binFlag of the table, written as
// -name=value (or a bare -name for a boolean), and returns their values.
func parsedArgs(t testing.TB, flags map[string]binFlag, args []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, a := range args {
		name, value, hasValue := strings.Cut(strings.TrimPrefix(a, "-"), "=")
		f, ok := flags[name]
		switch {
		case !strings.HasPrefix(a, "-") || !ok:
			t.Errorf("argument %q is no binFlag of docs/flags.md", a)
			continue
		case !hasValue && f.typ != "":
			t.Errorf("argument %q: -%s takes a %s, written -%s=VALUE so that no argument is read as its value", a, name, f.typ, name)
		case !hasValue:
			value = "true"
		}
		if _, dup := out[name]; dup {
			t.Errorf("-%s is given twice", name)
		}
		out[name] = value
	}
	return out
}
