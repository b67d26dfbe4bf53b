package server

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"strings"
	"time"

	"go.uber.org/zap/zapcore"

	"github.com/envoy-rls/envoy-rls/internal/cli"
	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
	"github.com/envoy-rls/envoy-rls/pkg/rlqs"
)

// options are the server's settings, from flags and their RLS_ environment
// twins (a flag given on the command line wins).
type Options struct {
	configPath            string
	grpcAddr              string
	httpAddr              string
	debugAddr             string
	redisURL              string
	redisCluster          string
	redisSentinel         string
	redisSentinelMaster   string
	redisSentinelPassword string
	redisUsername         string
	redisPassword         string
	// Secrets by file (secrets.go).
	redisPasswordFile         string
	redisSentinelPasswordFile string
	redisTLS                  bool
	redisTLSCA                string
	redisTLSCert              string
	redisTLSKey               string
	redisTLSSkipHostname      bool
	redisSentinelUsername     string
	storeTimeout              time.Duration
	failureMode               config.FailureMode
	// What a limit that does not say gets (config.Options).
	defaultAlgorithm limits.Algorithm
	countRefused     bool
	mergeDomains     bool
	allowEmpty       bool
	// healthyNeedsConfig: not healthy while the config in force has no
	// domain (health.go).
	healthyNeedsConfig bool
	maxDelay           time.Duration
	logLevel           string
	logFormat          string
	shutdownTimeout    time.Duration
	maxKeys            int

	// gRPC TLS and connection lifetime.
	grpcTLSCert          string
	grpcTLSKey           string
	grpcTLSClientCA      string
	grpcTLSClientSAN     string
	grpcMaxConnectionAge time.Duration
	// Bounds on what clients can make the service hold (flagbounds.go,
	// package grpcguard).
	grpcMaxConnectionIdle time.Duration
	grpcMaxMessageBytes   int
	grpcMaxStreams        int
	grpcMaxResets         int
	maxInFlight           int
	maxInFlightPerConn    int
	maxOpenStreams        int
	grpcMaxConnections    int
	httpMaxConnections    int
	httpIdleTimeout       time.Duration
	httpReadTimeout       time.Duration
	// Redis keys and connections.
	redisKeyPrefix string
	redisPoolSize  int
	// What callers may do.
	shadowMode   bool
	jsonEndpoint bool
	negativeHits bool
	jsonRefunds  bool
	hashValues   bool
	// Headers of the service's own, and /explain.
	responseHeaders bool
	json429Body     bool
	explainEndpoint bool
	grpcReflection  bool
	// rlqs serves RateLimitQuotaService on -grpc-addr (rlqs.go).
	rlqs               bool
	rlqsReportInterval time.Duration
	rlqsAssignmentTTL  time.Duration
	rlqsSilentAfter    time.Duration
	rlqsClient         string
	// rlqsMaxStreamBuckets and rlqsMaxBuckets bound the RLQS buckets held
	// (rlqs.Options.MaxStreamBuckets and MaxBuckets).
	rlqsMaxStreamBuckets, rlqsMaxBuckets int
	// overLimitCache answers hits on keys the store refused locally until
	// the store's reset (pkg/limits/overlimit).
	overLimitCache bool

	// answers: what an answer carries, and in which form (answers.go).
	answers answerOptions
	// stats: envoyproxy/ratelimit's stats (stats.go), and statsd, where
	// they are pushed to (statsd.go).
	stats  statsOptions
	statsd statsdOptions
	// xds: the xDS client, the limits' other source (xds.go).
	xds xdsOptions
	// tracing: OpenTelemetry traces of the calls (tracing.go).
	tracing tracingOptions
	// admin: GET /top, POST /reset and GET /rlqs (admin.go).
	admin adminOptions
	// usage: GET /v1/usage, the tenants' read (usage.go).
	usage usageOptions
	// forwardAuthConfig: GET /v1/forward-auth/{policy} (forwardauth.go).
	forwardAuthConfig string

	// version asks for the version instead of the server.
	version bool
	// release is the build's version, for GET / (SetVersion).
	release string
	// envWarnings are the RLS_ variables that are no flag's twin
	// (NoteEnvironment), logged at the start.
	envWarnings []string
	// fromEnv are the flags the environment set; names, when set, names
	// the variables that set them as the operator wrote them (NameSettings).
	fromEnv func(flag string) bool
	names   func(flag string) string
}

