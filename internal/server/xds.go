package server

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/envoy-rls/envoy-rls/internal/cli"
	"github.com/envoy-rls/envoy-rls/internal/xds"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// xdsOptions are the flags of the xDS client (-xds-*): with -xds-server
// set, the limits come from that server (package xds) instead of -config.
// Between them they cover envoyproxy/ratelimit's CONFIG_GRPC_XDS_* and
// XDS_CLIENT_* variables, FORCE_START_WITHOUT_INITIAL_CONFIG and
// HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED.
type xdsOptions struct {
	server                                string
	nodeID                                string
	nodeMetadata, headers                 keyValues
	tls                                   bool
	tlsCert, tlsKey, tlsCA, tlsServerName string
	retryInitial, retryMax                time.Duration
	retryFactor                           float64
	retryJitter                           bool
	maxMessageBytes                       int
	forceStart, healthyNeedsConfig        bool
}

// xdsFlags defines the xDS client's flags.
func xdsFlags(fs *flag.FlagSet, x *xdsOptions) {
	fs.StringVar(&x.server, "xds-server", "", "host:port of an xDS server (ADS, state of the world) to take the limits from, as RateLimitConfig resources (Envoy Gateway's), instead of -config")
	fs.StringVar(&x.nodeID, "xds-node-id", "default", "node id given to the xDS server, which keeps a snapshot per node id (Envoy Gateway's is envoy-ratelimit)")
	fs.Var(&x.nodeMetadata, "xds-node-metadata", "metadata of the node given to the xDS server: key=value pairs, comma-separated (key:value too)")
	fs.Var(&x.headers, "xds-headers", "gRPC headers sent on the xDS stream: key=value pairs, comma-separated (key:value too)")
	fs.BoolVar(&x.tls, "xds-tls", false, "reach the xDS server over TLS")
	fs.StringVar(&x.tlsCert, "xds-tls-cert", "", "PEM client certificate (chain) for an xDS server that requires mutual TLS, with -xds-tls-key; read anew at every connection")
	fs.StringVar(&x.tlsKey, "xds-tls-key", "", "PEM private key of -xds-tls-cert")
	fs.StringVar(&x.tlsCA, "xds-tls-ca", "", "PEM CAs that may sign the xDS server's certificate (empty: the system's roots)")
	fs.StringVar(&x.tlsServerName, "xds-tls-server-name", "", "name the xDS server's certificate must carry (empty: the host of -xds-server)")
	fs.DurationVar(&x.retryInitial, "xds-retry-initial", xds.DefaultBackoff.Initial, "wait before the first new attempt once the xDS server cannot be reached, refuses the connection or ends the stream")
	fs.DurationVar(&x.retryMax, "xds-retry-max", xds.DefaultBackoff.Max, "longest wait between attempts to reach the xDS server")
	fs.Float64Var(&x.retryFactor, "xds-retry-factor", xds.DefaultBackoff.Factor, "each wait is -xds-retry-initial times this to the number of failures before it, up to -xds-retry-max (1 or less: always -xds-retry-initial)")
	fs.BoolVar(&x.retryJitter, "xds-retry-jitter", xds.DefaultBackoff.Jitter, "draw each wait at random between -xds-retry-initial and its figure, so that instances do not retry in step")
	fs.IntVar(&x.maxMessageBytes, "xds-max-message-bytes", 0, "largest snapshot read from the xDS server (0: gRPC's 4 MiB)")
	fs.BoolVar(&x.forceStart, "xds-force-start", false, "serve, and report healthy, before the first snapshot has arrived, answering UNAVAILABLE until then (Envoy's failure mode decides); off, the service does not answer until a snapshot is applied")
	fs.BoolVar(&x.healthyNeedsConfig, "xds-healthy-needs-config", false, "report /healthz and gRPC health as not serving while the snapshot in force has no domain (none has arrived yet, or it is empty)")
}

// check reports xDS flags that do not go together. fs holds them, for the
// defaults; configPath is -config, which the limits cannot also come from.
func (x *xdsOptions) check(fs *flag.FlagSet, configPath string) error {
	if x.server == "" {
		var set []string
		fs.VisitAll(func(f *flag.Flag) {
			if strings.HasPrefix(f.Name, "xds-") && f.Name != "xds-server" && f.Value.String() != f.DefValue {
				set = append(set, "-"+f.Name)
			}
		})
		if len(set) > 0 {
			return fmt.Errorf("%s: needs -xds-server, the xDS server to take the limits from", strings.Join(set, ", "))
		}
		return nil
	}
	switch {
	case configPath != fs.Lookup("config").DefValue:
		return errors.New("-config and -xds-server are both set: the limits come from one of them")
	case (x.tlsCert == "") != (x.tlsKey == ""):
		return errors.New("-xds-tls-cert and -xds-tls-key go together: set both or neither")
	case !x.tls && (x.tlsCert != "" || x.tlsCA != "" || x.tlsServerName != ""):
		return errors.New("-xds-tls-cert, -xds-tls-key, -xds-tls-ca and -xds-tls-server-name need -xds-tls")
	case x.retryInitial <= 0:
		return errors.New("-xds-retry-initial must be positive")
	case x.retryMax < x.retryInitial:
		return errors.New("-xds-retry-max must be at least -xds-retry-initial")
	case !(x.retryFactor > 0) || math.IsInf(x.retryFactor, 0):
		return errors.New("-xds-retry-factor must be a positive number")
	case x.maxMessageBytes < 0:
		return errors.New("-xds-max-message-bytes must not be negative (0 is gRPC's 4 MiB)")
	}
	return nil
}

// clientOptions are the xds.Options the flags say, but for the callbacks.
func (x *xdsOptions) clientOptions(limits config.Options) xds.Options {
	o := xds.Options{
		Server:          x.server,
		NodeID:          x.nodeID,
		NodeMetadata:    x.nodeMetadata,
		Headers:         x.headers,
		Backoff:         xds.Backoff{Initial: x.retryInitial, Max: x.retryMax, Factor: x.retryFactor, Jitter: x.retryJitter},
		MaxMessageBytes: x.maxMessageBytes,
		Limits:          limits,
	}
	if x.tls {
		o.TLS = &xds.TLS{CertFile: x.tlsCert, KeyFile: x.tlsKey, CAFile: x.tlsCA, ServerName: x.tlsServerName}
	}
	return o
}

// keyValues is a flag of comma-separated key=value pairs. key:value is
// read the same, as envoyproxy/ratelimit's variables take it for headers
// (and document it for node metadata): the key ends at the first = or :,
// which neither a header name nor a sensible metadata key holds.
type keyValues map[string]string

func (kv *keyValues) String() string {
	if kv == nil || len(*kv) == 0 {
		return ""
	}
	pairs := make([]string, 0, len(*kv))
	for k, v := range *kv {
		pairs = append(pairs, k+"="+v)
	}
	slices.Sort(pairs)
	return strings.Join(pairs, ",")
}

func (kv *keyValues) Set(s string) error {
	m := keyValues{}
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		i := strings.IndexAny(item, "=:")
		if i <= 0 {
			return fmt.Errorf("%q is no key=value pair", item)
		}
		m[strings.TrimSpace(item[:i])] = strings.TrimSpace(item[i+1:])
	}
	*kv = m
	return nil
}

func (kv *keyValues) Kind() cli.ValueKind {
	return cli.ValueKind{Word: "pairs", Want: "comma-separated key=value pairs, such as a=1,b=2"}
}
