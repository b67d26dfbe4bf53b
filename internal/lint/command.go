package lint

import (
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"

	"github.com/envoy-rls/envoy-rls/internal/cli"
	"github.com/envoy-rls/envoy-rls/internal/forwardauth"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// CommandArgs is the usage of `envoy-rls lint` after its name.
const CommandArgs = "[-envoy PATH] [-forward-auth PATH] [-limits PATH] [-partial] [-max-delay DUR]"

const lintAbout = `Reads the routes' rate_limits actions in an Envoy bootstrap, derives every
descriptor they can send (and every bucket id a rate_limit_quota filter's
bucket_matchers can build), and reports, one line each naming the route and
the limit: descriptors and bucket ids that no limit matches, limits that no route can
reach, a filter domain missing from the limits, a leaky bucket whose
worst wait exceeds the filter's timeout, concurrency slots never given
back, and, in a domain with holds, reservations never settled on stream
done, settles on the request path and calls sent without their id. Exit 0 when clean (printing what
the limits hold, counted as check-config counts), 1 with findings, 2 on a
usage error or when a file does not load. What the limits hold that loads
but is most likely not meant (an algorithm that a modifier's fields make
misleading) is warned of on stderr, as check-config warns of it, without changing the
exit status.

With -forward-auth, the policies of a forward-auth file (the server's
-forward-auth-config) are checked the same way, each policy's rate_limits
as one route's: alone, or beside the bootstrap when -envoy is given too.

With -partial, the bootstrap is taken to serve part of the limits (one
gateway per team, an RLQS Envoy beside an RLS one): every route must still
reach a limit, but the limits, and domains, that no route reaches are not
reported.
`

// Command is `envoy-rls lint`: it checks an Envoy bootstrap against a
// limits file or directory, prints one line per finding and exits 1, or
// prints OK and exits 0; a usage error, or a file that does not load,
// exits 2. It reads no environment; lookupEnv is there so that every
// command has the same signature.
func Command(args []string, _ func(string) (string, bool), stdout, stderr io.Writer) int {
	cl := cli.New("envoy-rls lint", CommandArgs, lintAbout)
	envoyPath := cl.FS.String("envoy", "config/envoy.yaml", "the Envoy bootstrap, YAML or JSON; not read when only -forward-auth is given")
	faPath := cl.FS.String("forward-auth", "", "a forward-auth policies file (the server's -forward-auth-config) to check as well, or alone when -envoy is not given")
	limitsPath := cl.FS.String("limits", "config/limits.yaml", "the limits file or directory")
	partial := cl.FS.Bool("partial", false, "the bootstrap serves part of the limits: check that every route reaches a limit, without reporting the limits no route reaches")
	maxDelay := cl.FS.Duration("max-delay", config.DefaultMaxDelay, "the server's -max-delay")
	rest, err := cl.ParseArgs(args)
	if err == nil && len(rest) > 0 {
		err = fmt.Errorf("unexpected argument %q: the files are -envoy, -forward-auth and -limits", rest[0])
	}
	if err != nil {
		return cl.Failed(err, stdout, stderr)
	}
	if *faPath != "" && !flagGiven(cl, "envoy") {
		*envoyPath = ""
	}
	c, findings, err := lintFiles(*envoyPath, *faPath, *limitsPath, config.Options{MaxDelay: *maxDelay})
	if err != nil {
		fmt.Fprintln(stderr, "envoy-rls lint:", err)
		return 2
	}
	for _, w := range c.Warnings() {
		fmt.Fprintln(stderr, "warning:", w)
	}
	if *partial {
		findings = Partial(findings)
	}
	for _, f := range findings {
		fmt.Fprintln(stdout, f)
	}
	if len(findings) > 0 {
		return 1
	}
	ok := "OK"
	if *partial {
		ok = "OK (partial: limits no route reaches are not reported)"
	}
	var files []string
	for _, f := range []string{*envoyPath, *faPath, *limitsPath} {
		if f != "" {
			files = append(files, f)
		}
	}
	fmt.Fprintf(stdout, "%s: %s, %s\n", strings.Join(files, ", "), ok, c.Count())
	return 0
}

// Partial keeps the findings that hold when a bootstrap serves only part
// of the limits (lint -partial): all but Unreachable, since a limit that
// this bootstrap's routes do not reach may be another gateway's.
func Partial(findings []Finding) []Finding {
	return slices.DeleteFunc(findings, func(f Finding) bool { return f.Kind == Unreachable })
}

// flagGiven reports whether the command line set flag name.
func flagGiven(cl *cli.CommandLine, name string) bool {
	given := false
	cl.FS.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// lintFiles is CheckPolicies of the files, keeping the limits it loaded so
// that the command can say what they hold. An empty envoyPath or faPath is
// a file not to read.
func lintFiles(envoyPath, faPath, limitsPath string, o config.Options) (*config.Config, []Finding, error) {
	var b *bootstrapv3.Bootstrap
	if envoyPath != "" {
		data, err := os.ReadFile(envoyPath)
		if err != nil {
			return nil, nil, err
		}
		if b, err = ParseBootstrap(data); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", envoyPath, err)
		}
	}
	var fa *forwardauth.Config
	if faPath != "" {
		var err error
		// The server's own parser, so that its errors read as at the
		// server's start.
		if fa, err = forwardauth.Load(faPath); err != nil {
			return nil, nil, err
		}
	}
	c, err := o.Load(limitsPath)
	if err != nil {
		return nil, nil, err
	}
	return c, CheckPolicies(b, fa, c), nil
}
