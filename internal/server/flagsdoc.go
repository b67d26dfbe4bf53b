package server

import (
	"fmt"
	"strings"
)

//go:generate go test -run TestFlagsDoc -update

// FlagsMarkdown is docs/flags.md: every server flag with its RLS_ twin,
// its default and its help, as `envoy-rls -h` lists them.
// TestFlagsDoc fails when the file differs; `go generate` (or the test's
// -update) rewrites it.
func FlagsMarkdown() string {
	var b strings.Builder
	b.WriteString(`# envoy-rls's flags

<!-- Generated from internal/server's flags by ` + "`go generate ./internal/server`" + `: do not edit. -->

Every flag of the server (` + "`envoy-rls [flags]`" + `), as ` + "`envoy-rls -h`" + ` lists
them. Each can also be set by its environment variable; a flag given on
the command line wins. An empty variable is as good as unset, except for
the flags whose empty value is a setting of its own (` + "`RLS_DEBUG_ADDR=`" + `
turns pprof off, ` + "`RLS_REDIS_URL=`" + ` chooses the embedded store).

| flag | environment | default | meaning |
|---|---|---|---|
`)
	for _, f := range CommandLine(Help{}).Flags() {
		name := "`-" + f.Name
		if f.Word != "" {
			name += " " + f.Word
		}
		name += "`"
		env, def := "", "empty"
		if f.Env != "" {
			env = "`" + f.Env + "`"
		}
		if f.Default != "" {
			def = "`" + f.Default + "`"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", name, env, def, cell(f.Usage))
	}
	return b.String()
}

// cell escapes s for a Markdown table's cell: a bar would end it, an
// asterisk (*.yaml) start emphasis.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "*", `\*`).Replace(s)
}
