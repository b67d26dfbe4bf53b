// Command envoy-rls is a rate limit service for Envoy: it answers Envoy's
// RateLimitService v3 over gRPC, counting each descriptor in Redis (or in
// its embedded store) with the algorithm its limit names.
//
// Usage:
//
//	envoy-rls [flags]                                   run the server
//	envoy-rls check-config [-max-delay DUR] [-xds] PATH load a limits file or directory (or an xDS snapshot), exit 0 if valid
//	envoy-rls lint [-partial] [-envoy PATH] [-limits PATH] check that Envoy's rate_limits actions reach the limits
//	envoy-rls explain [flags] DOMAIN key=value...       show which limit a descriptor matches and its state
//	envoy-rls explain -rlqs [-addr URL] DOMAIN k=v...   show an RLQS bucket's clients, demands and shares
//	envoy-rls simulate -limits PATH -domain D -trace CSV  replay a trace through limits: per rule admitted and refused over time
//	envoy-rls top [-addr URL] [-admin-token-file PATH]  show the descriptors a running server refused most in the last minute
//	envoy-rls call -domain DOMAIN key=value... [+ ...]  send one ShouldRateLimit to a running server, print the answer
//	envoy-rls reset -domain DOMAIN key=value...         clear one descriptor's limits on a running server
//	envoy-rls version                                   print the version, and the Go and go-control-plane versions
//	envoy-rls help [COMMAND]                            print the help of envoy-rls or of a command
//
// Every server flag has an RLS_ environment twin (-redis-url is
// RLS_REDIS_URL); `envoy-rls -h` and docs/flags.md list them with their
// defaults. Run under the name ratelimit (/bin/ratelimit in the image), it
// is a drop-in for envoyproxy/ratelimit, configured by that service's
// environment (docs/environment.md). main only dispatches: the server is
// package server, the drop-in's environment package dropin, and lint,
// explain, simulate, top, call and reset their packages' commands.
package main

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	// The time zone database, for the limits that count in a zone's
	// windows: a distroless image has none of its own.
	_ "time/tzdata"

	"github.com/envoy-rls/envoy-rls/internal/dropin"
	"github.com/envoy-rls/envoy-rls/internal/explain"
	"github.com/envoy-rls/envoy-rls/internal/lint"
	"github.com/envoy-rls/envoy-rls/internal/server"
	"github.com/envoy-rls/envoy-rls/internal/simulate"
)

func main() {
	if dropin.Is(os.Args[0]) { // run as envoyproxy/ratelimit
		os.Exit(dropIn(os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr))
	}
	os.Exit(run(os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr))
}

