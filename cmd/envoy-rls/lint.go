package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
	"github.com/envoy-rls/envoy-rls/pkg/lint"
)

const lintUsage = "usage: envoy-rls lint [-envoy PATH] [-limits PATH] [-max-delay DUR]"

// lintCmd checks an Envoy bootstrap against a limits file or directory: it
// prints one line per finding and exits 1, or prints OK and exits 0; a usage
// error, or a file that does not load, exits 2.
func lintCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("lint", flag.ContinueOnError)
	fs.SetOutput(stderr)
	envoyPath := fs.String("envoy", "config/envoy.yaml", "the Envoy bootstrap, YAML or JSON")
	limitsPath := fs.String("limits", "config/limits.yaml", "the limits file or directory")
	maxDelay := fs.Duration("max-delay", config.DefaultMaxDelay, "the server's -max-delay")
	if err := fs.Parse(args); err != nil || fs.NArg() != 0 {
		fmt.Fprintln(stderr, lintUsage)
		return 2
	}
	findings, err := lint.Lint(*envoyPath, *limitsPath, config.Options{MaxDelay: *maxDelay})
	if err != nil {
		fmt.Fprintln(stderr, "envoy-rls lint:", err)
		return 2
	}
	for _, f := range findings {
		fmt.Fprintln(stdout, f)
	}
	if len(findings) > 0 {
		return 1
	}
	fmt.Fprintf(stdout, "%s, %s: OK\n", *envoyPath, *limitsPath)
	return 0
}