// NameSettings gives the names of the settings the operator wrote, for a
// flag the environment set: the drop-in's (REDIS_AUTH for
// -redis-password), so that what refuses a setting names it as it was
// set. names returns "" for a flag it has no name for.
func (o *Options) NameSettings(names func(flag string) string) { o.names = names }

// setting names what set flag: the variable the operator set (NameSettings),
// else its RLS_ twin when the environment set it, else the flag.
func (o *Options) setting(flag string) string {
	if o.fromEnv == nil || !o.fromEnv(flag) {
		return "-" + flag
	}
	if o.names != nil {
		if n := o.names(flag); n != "" {
			return n
		}
	}
	return cli.EnvName(flag)
}

// NoteEnvironment notes the RLS_ variables of environ (os.Environ's
// entries) that are no flag's twin, for the start to warn about each, with
// the twin it most likely meant.
func (o *Options) NoteEnvironment(environ []string) {
	o.envWarnings = CommandLine(Help{}).UnknownTwins(environ)
}

// WantsVersion reports whether -version asks for the version instead of
// the server.
func (o *Options) WantsVersion() bool { return o.version }

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

type algorithmFlag struct{ a *limits.Algorithm }

func (f algorithmFlag) String() string {
	if f.a == nil {
		return ""
	}
	return f.a.String()
}

func (f algorithmFlag) Set(s string) error {
	a, err := limits.ParseAlgorithm(s)
	if err != nil {
		return err
	}
	*f.a = a
	return nil
}

// kind names the algorithms limits.ParseAlgorithm knows.
func (f algorithmFlag) Kind() cli.ValueKind {
	var names []string
	for a := limits.Algorithm(0); a.Implemented(); a++ {
		names = append(names, a.String())
	}
	return cli.ValueKind{Word: "algorithm", Want: cli.OneOf(names)}
}

// kind names the flag's values in its help line and what a refused value
// should have been: the failure modes config.ParseFailureMode knows, in
// their order, so that a new one needs no edit here.
func (f failureModeFlag) Kind() cli.ValueKind {
	var names []string
	for m := config.FailAllow; ; m++ {
		if _, err := config.ParseFailureMode(m.String()); err != nil {
			break
		}
		names = append(names, m.String())
	}
	return cli.ValueKind{Word: "mode", Want: cli.OneOf(names)}
}

// emptyMeansSomething lists the flags whose empty value is a setting of its
// own (RLS_DEBUG_ADDR="" turns pprof off); for the others an empty variable
// is as good as unset, as container templates often export them.
var emptyMeansSomething = map[string]bool{
	"debug-addr": true, "redis-url": true, "redis-cluster": true,
	"redis-sentinel": true, "redis-sentinel-password": true,
	"redis-username": true, "redis-password": true, "redis-tls-ca": true,
}

// Help is what the server's help says beside its flags: main's part,
// since the commands beside the server are main's to list.
type Help struct {
	// About is the help's text between its usage line and the flags.
	About string
	// Commands names the subcommands, for the error that refuses an
	// argument ("check-config, lint, ...").
	Commands string
}

// CommandLine is the server's command line, its flags unset: the help
// (WriteHelp), the report of a parse error (Failed), and, for the
// drop-in, the flags' defaults, twins and checks.
func CommandLine(h Help) *cli.CommandLine { return serverFlags(&Options{}, h) }

// serverChoices are the string flags that take only some strings.
var serverChoices = map[string]cli.Choice{
	"log-format": {Want: cli.OneOf([]string{"json", "console"}), OK: func(s string) bool { return s == "json" || s == "console" }},
	"log-level": {Want: cli.OneOf([]string{"debug", "info", "warn", "error"}), OK: func(s string) bool {
		_, err := zapcore.ParseLevel(s)
		return err == nil
	}},
	"tracing-protocol": tracingProtocols, // tracing.go
}

