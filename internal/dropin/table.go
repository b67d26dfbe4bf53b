package dropin

// variable is one of envoyproxy/ratelimit's environment variables (its
// src/settings/settings.go, and Envoy Gateway's GRPC_SERVER_TLS_CA_CERT)
// and what envoy-rls does with it. Every variable is read and checked
// once, by its kind; then it becomes a flag by itself (flag), or a step
// of translate combines it with others (listeners, the runtime, gRPC TLS,
// Redis, the local cache), or, set to other than allow, it stops the
// start (refused), or it changes no decision and is only checked.
type variable struct {
	name string
	// def is envoyproxy/ratelimit's default, in its words; empty for an
	// empty or unset default, and for the variables only a refused
	// feature reads.
	def  string
	kind kind
	// flag is the envoy-rls flag the variable becomes by itself: its
	// value, or def when it is unset (but with ours).
	flag string
	// needs is what must hold for the variable to count, as there:
	// "REDIS_TLS" (a boolean that is true) or "CONFIG_TYPE=GRPC_XDS_SOTW".
	needs []string
	// ours keeps envoy-rls's default for flag while the variable is unset.
	ours bool
	// refused says why a value other than allow (def when empty) stops the
	// start.
	refused, allow string
	// does says what envoy-rls does with the variable, for
	// docs/environment.md, where the flag alone does not say it.
	does string
}

// Defaults of envoyproxy/ratelimit that the steps need by value.
const (
	upstreamRuntimeRoot = "/srv/runtime_data/current"
	upstreamRedisSocket = "/var/run/nutcracker/ratelimit.sock"
)

// What a variable needs to count.
var (
	withXDS        = []string{"CONFIG_TYPE=GRPC_XDS_SOTW"}
	withXDSTLS     = []string{"CONFIG_TYPE=GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_SERVER_USE_TLS"}
	withRedisTLS   = []string{"REDIS_TLS"}
	withPrometheus = []string{"USE_PROMETHEUS"}
	withTracing    = []string{"TRACING_ENABLED"}
)

// What the variables that change no decision are ignored for.
const (
	perSecondOnly = "ignored: it serves `REDIS_PERSECOND=true` only, there as here"
	memcacheOnly  = "ignored: it serves `BACKEND_TYPE=memcache` only, which is refused"
	pipelining    = "ignored: envoy-rls pipelines concurrent requests its own way"
	startupWait   = "ignored: envoy-rls does not wait for Redis to start; it serves at once, by the failure mode until Redis answers"
)

