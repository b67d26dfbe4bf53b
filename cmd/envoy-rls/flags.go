package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// options are the server's settings, from flags and their RLS_ environment
// twins (a flag given on the command line wins).
type options struct {
	configPath      string
	grpcAddr        string
	httpAddr        string
	debugAddr       string
	redisURL        string
	redisCluster    string
	redisUsername   string
	redisPassword   string
	redisTLS        bool
	redisTLSCA      string
	storeTimeout    time.Duration
	failureMode     config.FailureMode
	maxDelay        time.Duration
	logLevel        string
	logFormat       string
	shutdownTimeout time.Duration
	maxKeys         int
}

// envPrefix turns a flag name into its environment twin: -redis-url is
// RLS_REDIS_URL.
func envName(flagName string) string {
	return "RLS_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

type failureModeFlag struct{ m *config.FailureMode }

func (f failureModeFlag) String() string {
	if f.m == nil {
		return ""
	}
	return f.m.String()
}

func (f failureModeFlag) Set(s string) error {
	m, err := config.ParseFailureMode(s)
	if err != nil {
		return err
	}
	*f.m = m
	return nil
}

// emptyMeansSomething lists the flags whose empty value is a setting of its
// own (RLS_DEBUG_ADDR="" turns pprof off); for the others an empty variable
// is as good as unset, as container templates often export them.
var emptyMeansSomething = map[string]bool{
	"debug-addr": true, "redis-url": true, "redis-cluster": true,
	"redis-username": true, "redis-password": true, "redis-tls-ca": true,
}

// parseFlags reads args, then fills every flag not given there from the
// environment (lookupEnv is os.LookupEnv in production).
func parseFlags(args []string, lookupEnv func(string) (string, bool), stderr io.Writer) (*options, error) {
	o := &options{failureMode: config.FailAllow}
	fs := flag.NewFlagSet("envoy-rls", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.configPath, "config", "config/limits.yaml", "limits file, or a directory of *.yaml/*.yml files (one domain per file)")
	fs.StringVar(&o.grpcAddr, "grpc-addr", ":8081", "address of Envoy's RateLimitService v3, gRPC health and reflection")
	fs.StringVar(&o.httpAddr, "http-addr", ":8080", "address of the HTTP endpoints (/healthz, /json, /metrics, /rlconfig)")
	fs.StringVar(&o.debugAddr, "debug-addr", "127.0.0.1:6070", "address of pprof; empty turns it off")
	fs.StringVar(&o.redisURL, "redis-url", "", "redis://[user:pass@]host:port[/db] or rediss:// (empty: the embedded in-process store)")
	fs.StringVar(&o.redisCluster, "redis-cluster", "", "comma-separated host:port seeds of a Redis Cluster")
	fs.StringVar(&o.redisUsername, "redis-username", "", "Redis username where the URL has none")
	fs.StringVar(&o.redisPassword, "redis-password", "", "Redis password where the URL has none")
	fs.BoolVar(&o.redisTLS, "redis-tls", false, "TLS to a Redis Cluster")
	fs.StringVar(&o.redisTLSCA, "redis-tls-ca", "", "CA file for Redis TLS (default: system roots)")
	fs.DurationVar(&o.storeTimeout, "store-timeout", 50*time.Millisecond, "longest a store call may take")
	fs.Var(failureModeFlag{&o.failureMode}, "failure-mode", "when the store fails: allow (fail open), deny (fail closed), local (this instance's embedded store) or error (gRPC UNAVAILABLE)")
	fs.DurationVar(&o.maxDelay, "max-delay", config.DefaultMaxDelay, "longest wait a leaky_bucket may impose; a file whose worst wait is longer is refused")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&o.logFormat, "log-format", "json", "json or console")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 10*time.Second, "longest the drain of requests in flight may take on SIGTERM")
	fs.IntVar(&o.maxKeys, "max-keys", 1_000_000, "most keys the embedded store holds (expired, then least recently used, are evicted)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (subcommands: check-config)", fs.Arg(0))
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] {
			return
		}
		if v, ok := lookupEnv(envName(f.Name)); ok && (v != "" || emptyMeansSomething[f.Name]) {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", envName(f.Name), err))
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	switch {
	case o.redisURL != "" && o.redisCluster != "":
		return nil, errors.New("-redis-url and -redis-cluster are both set: choose one")
	case o.storeTimeout <= 0:
		return nil, errors.New("-store-timeout must be positive")
	case o.logFormat != "json" && o.logFormat != "console":
		return nil, fmt.Errorf("-log-format %q: want json or console", o.logFormat)
	case o.maxKeys <= 0:
		return nil, errors.New("-max-keys must be positive")
	case o.maxDelay <= 0:
		return nil, errors.New("-max-delay must be positive")
	}
	return o, nil
}

// loadOptions are what loading the limits file depends on.
func (o *options) loadOptions() config.Options {
	return config.Options{MaxDelay: o.maxDelay}
}