// serverFlags defines the server's flags on a new command line that fills
// o, each with its RLS_ twin but -version.
func serverFlags(o *Options, h Help) *cli.CommandLine {
	o.failureMode = config.FailAllow // -failure-mode's default: fs.Var takes it from the value
	cl := cli.New("envoy-rls", "[flags]", h.About)
	cl.Env = true
	cl.NoEnv = map[string]bool{"version": true}
	cl.EmptyMeansSomething = emptyMeansSomething
	cl.Choices = serverChoices
	fs := cl.FS
	fs.StringVar(&o.configPath, "config", "config/limits.yaml", "limits file, or a directory of *.yaml/*.yml files (one domain per file)")
	fs.StringVar(&o.grpcAddr, "grpc-addr", ":8081", "address of Envoy's RateLimitService v3, gRPC health and reflection (unix:PATH for a unix socket)")
	fs.StringVar(&o.httpAddr, "http-addr", ":8080", "address of the HTTP endpoints (/healthz, /json, /metrics, /rlconfig)")
	fs.StringVar(&o.debugAddr, "debug-addr", "127.0.0.1:6070", "address of pprof; empty turns it off")
	fs.StringVar(&o.redisURL, "redis-url", "", "redis://[user:pass@]host:port[/db], rediss:// for TLS, or host:port (empty: the embedded in-process store)")
	redisFlags(fs, o)
	fs.DurationVar(&o.storeTimeout, "store-timeout", 50*time.Millisecond, "longest a store call may take")
	fs.Var(failureModeFlag{&o.failureMode}, "failure-mode", "when the store fails: allow (fail open), deny (fail closed), local (this instance's embedded store) or error (gRPC UNAVAILABLE)")
	limitDefaultFlags(fs, o)
	answerFlags(fs, &o.answers)
	statsFlags(fs, &o.stats)
	statsdFlags(fs, &o.statsd)
	xdsFlags(fs, &o.xds)
	fs.BoolVar(&o.healthyNeedsConfig, "healthy-needs-config", false, "report /healthz and gRPC health as not serving while the config in force has no domain (an empty -config directory, or no xDS snapshot with one), as envoyproxy/ratelimit's HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED")
	tracingFlags(fs, &o.tracing)
	adminFlags(fs, &o.admin)
	usageFlags(fs, &o.usage)
	forwardAuthFlags(fs, &o.forwardAuthConfig)
	fs.DurationVar(&o.maxDelay, "max-delay", config.DefaultMaxDelay, "longest wait a leaky_bucket may impose; a file whose worst wait is longer is refused")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&o.logFormat, "log-format", "json", "json or console")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 10*time.Second, "longest the drain of requests in flight may take on SIGTERM")
	fs.IntVar(&o.maxKeys, "max-keys", 1_000_000, "most keys the embedded store holds (expired, then least recently used, are evicted)")
	fs.StringVar(&o.grpcTLSCert, "grpc-tls-cert", "", "PEM certificate (chain) of the gRPC server: serve TLS (with -grpc-tls-key; reread when the files change)")
	fs.StringVar(&o.grpcTLSKey, "grpc-tls-key", "", "PEM private key of -grpc-tls-cert")
	fs.StringVar(&o.grpcTLSClientCA, "grpc-tls-client-ca", "", "PEM CAs of gRPC clients: require a client certificate they signed (mutual TLS)")
	fs.StringVar(&o.grpcTLSClientSAN, "grpc-tls-client-san", "", "with -grpc-tls-client-ca, accept only client certificates that name this DNS name or IP address")
	fs.DurationVar(&o.grpcMaxConnectionAge, "grpc-max-connection-age", 0, "close a gRPC connection after this long (±10%), so that clients reconnect and spread over new replicas; calls in flight get -shutdown-timeout to finish; 0: never")
	boundFlags(fs, o) // flagbounds.go
	fs.StringVar(&o.redisKeyPrefix, "redis-key-prefix", descriptors.KeyPrefix, "start of every store key (no { or }); instances that share counters must use the same one")
	fs.IntVar(&o.redisPoolSize, "redis-pool-size", 0, "Redis connections per node (0: go-redis's default, 10 per CPU)")
	fs.BoolVar(&o.shadowMode, "shadow-mode", false, "report every OVER_LIMIT as OK and count it as shadow_over_limit (a dry run of the limits)")
	fs.BoolVar(&o.jsonEndpoint, "json-endpoint", true, "serve POST /json on -http-addr (false: 404)")
	fs.BoolVar(&o.negativeHits, "negative-hits", true, "accept descriptors with is_negative_hits (refunds); false answers InvalidArgument")
	fs.BoolVar(&o.jsonRefunds, "json-negative-hits", false, "accept refunds (is_negative_hits) on POST /json too; off, they get 400, since anything that reaches the HTTP port could refund another client's hits")
	fs.BoolVar(&o.hashValues, "hash-values", false, "key counters by the SHA-256 of each descriptor value, so that Redis never holds the values")
	fs.BoolVar(&o.responseHeaders, "response-headers", false, "add RateLimit-Policy and RateLimit (IETF draft) to every answer's response_headers_to_add, and Retry-After on OVER_LIMIT")
	fs.BoolVar(&o.json429Body, "json-429-body", false, "give OVER_LIMIT answers a JSON raw_body and a content-type: application/json header")
	fs.BoolVar(&o.explainEndpoint, "explain-endpoint", true, "serve GET /explain on -http-addr (false: 404)")
	fs.BoolVar(&o.grpcReflection, "grpc-reflection", true, "serve gRPC server reflection on -grpc-addr (the services' schemas, for grpcurl); false leaves it out")
	fs.BoolVar(&o.rlqs, "rlqs", true, "serve envoy.service.rate_limit_quota.v3 (RLQS) on -grpc-addr: each limit divided among the Envoys that report it, on every instance sharing Redis (within this instance on the embedded store); false leaves it out")
	fs.DurationVar(&o.rlqsReportInterval, "rlqs-report-interval", 5*time.Second, "how often Envoys are assumed to send RLQS reports (Envoy 1.40: every 5s); demands expire after three, assignments last more than two")
	fs.DurationVar(&o.rlqsAssignmentTTL, "rlqs-assignment-ttl", 0, "TTL of an RLQS token bucket assignment, in whole seconds, raised to more than two -rlqs-report-interval (0: three intervals)")
	fs.StringVar(&o.rlqsClient, "rlqs-client", "identity", "what one client of an RLQS division is: identity (the streams of one verified TLS client certificate, by its first URI, DNS or IP name, share one client's share; without one, each stream is a client), address (as identity, else the streams of one peer IP address share) or stream (each stream a client)")
	fs.DurationVar(&o.rlqsSilentAfter, "rlqs-silent-after", 0, "close an RLQS stream that sends no report for this long, at least two -rlqs-report-interval (0: three intervals); apart from it, while every place of -max-open-streams is taken, a new stream closes the longest-silent RLQS stream silent for two intervals")
	fs.IntVar(&o.rlqsMaxStreamBuckets, "rlqs-max-buckets-per-stream", rlqs.DefaultMaxStreamBuckets, "most RLQS buckets one Envoy's stream holds; a bucket reported past it is answered with its limit's whole rate, undivided and kept nowhere, and counted in rls_rlqs_buckets_over_bound_total{bound=\"stream\"}")
	fs.IntVar(&o.rlqsMaxBuckets, "rlqs-max-buckets", rlqs.DefaultMaxBuckets, "most RLQS buckets all streams hold together, answered past it as past -rlqs-max-buckets-per-stream and counted with bound=\"instance\"")
	fs.BoolVar(&o.overLimitCache, "over-limit-cache", true, "with Redis, refuse a key Redis refused locally until the reset Redis gave (cost-1 hits of limits that are not count_refused, or are fixed windows, not leaky_bucket, not one of several on a descriptor); peeks and refunds always ask Redis")
	fs.BoolVar(&o.version, "version", false, "print the version, and the Go and go-control-plane versions, and exit (no environment twin)")
	return cl
}

