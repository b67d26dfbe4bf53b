package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/httpapi"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
	"github.com/envoy-rls/envoy-rls/pkg/metrics"
	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

const explainArgs = "[flags] DOMAIN key=value [key=value...]"

const explainAbout = `Loads the limits as the server does and tells, for one descriptor of DOMAIN,
which node of the config each entry matches (exact value, wildcard, bare
key, none), the limits that apply, the store key of each and its current
state, read with a peek (nothing is consumed). Without -redis-url or
-redis-cluster the store is this process's own, so the state is empty.
The server's RLS_* environment variables apply, so that run next to the
server it reads the same config and keys. Flags may come before or after
the arguments; after -- everything is an entry. Exit 0 when explained, 1
when the config does not load or the store cannot be read, 2 on a usage
error.
`

// explainCommand is `envoy-rls explain`.
func explainCommand(args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int {
	o := &options{failureMode: config.FailAllow}
	var asJSON bool
	cl := newCommandLine("envoy-rls explain", explainArgs, explainAbout)
	cl.env = true
	cl.noEnv = map[string]bool{"json": true} // the server has no -json
	fs := cl.fs
	// The flags that change what a descriptor matches, its key, or where
	// its state is: the server's names, defaults and environment twins
	// (but a second for -store-timeout: a person is waiting, not Envoy).
	fs.StringVar(&o.configPath, "config", "config/limits.yaml", "limits file, or a directory of *.yaml/*.yml files")
	fs.StringVar(&o.redisURL, "redis-url", "", "redis://[user:pass@]host:port[/db] or rediss:// to read the shared state (empty: an embedded store, empty state)")
	redisFlags(fs, o)
	fs.StringVar(&o.redisKeyPrefix, "redis-key-prefix", descriptors.KeyPrefix, "the server's -redis-key-prefix")
	fs.BoolVar(&o.hashValues, "hash-values", false, "the server's -hash-values")
	fs.DurationVar(&o.storeTimeout, "store-timeout", time.Second, "longest the store read may take")
	limitDefaultFlags(fs, o)
	answerFlags(fs, &o.answers)
	fs.Var(failureModeFlag{&o.failureMode}, "failure-mode", "the server's -failure-mode (shown for limits without their own)")
	fs.DurationVar(&o.maxDelay, "max-delay", config.DefaultMaxDelay, "the server's -max-delay")
	fs.BoolVar(&o.shadowMode, "shadow-mode", false, "the server's -shadow-mode")
	fs.BoolVar(&asJSON, "json", false, "print the explanation as JSON")
	rest, err := cl.parse(args, lookupEnv)
	var domain string
	var entries []descriptors.Entry
	if err == nil {
		domain, entries, err = explainRequest(o, rest)
	}
	if err != nil {
		return cl.failed(err, stdout, stderr)
	}

	cfg, err := o.loadOptions().Load(o.configPath)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	store, err := openStore(o, metrics.New(), zap.NewNop())
	if err != nil {
		fmt.Fprintln(stderr, "envoy-rls explain:", err)
		return 1
	}
	defer store.close() //nolint:errcheck // closing at exit
	svc, err := rls.New(descriptors.NewIndex(cfg), o.serviceOptions(store))
	if err != nil {
		fmt.Fprintln(stderr, "envoy-rls explain:", err)
		return 1
	}
	ex, err := svc.Explain(context.Background(), domain, entries)
	if err != nil {
		fmt.Fprintln(stderr, "envoy-rls explain:", err)
		return 2
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(ex) //nolint:errcheck // nothing to do about a closed stdout
	} else {
		fmt.Fprintf(stdout, "store:      %s\n", storeDescription(o))
		ex.WriteText(stdout) //nolint:errcheck // nothing to do about a closed stdout
	}
	for _, l := range ex.Limits {
		if l.State != nil && l.State.Error != "" {
			return 1
		}
	}
	return 0
}

// explainRequest checks explain's flags and reads its arguments: the
// domain and the descriptor's entries.
func explainRequest(o *options, args []string) (string, []descriptors.Entry, error) {
	if len(args) < 2 {
		return "", nil, fmt.Errorf("want DOMAIN and at least one key=value, got %d arguments", len(args))
	}
	if err := o.checkRedis(); err != nil {
		return "", nil, err
	}
	if o.storeTimeout <= 0 {
		return "", nil, errors.New("-store-timeout must be positive")
	}
	if err := descriptors.CheckKeyPrefix(o.redisKeyPrefix); err != nil {
		return "", nil, fmt.Errorf("-redis-key-prefix: %w", err)
	}
	var entries []descriptors.Entry
	for _, a := range args[1:] {
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" {
			return "", nil, fmt.Errorf("entry %q: want key=value", a)
		}
		entries = append(entries, descriptors.Entry{Key: k, Value: v})
	}
	return args[0], entries, nil
}

// storeDescription names the store explain reads, without its password.
func storeDescription(o *options) string {
	switch {
	case o.redisCluster != "":
		return "Redis Cluster " + o.redisCluster
	case o.redisSentinel != "":
		return "Redis master " + o.redisSentinelMaster + " of Sentinels " + o.redisSentinel
	case o.redisURL != "":
		u, err := url.Parse(o.redisURL)
		if err != nil {
			return "Redis"
		}
		return "Redis " + u.Redacted()
	}
	return "embedded (this command's own: the state is empty; pass -redis-url to read the shared state)"
}

// explainer is what serves GET /explain: the service, or nil with
// -explain-endpoint=false.
func explainer(o *options, svc *rls.Service) httpapi.Explainer {
	if !o.explainEndpoint {
		return nil
	}
	return svc
}
