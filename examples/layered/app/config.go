package app

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/client"
)

// Config is the example's command line.
type Config struct {
	// Listen is the HTTP address; docker-compose.yml's app listens where
	// config/envoy.yaml's app cluster dials.
	Listen string
	// RLS is envoy-rls's gRPC address: compose's envoy-rls service on its
	// default -grpc-addr, the one Envoy dials.
	RLS string
	// FailureMode decides a request while envoy-rls cannot answer.
	FailureMode client.FailureMode
	// Timeout bounds each call to envoy-rls.
	Timeout time.Duration
	// UsersFile lists the accepted users; empty: DemoUsers.
	UsersFile string
}

// failureModes are -failure-mode's values.
var failureModes = map[string]client.FailureMode{"open": client.FailOpen, "closed": client.FailClosed}

// ParseFlags reads the command line; usage and errors go to stderr, and
// flag.ErrHelp is returned for -h.
func ParseFlags(args []string, stderr io.Writer) (Config, error) {
	fs := flag.NewFlagSet("layered", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c Config
	var mode string
	fs.StringVar(&c.Listen, "listen", ":5678", "HTTP address to serve on")
	fs.StringVar(&c.RLS, "rls", "envoy-rls:8081", "envoy-rls's gRPC address (host:port)")
	fs.StringVar(&mode, "failure-mode", "open", "while envoy-rls cannot answer: open (serve the request) or closed (429)")
	fs.DurationVar(&c.Timeout, "timeout", 100*time.Millisecond, "deadline of each call to envoy-rls")
	fs.StringVar(&c.UsersFile, "users", "", "file of user names, one a line (default: the demo users alice, bob and carol)")
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	m, ok := failureModes[mode]
	if !ok {
		return Config{}, fmt.Errorf("-failure-mode %q: want open or closed", mode)
	}
	c.FailureMode = m
	if c.Timeout <= 0 {
		return Config{}, fmt.Errorf("-timeout %s: want a positive duration", c.Timeout)
	}
	if c.RLS == "" {
		return Config{}, errors.New("-rls is empty: give envoy-rls's gRPC address")
	}
	return c, nil
}

// Users is the users file's users, or DemoUsers without one.
func (c Config) Users() (Users, error) {
	if c.UsersFile == "" {
		return DemoUsers(), nil
	}
	return LoadUsers(c.UsersFile)
}