// parseFlags is ParseFlags with no help to give.
func parseFlags(args []string, lookupEnv func(string) (string, bool)) (*Options, error) {
	return ParseFlags(args, lookupEnv, Help{})
}

// ParseFlags reads args, then fills every flag not given there from the
// environment (lookupEnv is os.LookupEnv in production), and checks the
// options. It returns flag.ErrHelp for -h, and the options unchecked and
// without the environment for -version (WantsVersion), which must answer
// whatever else is wrong.
func ParseFlags(args []string, lookupEnv func(string) (string, bool), h Help) (*Options, error) {
	o := &Options{}
	cl := serverFlags(o, h)
	rest, err := cl.ParseArgs(args)
	if err != nil {
		return nil, err
	}
	if o.version {
		return o, nil
	}
	if len(rest) > 0 {
		return nil, fmt.Errorf("unexpected argument %q (commands: %s)", rest[0], h.Commands)
	}
	if err := cl.FillEnv(lookupEnv); err != nil {
		return nil, err
	}
	o.fromEnv = cl.FromEnv
	if err := o.check(cl.FS); err != nil {
		return nil, err
	}
	o.xds.healthyNeedsConfig = o.xds.healthyNeedsConfig || o.healthyNeedsConfig
	return o, nil
}

// check reports options that are out of range or do not go together
// (fs holds the flags, for their defaults), and reads the secrets given
// by file.
func (o *Options) check(fs *flag.FlagSet) error {
	if err := o.checkRedis(); err != nil {
		return err
	}
	switch {
	case o.storeTimeout <= 0:
		return errors.New("-store-timeout must be positive")
	case o.maxKeys <= 0:
		return errors.New("-max-keys must be positive")
	case o.maxDelay <= 0:
		return errors.New("-max-delay must be positive")
	case (o.grpcTLSCert == "") != (o.grpcTLSKey == ""):
		return errors.New("-grpc-tls-cert and -grpc-tls-key go together: set both or neither")
	case o.grpcTLSClientSAN != "" && o.grpcTLSClientCA == "":
		return errors.New("-grpc-tls-client-san needs -grpc-tls-client-ca: only a verified client certificate's names can be checked")
	case o.grpcTLSClientCA != "" && o.grpcTLSCert == "":
		return errors.New("-grpc-tls-client-ca needs -grpc-tls-cert and -grpc-tls-key: mutual TLS is TLS first")
	case o.redisPoolSize < 0:
		return errors.New("-redis-pool-size must not be negative (0 is go-redis's default)")
	case o.stats.valuesMiB < 1 || o.stats.valuesMiB > 1<<20:
		return errors.New("-stat-values-max-mib must be from 1 to 1048576 (MiB)")
	case o.rlqsReportInterval < time.Second:
		return errors.New("-rlqs-report-interval must be at least 1s: Envoy reports in whole seconds")
	case o.rlqsAssignmentTTL < 0:
		return errors.New("-rlqs-assignment-ttl must not be negative (0 is three report intervals)")
	case o.rlqsSilentAfter != 0 && o.rlqsSilentAfter < 2*o.rlqsReportInterval:
		return errors.New("-rlqs-silent-after must be at least two -rlqs-report-interval (0 is three): a live Envoy reports once an interval")
	case o.rlqsClient != "identity" && o.rlqsClient != "address" && o.rlqsClient != "stream":
		return fmt.Errorf("-rlqs-client %q: want identity, address or stream", o.rlqsClient)
	case o.rlqsMaxStreamBuckets <= 0 || o.rlqsMaxBuckets <= 0:
		return errors.New("-rlqs-max-buckets-per-stream and -rlqs-max-buckets must be positive")
	}
	if err := o.checkBounds(); err != nil { // flagbounds.go
		return err
	}
	if err := o.statsd.check(); err != nil {
		return err
	}
	if err := descriptors.CheckKeyPrefix(o.redisKeyPrefix); err != nil {
		return fmt.Errorf("-redis-key-prefix: %w", err)
	}
	if err := o.xds.check(fs, o.configPath); err != nil {
		return err
	}
	return nil
}

