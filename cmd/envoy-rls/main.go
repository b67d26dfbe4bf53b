// Command envoy-rls is a rate limit service for Envoy: it answers Envoy's
// RateLimitService v3 over gRPC, counting each descriptor in Redis (or in
// its embedded store) with the algorithm its limit names.
//
// Usage:
//
//	envoy-rls [flags]                                   run the server
//	envoy-rls check-config [-max-delay DUR] PATH        load a limits file or directory, exit 0 if valid
//	envoy-rls lint [-envoy PATH] [-limits PATH]         check that Envoy's rate_limits actions reach the limits
//	envoy-rls explain [flags] DOMAIN key=value...       show which limit a descriptor matches and its state
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

func main() { os.Exit(run(os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr)) }

// run is main with its inputs and outputs passed in, and an exit status out.
func run(args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "check-config" {
		return checkConfig(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "lint" {
		return lintCmd(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "explain" {
		return explainCommand(args[1:], lookupEnv, stdout, stderr)
	}
	o, err := parseFlags(args, lookupEnv, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "envoy-rls:", err)
		return 2
	}
	return serve(o, stderr)
}

// checkConfig loads a limits file or directory the way the server does.
func checkConfig(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check-config", flag.ContinueOnError)
	fs.SetOutput(stderr)
	maxDelay := fs.Duration("max-delay", config.DefaultMaxDelay, "the server's -max-delay")
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: envoy-rls check-config [-max-delay DUR] PATH")
		return 2
	}
	args = fs.Args()
	c, err := config.Options{MaxDelay: *maxDelay}.Load(args[0])
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	n := 0
	for _, d := range c.Domains {
		n += countRules(d.Descriptors)
	}
	fmt.Fprintf(stdout, "%s: OK, %d domains, %d limits\n", args[0], len(c.Domains), n)
	return 0
}

func countRules(ds []*config.Descriptor) int {
	n := 0
	for _, d := range ds {
		n += len(d.Rules) + countRules(d.Descriptors)
	}
	return n
}