// variables is envoyproxy/ratelimit's environment, in the order of its
// settings: the one table of what the drop-in reads.
var variables = []variable{
	{name: "HOST", def: "0.0.0.0", kind: text, does: "with `PORT`, `-http-addr`: `/healthcheck`, `/json`, `/rlconfig`, and envoy-rls's own endpoints"},
	{name: "PORT", def: "8080", kind: port, does: "with `HOST`, `-http-addr`"},
	{name: "DEBUG_HOST", def: "0.0.0.0", kind: text, does: "with `DEBUG_PORT`, `-debug-addr`: pprof, on every interface as there (`DEBUG_HOST=127.0.0.1` keeps it local)"},
	{name: "DEBUG_PORT", def: "6070", kind: port, does: "with `DEBUG_HOST`, `-debug-addr`"},
	{name: "GRPC_UDS", kind: text, does: "`-grpc-addr unix:PATH`: the gRPC service on that unix socket instead of `GRPC_HOST` and `GRPC_PORT`"},
	{name: "GRPC_HOST", def: "0.0.0.0", kind: text, does: "with `GRPC_PORT`, `-grpc-addr`"},
	{name: "GRPC_PORT", def: "8081", kind: port, does: "with `GRPC_HOST`, `-grpc-addr`"},
	{name: "GRPC_MAX_CONNECTION_AGE", def: "24h", kind: duration, flag: "grpc-max-connection-age"},
	{name: "GRPC_MAX_CONNECTION_AGE_GRACE", def: "1h", kind: duration, does: "ignored: the calls in flight on a connection closed for its age get `-shutdown-timeout` (10 s), and a call takes milliseconds"},
	{name: "GRPC_SERVER_USE_TLS", def: "false", kind: boolean, does: "with `GRPC_SERVER_TLS_CERT` and `GRPC_SERVER_TLS_KEY`, both needed: gRPC over TLS"},
	{name: "GRPC_SERVER_TLS_CERT", kind: text, does: "with `GRPC_SERVER_USE_TLS=true`, `-grpc-tls-cert`, reread when it changes"},
	{name: "GRPC_SERVER_TLS_KEY", kind: text, does: "with `GRPC_SERVER_USE_TLS=true`, `-grpc-tls-key`, reread when it changes"},
	{name: "GRPC_CLIENT_TLS_CACERT", kind: text, does: "with `GRPC_SERVER_USE_TLS=true`, `-grpc-tls-client-ca`: mutual TLS, the CA alone signing clients (there the system's roots too)"},
	{name: "GRPC_CLIENT_TLS_SAN", kind: text, does: "with a client CA, `-grpc-tls-client-san`: only client certificates that name it are accepted; without one it does nothing, as there"},
	{name: "LOG_LEVEL", def: "WARN", kind: logLevel, flag: "log-level", does: "`-log-level`, logrus's names in any case (`trace` is `debug`, `warning` is `warn`)"},
	{name: "LOG_FORMAT", def: "text", kind: logFormat, flag: "log-format", does: "`json` (any case) is `-log-format json`, anything else `console`, as there anything but `json` is text; the lines are envoy-rls's"},
	{name: "CONFIG_TYPE", def: "FILE", kind: configType, does: "`FILE`: the limits from the runtime directory; `GRPC_XDS_SOTW`: from xDS (any case)"},
	{name: "FORCE_START_WITHOUT_INITIAL_CONFIG", def: "false", kind: boolean, flag: "xds-force-start", needs: withXDS},
	{name: "CONFIG_GRPC_XDS_NODE_ID", def: "default", kind: text, flag: "xds-node-id", needs: withXDS},
	{name: "CONFIG_GRPC_XDS_NODE_METADATA", kind: asFlag, flag: "xds-node-metadata", needs: withXDS},
	{name: "CONFIG_GRPC_XDS_SERVER_URL", def: "localhost:18000", kind: text, flag: "xds-server", needs: withXDS},
	{name: "CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", def: "3s", kind: duration, does: "ignored: it has no effect there either"},
	{name: "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", kind: pairs, flag: "xds-headers", needs: withXDS},
	{name: "CONFIG_GRPC_XDS_SERVER_USE_TLS", def: "false", kind: boolean, flag: "xds-tls", needs: withXDS},
	{name: "CONFIG_GRPC_XDS_CLIENT_TLS_CERT", kind: text, flag: "xds-tls-cert", needs: withXDSTLS},
	{name: "CONFIG_GRPC_XDS_CLIENT_TLS_KEY", kind: text, flag: "xds-tls-key", needs: withXDSTLS},
	{name: "CONFIG_GRPC_XDS_SERVER_TLS_CACERT", kind: text, flag: "xds-tls-ca", needs: withXDSTLS},
	{name: "CONFIG_GRPC_XDS_SERVER_TLS_SAN", kind: text, flag: "xds-tls-server-name", needs: withXDSTLS},
	{name: "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", def: "10s", kind: duration, flag: "xds-retry-initial", needs: withXDS},
	{name: "XDS_CLIENT_BACKOFF_MAX_INTERVAL", def: "60s", kind: duration, flag: "xds-retry-max", needs: withXDS},
	// The factor each wait is multiplied by: 0.5 there, so every wait is
	// the initial one, as -xds-retry-factor of 1 or less has it.
	{name: "XDS_CLIENT_BACKOFF_RANDOM_FACTOR", def: "0.5", kind: number, flag: "xds-retry-factor", needs: withXDS, does: "with `CONFIG_TYPE=GRPC_XDS_SOTW`, `-xds-retry-factor`: with 0.5, every wait is the initial one, as there"},
	{name: "XDS_CLIENT_BACKOFF_JITTER", def: "true", kind: boolean, flag: "xds-retry-jitter", needs: withXDS},
	{name: "XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", kind: size, flag: "xds-max-message-bytes", needs: withXDS, does: "with `CONFIG_TYPE=GRPC_XDS_SOTW`, `-xds-max-message-bytes`; unset, gRPC's 4 MiB, as there"},
	// The stats sinks: plain statsd (USE_STATSD, on by default there),
	// DogStatsD, and Prometheus, combined by the stats step (stats.go).
	{name: "USE_DOG_STATSD", def: "false", kind: boolean, does: "`-dogstatsd` with `-statsd-addr STATSD_HOST:STATSD_PORT`: DogStatsD, with tags, over UDP, as there; with `USE_STATSD=true` set too, it stops the start, as there"},
	{name: "USE_DOG_STATSD_MOGRIFIERS", kind: text, does: "with `USE_DOG_STATSD=true`, `-dogstatsd-mogrifiers`: the mogrifiers named (`A,B`), each from `DOG_STATSD_MOGRIFIER_A_PATTERN`, `_NAME` and `_TAGS`; one that is malformed stops the start, naming the variable"},
	{name: "USE_STATSD", def: "true", kind: boolean, does: "`-statsd-addr STATSD_HOST:STATSD_PORT`: envoyproxy/ratelimit's stats pushed to a statsd over TCP, as there. Unset, on unless `USE_PROMETHEUS` or `USE_DOG_STATSD` is true (there the start stops); `USE_STATSD=true` with `USE_PROMETHEUS=true` feeds both"},
	{name: "STATSD_HOST", def: "localhost", kind: text, does: "with `STATSD_PORT`, `-statsd-addr`"},
	{name: "STATSD_PORT", def: "8125", kind: port, does: "with `STATSD_HOST`, `-statsd-addr`"},
	{name: "EXTRA_TAGS", kind: tagPairs, flag: "statsd-tags", does: "`-statsd-tags`: on every stat pushed to statsd (folded into the name) or DogStatsD; not added to the Prometheus families"},
	{name: "STATS_FLUSH_INTERVAL", def: "10s", kind: interval, flag: "statsd-flush-interval"},
	{name: "DISABLE_STATS", def: "false", kind: boolean, flag: "disable-stats"},
	{name: "USE_PROMETHEUS", def: "false", kind: boolean, does: "turns on `PROMETHEUS_ADDR`, `PROMETHEUS_PATH` and `PROMETHEUS_MAPPER_YAML`: envoyproxy/ratelimit's families, served as Envoy Gateway's statsd mapper names them"},
	{name: "PROMETHEUS_ADDR", def: ":9090", kind: text, flag: "prometheus-addr", needs: withPrometheus},
	{name: "PROMETHEUS_PATH", def: "/metrics", kind: asFlag, flag: "prometheus-path", needs: withPrometheus},
	{name: "PROMETHEUS_MAPPER_YAML", kind: text, flag: "prometheus-mapper-yaml", needs: withPrometheus},
	{name: "PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS", def: "false", kind: boolean, needs: withPrometheus, refused: "envoy-rls reports the response time in seconds only"},
	{name: "RUNTIME_ROOT", def: upstreamRuntimeRoot, kind: text, does: "with `RUNTIME_SUBDIRECTORY` and `RUNTIME_APPDIRECTORY`, `-config`: the `*.yaml` and `*.yml` files directly in their path; any other file there, and a subdirectory (goruntime loads both), is served through and reported at every load, in the log and in `rls_config_not_loaded_files`"},
	{name: "RUNTIME_SUBDIRECTORY", kind: text, does: "part of `-config`'s path"},
	{name: "RUNTIME_APPDIRECTORY", def: "config", kind: text, does: "part of `-config`'s path"},
	{name: "RUNTIME_IGNOREDOTFILES", def: "false", kind: boolean, does: "names starting with a dot are never loaded, whatever it says (goruntime loads them with `false`)"},
	// Honoured whatever it says: envoy-rls watches the application
	// directory and, through the symlinks it resolves, a swap of the whole
	// root (package watch), both of which envoyproxy/ratelimit watches one
	// at a time.
	{name: "RUNTIME_WATCH_ROOT", def: "true", kind: boolean, does: "both the application directory and a swap of the root reload, whichever it says; a `RUNTIME_APPDIRECTORY.*` file beside the application directory, which goruntime loads with `true`, is not"},
	{name: "EXPIRATION_JITTER_MAX_SECONDS", def: "300", kind: size, does: "ignored: a key's expiry changes no decision"},
	{name: "LOCAL_CACHE_SIZE_IN_BYTES", def: "0", kind: size, does: "`-over-limit-cache`: `0` off, any size on. envoy-rls's cache of refused keys holds them until their reset, sized in keys rather than bytes"},
	{name: "NEAR_LIMIT_RATIO", def: "0.8", kind: ratio, flag: "near-limit-ratio"},
	{name: "CACHE_KEY_PREFIX", kind: keyPrefix, flag: "redis-key-prefix", does: "`-redis-key-prefix` when set (no `{` or `}`), so that services sharing a Redis stay apart; the keys are envoy-rls's own, not envoyproxy/ratelimit's"},
	{name: "BACKEND_TYPE", def: "redis", kind: backend, refused: "envoy-rls counts in Redis (or its embedded store), not in memcache"},
	{name: "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", def: "false", kind: boolean, refused: "envoy-rls has no such counting rule; RLS_COUNT_REFUSED=false counts only the hits it allows"},
	{name: "LIMIT_RESPONSE_HEADERS_ENABLED", def: "false", kind: boolean, flag: "ratelimit-headers"},
	{name: "LIMIT_LIMIT_HEADER", def: "RateLimit-Limit", kind: text, flag: "ratelimit-header-limit"},
	{name: "LIMIT_REMAINING_HEADER", def: "RateLimit-Remaining", kind: text, flag: "ratelimit-header-remaining"},
	{name: "LIMIT_RESET_HEADER", def: "RateLimit-Reset", kind: text, flag: "ratelimit-header-reset"},
	{name: "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", def: "false", kind: boolean, flag: "healthy-needs-config", does: "`-healthy-needs-config`: `/healthcheck` and gRPC health not serving while the config in force has no domain, from the runtime directory (empty) as from xDS"},
	{name: "REDIS_SOCKET_TYPE", def: "unix", kind: socketType, does: "`tcp` or `unix` (any case); `unix` for a single Redis only"},
	{name: "REDIS_TYPE", def: "SINGLE", kind: redisType, does: "`single`, `sentinel` or `cluster` in any case: `-redis-url`, `-redis-sentinel` with `-redis-sentinel-master`, `-redis-cluster`"},
	{name: "REDIS_URL", def: upstreamRedisSocket, kind: text, does: "single: `host:port` or `redis://[user:pass@]host:port[/db]` (its `username`, `password` and `db` query too), or with `unix` the socket's absolute path; sentinel: `MASTER,host:port,host:port…`; cluster: `host:port,host:port…`"},
	// Unset, go-redis's pool size (a few per CPU) rather than 10: a
	// performance setting, which changes no decision.
	{name: "REDIS_POOL_SIZE", def: "10", kind: size, flag: "redis-pool-size", ours: true, does: "`-redis-pool-size` when set; unset, go-redis's default (10 per CPU)"},
	{name: "REDIS_AUTH", kind: text, does: "`user:pass` is `-redis-username` and `-redis-password`, `pass` is `-redis-password`; it wins over a URL's, as there"},
	{name: "REDIS_TLS", def: "false", kind: boolean, does: "`rediss://` for a single Redis, `-redis-tls` for a cluster or Sentinel; it turns on the other `REDIS_TLS_*`"},
	{name: "REDIS_TLS_CLIENT_CERT", kind: text, flag: "redis-tls-cert", needs: withRedisTLS},
	{name: "REDIS_TLS_CLIENT_KEY", kind: text, flag: "redis-tls-key", needs: withRedisTLS},
	{name: "REDIS_TLS_CACERT", kind: text, flag: "redis-tls-ca", needs: withRedisTLS, does: "with `REDIS_TLS=true`, `-redis-tls-ca`: its CAs alone (there the system's roots too)"},
	{name: "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", def: "false", kind: boolean, flag: "redis-tls-skip-hostname", needs: withRedisTLS, does: "with `REDIS_TLS=true`, `-redis-tls-skip-hostname` (the chain is still verified, the name is not)"},
	{name: "REDIS_PIPELINE_WINDOW", def: "0", kind: duration, does: pipelining},
	{name: "REDIS_PIPELINE_LIMIT", def: "0", kind: size, does: pipelining},
	{name: "REDIS_CLUSTER_PIPELINE_PARALLELISM", def: "1", kind: size, does: pipelining},
	{name: "REDIS_PERSECOND", def: "false", kind: boolean, refused: "envoy-rls counts every limit in one Redis; point REDIS_URL at the Redis to use"},
	{name: "REDIS_PERSECOND_SOCKET_TYPE", kind: text, does: perSecondOnly},
	{name: "REDIS_PERSECOND_TYPE", kind: text, does: perSecondOnly},
	{name: "REDIS_PERSECOND_URL", kind: text, does: perSecondOnly},
	{name: "REDIS_PERSECOND_POOL_SIZE", kind: size, does: perSecondOnly},
	{name: "REDIS_PERSECOND_AUTH", kind: text, does: perSecondOnly},
	{name: "REDIS_PERSECOND_TLS", kind: boolean, does: perSecondOnly},
	{name: "REDIS_SENTINEL_AUTH", kind: text, does: "`-redis-sentinel-password`, or for `user:pass` `-redis-sentinel-username` and `-redis-sentinel-password`"},
	{name: "REDIS_PERSECOND_SENTINEL_AUTH", kind: text, does: perSecondOnly},
	{name: "REDIS_PERSECOND_PIPELINE_WINDOW", kind: duration, does: perSecondOnly},
	{name: "REDIS_PERSECOND_PIPELINE_LIMIT", kind: size, does: perSecondOnly},
	{name: "REDIS_PERSECOND_CLUSTER_PIPELINE_PARALLELISM", kind: size, does: perSecondOnly},
	{name: "REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", def: "false", kind: boolean, refused: "envoy-rls stays healthy while Redis is down and answers by its failure mode (RLS_FAILURE_MODE)"},
	// REDIS_TIMEOUT bounds each Redis call there, as -store-timeout does
	// here: past it the decision is the failure mode's (there an error,
	// which Envoy's failure_mode_deny decides; here RLS_FAILURE_MODE,
	// allow by default, as Envoy's default allows). Unset, envoy-rls's
	// 50 ms stands instead of a 10 s wait on a Redis that does not answer.
	{name: "REDIS_TIMEOUT", def: "10s", kind: storeTimeout, flag: "store-timeout", ours: true, does: "`-store-timeout` when set; unset, envoy-rls's 50 ms, answering by the failure mode rather than holding a request 10 s; `0` is refused"},
	{name: "REDIS_PERSECOND_TIMEOUT", kind: duration, does: perSecondOnly},
	{name: "REDIS_POOL_ON_EMPTY_BEHAVIOR", def: "WAIT", kind: poolBehavior, does: "`CREATE` and `ERROR` are refused, as there; anything else waits for a connection, as go-redis does"},
	{name: "REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR", kind: text, does: perSecondOnly},
	{name: "REDIS_STARTUP_INITIAL_INTERVAL", def: "1s", kind: duration, does: startupWait},
	{name: "REDIS_STARTUP_MAX_INTERVAL", def: "30s", kind: duration, does: startupWait},
	{name: "REDIS_STARTUP_MAX_ELAPSED_TIME", def: "0", kind: duration, does: startupWait},
	{name: "MEMCACHE_HOST_PORT", kind: text, does: memcacheOnly},
	{name: "MEMCACHE_MAX_IDLE_CONNS", kind: size, does: memcacheOnly},
	{name: "MEMCACHE_SRV", kind: text, does: memcacheOnly},
	{name: "MEMCACHE_SRV_REFRESH", kind: duration, does: memcacheOnly},
	{name: "MEMCACHE_TLS", kind: boolean, does: memcacheOnly},
	{name: "MEMCACHE_TLS_CLIENT_CERT", kind: text, does: memcacheOnly},
	{name: "MEMCACHE_TLS_CLIENT_KEY", kind: text, does: memcacheOnly},
	{name: "MEMCACHE_TLS_CACERT", kind: text, does: memcacheOnly},
	{name: "MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION", kind: boolean, does: memcacheOnly},
	{name: "SHADOW_MODE", def: "false", kind: boolean, flag: "shadow-mode"},
	{name: "QUOTA_MODE", def: "false", kind: boolean, flag: "quota-mode"},
	{name: "RESPONSE_DYNAMIC_METADATA", def: "false", kind: boolean, flag: "dynamic-metadata"},
	{name: "MERGE_DOMAIN_CONFIG", def: "false", kind: boolean, flag: "merge-domains", does: "`-merge-domains`: a domain in several files is one, their top-level descriptors joined; one that two files both define is refused, as there"},
	{name: "TRACING_ENABLED", def: "false", kind: boolean, flag: "tracing", does: "`-tracing`: a span of every call over OTLP, to the endpoint the OpenTelemetry SDK's `OTEL_EXPORTER_OTLP_*` variables name, as there"},
	{name: "TRACING_SERVICE_NAME", def: "RateLimit", kind: text, flag: "tracing-service-name", needs: withTracing},
	{name: "TRACING_SERVICE_NAMESPACE", kind: text, flag: "tracing-service-namespace", needs: withTracing},
	{name: "TRACING_SERVICE_INSTANCE_ID", kind: text, flag: "tracing-service-instance-id", needs: withTracing, does: "with `TRACING_ENABLED=true`, `-tracing-service-instance-id`; unset, a random id, as there"},
	{name: "TRACING_EXPORTER_PROTOCOL", def: "http", kind: asFlag, flag: "tracing-protocol", needs: withTracing, does: "with `TRACING_ENABLED=true`, `-tracing-protocol`: `http` or `grpc`, in lower case as there"},
	{name: "TRACING_SAMPLING_RATE", def: "1", kind: samplingRate, flag: "tracing-sampling-rate", needs: withTracing, does: "with `TRACING_ENABLED=true`, `-tracing-sampling-rate` for the traces started here (a call's own trace keeps its parent's choice); above 1 samples all, below 0 none, as there"},
	// Envoy Gateway's name for GRPC_CLIENT_TLS_CACERT.
	{name: "GRPC_SERVER_TLS_CA_CERT", kind: text, does: "Envoy Gateway's name for `GRPC_CLIENT_TLS_CACERT`, meaning the same (envoyproxy/ratelimit reads only the first); two different files stop the start"},
}