// limitDefaultFlags defines what a limit that does not say gets, for the
// server and for explain alike.
func limitDefaultFlags(fs *flag.FlagSet, o *Options) {
	fs.Var(algorithmFlag{&o.defaultAlgorithm}, "default-algorithm", "algorithm of a limit that names none (every limit from xDS), unless a modifier of it has its own; fixed_window is envoyproxy/ratelimit's")
	fs.BoolVar(&o.countRefused, "count-refused", false, "count refused hits too for every limit that does not set count_refused, as envoyproxy/ratelimit counts (off: only allowed hits consume)")
	fs.BoolVar(&o.mergeDomains, "merge-domains", false, "load a domain that several files define as one, their top-level descriptors joined (envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG); off, it is an error")
	fs.BoolVar(&o.allowEmpty, "allow-empty-config", false, "load a -config directory without limits files as no limits (every request allowed), as envoyproxy/ratelimit loads an empty runtime directory; off, it is an error")
}

// loadOptions are what loading the limits file depends on.
func (o *Options) loadOptions() config.Options {
	return config.Options{MaxDelay: o.maxDelay, DefaultAlgorithm: o.defaultAlgorithm, CountRefused: o.countRefused, MergeDomains: o.mergeDomains, EmptyDir: o.allowEmpty}
}