// command is a subcommand of envoy-rls.
type command struct {
	name string
	// args is the usage after the name, in the command's own help; brief
	// is the part of it the list of commands shows, beside the summary.
	args, brief, summary string
	run                  func(args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int
}

// commands are the subcommands, in the order the help lists them. It is a
// function, not a variable, because help's own entry refers back to it.
func commands() []command {
	return []command{
		{"check-config", checkConfigArgs, "PATH", "load limits as the server would; exit 0 if they load", checkConfig},
		{"lint", lint.CommandArgs, "", "check that Envoy's rate_limits actions (and forward-auth policies) reach the limits", lint.Command},
		{"explain", explain.CommandArgs, "DOMAIN key=value...", "show which limit a descriptor matches, and its state (-rlqs: an RLQS bucket's clients, demands and shares)", explain.Command},
		{"simulate", simulate.CommandArgs, "-limits PATH -trace CSV", "replay a trace through limits: per rule, admitted and refused over time, as a table and an SVG chart", simulate.Command},
		{"top", explain.TopArgs, "[-addr URL]", "show the descriptors a running server refused most in the last minute", explain.TopCommand},
		{"call", explain.CallArgs, "-domain DOMAIN key=value...", "send one ShouldRateLimit to a running server and print its answer (exit 3 on OVER_LIMIT)", explain.CallCommand},
		{"reset", explain.ResetArgs, "-domain DOMAIN key=value...", "clear one descriptor's limits on a running server (its POST /reset)", explain.ResetCommand},
		{"version", "", "", "print the version, and the Go and go-control-plane versions", versionCommand},
		{"help", "[COMMAND]", "[COMMAND]", "print this help, or a command's", helpCommand},
	}
}

// commandNames lists the subcommands for an error message.
func commandNames() string {
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	return strings.Join(names, ", ")
}

// subcommand runs the command args[0] names, if it names one, and
// reports whether it did.
func subcommand(args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) (int, bool) {
	if len(args) == 0 {
		return 0, false
	}
	for _, c := range commands() {
		if args[0] == c.name {
			return c.run(args[1:], lookupEnv, stdout, stderr), true
		}
	}
	return 0, false
}

// run is main with its inputs and outputs passed in, and an exit status out.
func run(args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int {
	return runNaming(args, lookupEnv, nil, stdout, stderr)
}

// runNaming is run, the settings the environment sets named by names
// (server.Options.NameSettings) when it is not nil.
func runNaming(args []string, lookupEnv func(string) (string, bool), names func(string) string, stdout, stderr io.Writer) int {
	if code, ok := subcommand(args, lookupEnv, stdout, stderr); ok {
		return code
	}
	help := serverHelp()
	o, err := server.ParseFlags(args, lookupEnv, help)
	if err != nil {
		return server.CommandLine(help).Failed(err, stdout, stderr)
	}
	if o.WantsVersion() {
		return versionCommand(nil, lookupEnv, stdout, stderr)
	}
	// The process's own environment: an RLS_ variable of no flag is a
	// typo the operator set, whatever the drop-in translated.
	o.NoteEnvironment(os.Environ())
	if names != nil {
		o.NameSettings(names)
	}
	info, _ := debug.ReadBuildInfo()
	o.SetVersion(buildVersion(version, revision, info))
	return server.Main(o, stderr)
}

// dropIn is run for the drop-in: the subcommands as envoy-rls runs them,
// the server with its flags from envoyproxy/ratelimit's environment.
// Flags on the command line (there are none in the deployments it stands
// in for) still win over both.
func dropIn(args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int {
	if code, ok := subcommand(args, lookupEnv, stdout, stderr); ok {
		return code
	}
	cl := server.CommandLine(serverHelp())
	env, err := dropin.Environment(lookupEnv, cl)
	if err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintf(stderr, "%s: %s\n", dropin.Name, line)
		}
		return 2
	}
	return runNaming(args, env, dropin.Settings(lookupEnv, cl), stdout, stderr)
}

// about is the start of `envoy-rls -h`; the commands (serverHelp) and
// the flags follow it.
const about = `envoy-rls is a rate limit service for Envoy: it answers Envoy's
RateLimitService v3 over gRPC, counting each descriptor in Redis (or in its
embedded store) with the algorithm its limit names.
`

// serverHelp is what the server's help says beside its flags.
func serverHelp() server.Help {
	return server.Help{About: serverAbout(), Commands: commandNames()}
}

// serverAbout is the server help's text after its usage line: what
// envoy-rls is, and its commands, one line each.
func serverAbout() string {
	var b strings.Builder
	b.WriteString(about)
	b.WriteString("\ncommands:\n")
	lines := [][2]string{{"envoy-rls [flags]", "run the server"}}
	for _, c := range commands() {
		lines = append(lines, [2]string{strings.TrimSpace("envoy-rls " + c.name + " " + c.brief), c.summary})
	}
	width := 0
	for _, l := range lines {
		width = max(width, len(l[0]))
	}
	for _, l := range lines {
		fmt.Fprintf(&b, "  %-*s  %s\n", width, l[0], l[1])
	}
	b.WriteString("\n`envoy-rls COMMAND -h` gives a command's usage and flags.\n")
	return b.String()
}

// helpCommand is `envoy-rls help [COMMAND]`.
func helpCommand(args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int {
	switch {
	case len(args) == 0:
		server.CommandLine(serverHelp()).WriteHelp(stdout)
		return 0
	case len(args) == 1 && args[0] != "help":
		for _, c := range commands() {
			if c.name == args[0] {
				return c.run([]string{"-h"}, lookupEnv, stdout, stderr)
			}
		}
	}
	fmt.Fprintf(stderr, "envoy-rls help: unknown command %q (commands: %s)\nusage: envoy-rls help [COMMAND]\n", strings.Join(args, " "), commandNames())
	return 2
}
