package dropin

import (
	"fmt"
	"slices"
	"strings"
)

//go:generate go test -run TestEnvironmentDoc -update

// Markdown is docs/environment.md: every variable of the table, its
// default there, and what envoy-rls does with it, then the flags the
// drop-in sets whatever the environment says. TestEnvironmentDoc fails
// when the file differs; `go generate` (or the test's -update) rewrites
// it.
func Markdown() string {
	var b strings.Builder
	b.WriteString(`# envoyproxy/ratelimit's environment

<!-- Generated from internal/dropin's table by ` + "`go generate ./pkg/dropin`" + `: do not edit. -->

Run as ` + "`ratelimit`" + ` (envoyproxy/ratelimit's ` + "`/bin/ratelimit`" + `), envoy-rls reads
envoyproxy/ratelimit's environment, variable by variable as below, and
translates it into its own flags, as if given by their ` + "`RLS_`" + ` twins; an
` + "`RLS_`" + ` variable that is set wins. A malformed value, or a refused one, stops
the start with one line naming the variable. An empty variable is as good
as unset; a blank default is an empty or unset one. "Ignored" variables
change no decision, and their form is still checked. The OpenTelemetry
SDK's ` + "`OTEL_*`" + ` variables (the OTLP endpoint, its headers, TLS and timeout,
the batching) are the SDK's to read, as there, once ` + "`TRACING_ENABLED=true`" + `.

| variable | its default | envoy-rls |
|---|---|---|
`)
	for _, v := range variables {
		def := ""
		if v.def != "" {
			def = "`" + v.def + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", v.name, def, cell(v.doc()))
	}
	b.WriteString("\nWhatever the environment says, the drop-in sets these flags, so that\ndecisions mean what they mean in envoyproxy/ratelimit; their `RLS_` twins\nchange them:\n\n")
	for _, f := range slices.Sorted(func(yield func(string) bool) {
		for f := range dropInDefaults {
			if !yield(f) {
				return
			}
		}
	}) {
		fmt.Fprintf(&b, "- `-%s=%s`\n", f, dropInDefaults[f])
	}
	return b.String()
}

// doc is what envoy-rls does with the variable, in docs/environment.md:
// the table's words, else what its flag, needs and refusal say.
func (v variable) doc() string {
	if v.does != "" {
		return v.does
	}
	var conds []string
	for _, n := range v.needs {
		if !strings.Contains(n, "=") {
			n += "=true"
		}
		conds = append(conds, "`"+n+"`")
	}
	with := ""
	if len(conds) > 0 {
		with = "with " + strings.Join(conds, " and ") + ", "
	}
	switch {
	case v.refused != "":
		allow := v.allow
		if allow == "" {
			allow = v.def
		}
		if v.kind.name == boolean.name {
			return with + "refused when " + map[string]string{"false": "true", "true": "false"}[allow] + ": " + v.refused
		}
		return with + "refused unless `" + allow + "`: " + v.refused
	case v.flag != "":
		s := with + "`-" + v.flag + "`"
		if v.ours {
			s += "; unset, envoy-rls's default"
		}
		return s
	}
	return "ignored"
}

// cell escapes s for a Markdown table's cell.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