// redisFlags defines the flags that say which Redis to use and how to reach
// it, besides -redis-url, for the server and for explain alike.
func redisFlags(fs *flag.FlagSet, o *Options) {
	fs.StringVar(&o.redisCluster, "redis-cluster", "", "comma-separated host:port seeds of a Redis Cluster")
	fs.StringVar(&o.redisSentinel, "redis-sentinel", "", "comma-separated host:port of the Redis Sentinels that watch -redis-sentinel-master; follows the master through failovers")
	fs.StringVar(&o.redisSentinelMaster, "redis-sentinel-master", "", "the name the Sentinels know the master by")
	fs.StringVar(&o.redisSentinelPassword, "redis-sentinel-password", "", "password of the Sentinels themselves, when they require AUTH")
	fs.StringVar(&o.redisUsername, "redis-username", "", "Redis username where the URL has none")
	fs.StringVar(&o.redisPassword, "redis-password", "", "Redis password where the URL has none")
	fs.BoolVar(&o.redisTLS, "redis-tls", false, "TLS to a Redis Cluster or to Sentinel and its master")
	fs.StringVar(&o.redisTLSCA, "redis-tls-ca", "", "CA file for Redis TLS (default: system roots)")
	fs.StringVar(&o.redisTLSCert, "redis-tls-cert", "", "client certificate (PEM) to present to a Redis that requires one, with -redis-tls-key")
	fs.StringVar(&o.redisTLSKey, "redis-tls-key", "", "private key (PEM) of -redis-tls-cert")
	fs.BoolVar(&o.redisTLSSkipHostname, "redis-tls-skip-hostname", false, "verify Redis's certificate chain but not that it names the host dialled (nodes reached by addresses their certificates lack)")
	fs.StringVar(&o.redisSentinelUsername, "redis-sentinel-username", "", "ACL user of the Sentinels themselves, with -redis-sentinel-password")
	secretFileFlags(fs, o)
}

// checkRedis reports flags that name more than one Redis, or a Sentinel
// without its master's name, and reads the passwords given by file.
func (o *Options) checkRedis() error {
	if err := o.readSecretFiles(); err != nil {
		return err
	}
	o.redisURL = redisURLOf(o.redisURL)
	var set []string
	for _, f := range []struct{ name, value string }{
		{"-redis-url", o.redisURL}, {"-redis-cluster", o.redisCluster}, {"-redis-sentinel", o.redisSentinel},
	} {
		if f.value != "" {
			set = append(set, f.name)
		}
	}
	switch {
	case len(set) == 2:
		return fmt.Errorf("%s and %s are both set: choose one", set[0], set[1])
	case len(set) > 2:
		return fmt.Errorf("%s and %s are all set: choose one", strings.Join(set[:len(set)-1], ", "), set[len(set)-1])
	case o.redisSentinel != "" && o.redisSentinelMaster == "":
		return errors.New("-redis-sentinel needs -redis-sentinel-master, the name the Sentinels know the master by")
	case o.redisSentinel == "" && o.redisSentinelMaster != "":
		return errors.New("-redis-sentinel-master needs -redis-sentinel, the Sentinels to ask for it")
	}
	return nil
}

// redisURLOf is -redis-url as a URL: a bare host:port, which the
// drop-in's REDIS_URL and redis-cli take, is redis://host:port.
func redisURLOf(s string) string {
	if strings.Contains(s, "://") {
		return s
	}
	if host, port, err := net.SplitHostPort(s); err == nil && host != "" && port != "" {
		return "redis://" + s
	}
	return s
}

// usesRedis reports whether the flags name a Redis (else the embedded
// store decides).
func (o *Options) usesRedis() bool {
	return o.redisURL != "" || o.redisCluster != "" || o.redisSentinel != ""
}

// splitAddrs splits a comma-separated list of host:port, dropping blanks.
func splitAddrs(list string) []string {
	var addrs []string
	for _, a := range strings.Split(list, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	return addrs
}
