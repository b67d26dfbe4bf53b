package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/envoy-rls/envoy-rls/internal/cli"
	"github.com/envoy-rls/envoy-rls/internal/xds"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

const checkConfigArgs = "[-max-delay DUR] [-xds] PATH"

// checkConfig loads a limits file or directory the way the server does.
func checkConfig(args []string, _ func(string) (string, bool), stdout, stderr io.Writer) int {
	cl := cli.New("envoy-rls check-config", checkConfigArgs, `Loads PATH, a limits file or a directory of them, as the server would and
prints what it holds, and on stderr a warning for what loads but is most
likely not meant (an algorithm that a modifier's fields make misleading);
exit 0 when it loads, else the error and exit 1.
A limit is a rate_limit body: each entry of a rate_limits list is one, and
unlimited ones count (and are also counted apart).
`+"\n"+checkXDSAbout)
	maxDelay := cl.FS.Duration("max-delay", config.DefaultMaxDelay, "the server's -max-delay")
	xdsDump := cl.FS.Bool("xds", false, "PATH is an xDS snapshot (RateLimitConfig resources in protobuf JSON or YAML) rather than limits files")
	rest, err := cl.ParseArgs(args)
	if err == nil && len(rest) != 1 {
		err = fmt.Errorf("want one PATH, got %d arguments", len(rest))
	}
	if err != nil {
		return cl.Failed(err, stdout, stderr)
	}
	if *xdsDump {
		return checkXDSDump(rest[0], config.Options{MaxDelay: *maxDelay}, stdout, stderr)
	}
	c, err := config.Options{MaxDelay: *maxDelay}.Load(rest[0])
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: OK, %s\n", rest[0], c.Count())
	writeModifiers(stdout, c, time.Now())
	for _, w := range c.Warnings() {
		fmt.Fprintln(stderr, "warning:", w)
	}
	return 0
}

const checkXDSAbout = `With -xds, PATH is an xDS snapshot written out as text: a
RateLimitConfig, or a list of them, in protobuf JSON or the same in YAML
(as Envoy Gateway dumps what it serves). It is checked as the server checks
a snapshot before it ACKs it, with envoy-rls's own defaults.
`

// checkXDSDump is check-config -xds: PATH read with xds.ParseDump and
// checked as a snapshot is.
func checkXDSDump(path string, o config.Options, stdout, stderr io.Writer) int {
	data, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	msgs, err := xds.ParseDump(data)
	if err == nil {
		var c *config.Config
		if c, err = xds.NewConfig(o, msgs); err == nil {
			fmt.Fprintf(stdout, "%s: OK, %d resources, %s\n", path, len(msgs), c.Count())
			return 0
		}
	}
	fmt.Fprintf(stderr, "%s: %v\n", path, err)
	return 1
}
