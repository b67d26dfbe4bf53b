package server

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/envoy-rls/envoy-rls/internal/cli"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/health"

	"github.com/envoy-rls/envoy-rls/internal/metrics"
	"github.com/envoy-rls/envoy-rls/internal/xds"
	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
	"github.com/envoy-rls/envoy-rls/pkg/rls"
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

// xdsSource is the config's source when -xds-server is set: the xDS
// client, run from before the listeners open (the first snapshot may be
// what the service waits for), and, once the server runs, the service
// its snapshots are swapped into, the health they decide and the metrics
// that count them.
type xdsSource struct {
	o      *xdsOptions
	client *xds.Client
	stop   context.CancelFunc
	done   chan struct{}
	// first is closed when the first snapshot is applied.
	first     chan struct{}
	firstOnce sync.Once

	mu  sync.Mutex
	cfg *config.Config // the last snapshot applied; nil before the first
	// What serving attached; nil before.
	svc *rls.Service
	hs  *health.Server
	m   *metrics.Metrics
	log *zap.Logger
	// storeRefused reports a Redis refusing the settings, which gRPC
	// health reports too (health.go); nil before serving.
	storeRefused func() bool
	// loads are the snapshots applied (true) and refused (false) before
	// the metrics were there, for them to count.
	loads []load
}

type load struct {
	ok bool
	at time.Time
}

// startXDS starts the xDS client. The service starts with no config (every
// call UNAVAILABLE), and
// takes the first snapshot's once it is applied: before the listeners
// open without -xds-force-start (startConfig.waitFirst), whenever it
// comes with it.
func startXDS(o *Options, log *zap.Logger) (*startConfig, error) {
	s := &xdsSource{o: &o.xds, done: make(chan struct{}), first: make(chan struct{}), log: log}
	co := o.xds.clientOptions(o.loadOptions())
	co.Apply, co.Refused, co.Logger = s.apply, s.refused, log
	c, err := xds.New(co)
	if err != nil {
		return nil, err
	}
	s.client = c
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	go func() { defer close(s.done); c.Run(ctx) }()
	log.Info("taking the limits from xDS", zap.String("server", o.xds.server), zap.String("node_id", o.xds.nodeID),
		zap.Bool("tls", o.xds.tls), zap.Bool("client_certificate", o.xds.tlsCert != ""), zap.Bool("force_start", o.xds.forceStart))
	// No config until the first snapshot: the service answers UNAVAILABLE
	// until then (with -xds-force-start), and Envoy's failure mode decides.
	return &startConfig{xds: s}, nil
}

// apply is the client's Apply: the snapshot's config swapped in, counted,
// and health updated.
func (s *xdsSource) apply(_ string, c *config.Config) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg = c
	if s.svc != nil {
		s.svc.SetIndex(descriptors.NewIndex(c))
	}
	s.count(true)
	if s.m != nil { // before, serving reports it
		configInForce(c, s.o.server, s.m, s.log, false)
	}
	s.setHealth()
	s.firstOnce.Do(func() { close(s.first) })
}

// refused is the client's Refused: counted as a refused reload.
func (s *xdsSource) refused(string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.count(false)
}

// count records a load in the metrics, or for them (s.mu held).
func (s *xdsSource) count(ok bool) {
	if s.m == nil {
		s.loads = append(s.loads, load{ok, time.Now()})
		return
	}
	s.m.Reload(ok, time.Now())
}

// healthy reports whether the config lets the service report healthy:
// always, unless -xds-healthy-needs-config asks for a domain in force.
func (s *xdsSource) healthy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.healthyLocked()
}

func (s *xdsSource) healthyLocked() bool {
	return !s.o.healthyNeedsConfig || s.cfg != nil && len(s.cfg.Domains) > 0
}

// healthChanged gives gRPC health the say of something besides the config
// (a Redis refusing the settings).
func (s *xdsSource) healthChanged() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setHealth()
}

// setHealth gives gRPC health the config's say (s.mu held). Once the
// server shuts down, the health server ignores it.
func (s *xdsSource) setHealth() {
	if s.hs == nil {
		return
	}
	setGRPCHealth(s.hs, s.healthyLocked() && (s.storeRefused == nil || !s.storeRefused()))
}

// stats are the client's counts, for the metrics.
func (s *xdsSource) stats() metrics.XDSStats {
	st := s.client.Stats()
	return metrics.XDSStats{Version: st.Version, Applied: st.Applied, Refused: st.Refused, Failures: st.Failures, Connected: st.Connected}
}

// close stops the client and waits for it.
func (s *xdsSource) close() {
	s.stop()
	<-s.done
}

// waitFirst holds the start, without -xds-force-start, until the first
// snapshot is applied, which the service then starts with: it answers
// only with limits, as from a file. It reports false if ctx ends first.
func (s *startConfig) waitFirst(ctx context.Context, log *zap.Logger) bool {
	if s.xds == nil || s.xds.o.forceStart {
		return true
	}
	log.Info("waiting for the first xDS snapshot before serving (-xds-force-start serves without one)")
	select {
	case <-s.xds.first:
	case <-ctx.Done():
		return false
	}
	s.xds.mu.Lock()
	s.cfg = s.xds.cfg
	s.xds.mu.Unlock()
	return true
}

// serving hands the running service, its health server and its metrics
// to the xDS client's snapshots: a snapshot applied since the service
// was built is swapped in, the loads so far are counted, and gRPC health
// follows -xds-healthy-needs-config. Nothing to do for a file.
func (s *startConfig) serving(svc *rls.Service, hs *health.Server, m *metrics.Metrics, storeRefused func() bool) {
	x := s.xds
	if x == nil {
		return
	}
	m.Registry.MustRegister(metrics.NewXDSCollector(x.stats))
	x.mu.Lock()
	defer x.mu.Unlock()
	x.svc, x.hs, x.m, x.storeRefused = svc, hs, m, storeRefused
	if x.cfg != nil && x.cfg != s.cfg {
		svc.SetIndex(descriptors.NewIndex(x.cfg))
	}
	for _, l := range x.loads {
		m.Reload(l.ok, l.at)
	}
	if x.cfg != nil {
		configInForce(x.cfg, x.o.server, m, x.log, false)
	}
	x.loads = nil
	x.setHealth()
}
