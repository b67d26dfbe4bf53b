package main

import (
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// upstreamSettings are the variables of envoyproxy/ratelimit's
// src/settings/settings.go, in its order, and Envoy Gateway's
// GRPC_SERVER_TLS_CA_CERT: every one must be read by the drop-in, honoured,
// refused or checked and found harmless, never passed over.
var upstreamSettings = []string{
	"HOST", "PORT", "DEBUG_HOST", "DEBUG_PORT", "GRPC_UDS", "GRPC_HOST", "GRPC_PORT",
	"GRPC_MAX_CONNECTION_AGE", "GRPC_MAX_CONNECTION_AGE_GRACE", "GRPC_SERVER_USE_TLS",
	"GRPC_SERVER_TLS_CERT", "GRPC_SERVER_TLS_KEY", "GRPC_CLIENT_TLS_CACERT", "GRPC_CLIENT_TLS_SAN",
	"LOG_LEVEL", "LOG_FORMAT", "CONFIG_TYPE", "FORCE_START_WITHOUT_INITIAL_CONFIG",
	"CONFIG_GRPC_XDS_NODE_ID", "CONFIG_GRPC_XDS_NODE_METADATA", "CONFIG_GRPC_XDS_SERVER_URL",
	"CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS",
	"CONFIG_GRPC_XDS_SERVER_USE_TLS", "CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "CONFIG_GRPC_XDS_CLIENT_TLS_KEY",
	"CONFIG_GRPC_XDS_SERVER_TLS_CACERT", "CONFIG_GRPC_XDS_SERVER_TLS_SAN",
	"XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", "XDS_CLIENT_BACKOFF_MAX_INTERVAL",
	"XDS_CLIENT_BACKOFF_RANDOM_FACTOR", "XDS_CLIENT_BACKOFF_JITTER", "XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES",
	"USE_DOG_STATSD", "USE_DOG_STATSD_MOGRIFIERS", "USE_STATSD", "STATSD_HOST", "STATSD_PORT",
	"EXTRA_TAGS", "STATS_FLUSH_INTERVAL", "DISABLE_STATS", "USE_PROMETHEUS", "PROMETHEUS_ADDR",
	"PROMETHEUS_PATH", "PROMETHEUS_MAPPER_YAML", "PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS",
	"RUNTIME_ROOT", "RUNTIME_SUBDIRECTORY", "RUNTIME_APPDIRECTORY", "RUNTIME_IGNOREDOTFILES",
	"RUNTIME_WATCH_ROOT", "EXPIRATION_JITTER_MAX_SECONDS", "LOCAL_CACHE_SIZE_IN_BYTES",
	"NEAR_LIMIT_RATIO", "CACHE_KEY_PREFIX", "BACKEND_TYPE", "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT",
	"LIMIT_RESPONSE_HEADERS_ENABLED", "LIMIT_LIMIT_HEADER", "LIMIT_REMAINING_HEADER", "LIMIT_RESET_HEADER",
	"HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", "REDIS_SOCKET_TYPE", "REDIS_TYPE", "REDIS_URL",
	"REDIS_POOL_SIZE", "REDIS_AUTH", "REDIS_TLS", "REDIS_TLS_CLIENT_CERT", "REDIS_TLS_CLIENT_KEY",
	"REDIS_TLS_CACERT", "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", "REDIS_PIPELINE_WINDOW",
	"REDIS_PIPELINE_LIMIT", "REDIS_CLUSTER_PIPELINE_PARALLELISM", "REDIS_PERSECOND",
	"REDIS_PERSECOND_SOCKET_TYPE", "REDIS_PERSECOND_TYPE", "REDIS_PERSECOND_URL",
	"REDIS_PERSECOND_POOL_SIZE", "REDIS_PERSECOND_AUTH", "REDIS_PERSECOND_TLS", "REDIS_SENTINEL_AUTH",
	"REDIS_PERSECOND_SENTINEL_AUTH", "REDIS_PERSECOND_PIPELINE_WINDOW", "REDIS_PERSECOND_PIPELINE_LIMIT",
	"REDIS_PERSECOND_CLUSTER_PIPELINE_PARALLELISM", "REDIS_HEALTH_CHECK_ACTIVE_CONNECTION",
	"REDIS_TIMEOUT", "REDIS_PERSECOND_TIMEOUT", "REDIS_POOL_ON_EMPTY_BEHAVIOR",
	"REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR", "REDIS_STARTUP_INITIAL_INTERVAL",
	"REDIS_STARTUP_MAX_INTERVAL", "REDIS_STARTUP_MAX_ELAPSED_TIME", "MEMCACHE_HOST_PORT",
	"MEMCACHE_MAX_IDLE_CONNS", "MEMCACHE_SRV", "MEMCACHE_SRV_REFRESH", "MEMCACHE_TLS",
	"MEMCACHE_TLS_CLIENT_CERT", "MEMCACHE_TLS_CLIENT_KEY", "MEMCACHE_TLS_CACERT",
	"MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION", "SHADOW_MODE", "QUOTA_MODE", "RESPONSE_DYNAMIC_METADATA",
	"MERGE_DOMAIN_CONFIG", "TRACING_ENABLED", "TRACING_SERVICE_NAME", "TRACING_SERVICE_NAMESPACE",
	"TRACING_SERVICE_INSTANCE_ID", "TRACING_EXPORTER_PROTOCOL", "TRACING_SAMPLING_RATE",
	"GRPC_SERVER_TLS_CA_CERT",
}

func TestIsDropIn(t *testing.T) {
	for argv0, want := range map[string]bool{
		"/bin/ratelimit": true, "ratelimit": true, "./bin/ratelimit": true,
		"/usr/local/bin/envoy-rls": false, "envoy-rls": false, "ratelimit.test": false, "/bin/ratelimit-x": false,
	} {
		if got := isDropIn(argv0); got != want {
			t.Errorf("isDropIn(%q): got %v, want %v", argv0, got, want)
		}
	}
}

// Every variable of envoyproxy/ratelimit's is looked at, whatever the mode.
func TestDropInReadsEveryVariable(t *testing.T) {
	for _, mode := range []string{"FILE", "GRPC_XDS_SOTW"} {
		e := newUpstreamEnv(env(map[string]string{"CONFIG_TYPE": mode, "RUNTIME_ROOT": t.TempDir()}))
		e.translate()
		for _, name := range upstreamSettings {
			if !e.read[name] {
				t.Errorf("CONFIG_TYPE=%s: %s is never read", mode, name)
			}
		}
	}
}

// The README's table names every variable, so that its note of what
// envoy-rls does with each stays whole.
func TestDropInREADMEListsEveryVariable(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Running as envoyproxy/ratelimit\n")
	if !ok {
		t.Fatal(`README.md: no section "Running as envoyproxy/ratelimit"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	for _, name := range upstreamSettings {
		if !strings.Contains(section, "`"+name+"`") {
			t.Errorf("README.md, Running as envoyproxy/ratelimit: %s is not in the table", name)
		}
	}
}

// dropInOptions translates vars as the drop-in does and parses the
// server's flags from the result.
func dropInOptions(t *testing.T, vars map[string]string) *options {
	t.Helper()
	lookup, err := translateDropIn(env(vars))
	if err != nil {
		t.Fatalf("translateDropIn: %v", err)
	}
	o, err := parseFlags(nil, lookup)
	if err != nil {
		t.Fatalf("parseFlags: %v", err)
	}
	return o
}

// envoyGatewayFileEnv is Envoy Gateway's Deployment env in file mode: its
// xDS variables left out, the rest as it sets them.
func envoyGatewayFileEnv(root string) map[string]string {
	return map[string]string{
		"RUNTIME_ROOT": root, "RUNTIME_SUBDIRECTORY": "ratelimit",
		"RUNTIME_IGNOREDOTFILES": "true", "RUNTIME_WATCH_ROOT": "false",
		"LOG_LEVEL": "info", "USE_STATSD": "false",
		"GRPC_SERVER_USE_TLS": "true", "GRPC_SERVER_TLS_CERT": "/certs/tls.crt",
		"GRPC_SERVER_TLS_KEY": "/certs/tls.key", "GRPC_SERVER_TLS_CA_CERT": "/certs/ca.crt",
		"FORCE_START_WITHOUT_INITIAL_CONFIG": "true", "REDIS_SOCKET_TYPE": "tcp",
		"REDIS_URL": "redis.redis.svc:6379",
	}
}

func TestDropInEnvoyGateway(t *testing.T) {
	root := t.TempDir()
	o := dropInOptions(t, envoyGatewayFileEnv(root))
	for _, c := range []struct{ what, got, want string }{
		{"http-addr", o.httpAddr, "0.0.0.0:8080"},
		{"grpc-addr", o.grpcAddr, "0.0.0.0:8081"},
		{"debug-addr", o.debugAddr, "0.0.0.0:6070"},
		{"config", o.configPath, filepath.Join(root, "ratelimit", "config")},
		{"log-level", o.logLevel, "info"},
		{"log-format", o.logFormat, "console"},
		{"redis-url", o.redisURL, "redis://redis.redis.svc:6379"},
		{"grpc-tls-cert", o.grpcTLSCert, "/certs/tls.crt"},
		{"grpc-tls-key", o.grpcTLSKey, "/certs/tls.key"},
		{"grpc-tls-client-ca", o.grpcTLSClientCA, "/certs/ca.crt"},
		{"default-algorithm", o.defaultAlgorithm.String(), limits.FixedWindow.String()},
	} {
		if c.got != c.want {
			t.Errorf("-%s: got %q, want %q", c.what, c.got, c.want)
		}
	}
	if !o.countRefused || !o.answers.ratelimitCompat {
		t.Errorf("count-refused %v, ratelimit-compat %v: want both on", o.countRefused, o.answers.ratelimitCompat)
	}
	if o.grpcMaxConnectionAge != 24*time.Hour {
		t.Errorf("-grpc-max-connection-age: got %v, want envoyproxy/ratelimit's 24h", o.grpcMaxConnectionAge)
	}
	if o.storeTimeout != 50*time.Millisecond {
		t.Errorf("-store-timeout: got %v, want envoy-rls's 50ms without REDIS_TIMEOUT", o.storeTimeout)
	}
	if o.overLimitCache {
		t.Error("-over-limit-cache: got on, want off as LOCAL_CACHE_SIZE_IN_BYTES=0 has it")
	}
}

// Envoy Gateway's Deployment as it is: limits over xDS with mutual TLS,
// the same certificate for the gRPC server and the xDS client, Prometheus
// on :19001 with its statsd mapper.
func TestDropInEnvoyGatewayXDS(t *testing.T) {
	vars := envoyGatewayFileEnv("/data")
	maps.Copy(vars, map[string]string{
		"CONFIG_TYPE": "GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_SERVER_URL": "envoy-gateway:18001",
		"CONFIG_GRPC_XDS_NODE_ID": "envoy-ratelimit", "CONFIG_GRPC_XDS_SERVER_USE_TLS": "true",
		"CONFIG_GRPC_XDS_CLIENT_TLS_CERT": "/certs/tls.crt", "CONFIG_GRPC_XDS_CLIENT_TLS_KEY": "/certs/tls.key",
		"CONFIG_GRPC_XDS_SERVER_TLS_CACERT": "/certs/ca.crt", "USE_PROMETHEUS": "true",
		"PROMETHEUS_ADDR": ":19001", "PROMETHEUS_MAPPER_YAML": "/etc/statsd-exporter/conf.yaml",
	})
	o := dropInOptions(t, vars)
	x := o.xds
	for _, c := range []struct{ what, got, want string }{
		{"xds-server", x.server, "envoy-gateway:18001"},
		{"xds-node-id", x.nodeID, "envoy-ratelimit"},
		{"xds-tls-cert", x.tlsCert, "/certs/tls.crt"},
		{"xds-tls-key", x.tlsKey, "/certs/tls.key"},
		{"xds-tls-ca", x.tlsCA, "/certs/ca.crt"},
		{"config", o.configPath, "config/limits.yaml"}, // unused: the limits come over xDS
		{"grpc-tls-client-ca", o.grpcTLSClientCA, "/certs/ca.crt"},
		{"prometheus-addr", o.stats.addr, ":19001"},
		{"prometheus-mapper-yaml", o.stats.mapperFile, "/etc/statsd-exporter/conf.yaml"},
	} {
		if c.got != c.want {
			t.Errorf("-%s: got %q, want %q", c.what, c.got, c.want)
		}
	}
	if !x.tls || !x.forceStart || x.healthyNeedsConfig {
		t.Errorf("xds-tls %v, xds-force-start %v, xds-healthy-needs-config %v: want on, on, off", x.tls, x.forceStart, x.healthyNeedsConfig)
	}
	// envoyproxy/ratelimit's backoff: 10 s, each wait the first (a factor
	// of 0.5), jittered.
	if x.retryInitial != 10*time.Second || x.retryMax != time.Minute || x.retryFactor != 0.5 || !x.retryJitter {
		t.Errorf("retry: initial %v, max %v, factor %v, jitter %v; want 10s, 1m, 0.5, true", x.retryInitial, x.retryMax, x.retryFactor, x.retryJitter)
	}
	if o.defaultAlgorithm != limits.FixedWindow || !o.countRefused {
		t.Errorf("limits from xDS: algorithm %v, count-refused %v; want fixed_window and on", o.defaultAlgorithm, o.countRefused)
	}
}

// With nothing set, the defaults are envoyproxy/ratelimit's.
func TestDropInDefaults(t *testing.T) {
	o := dropInOptions(t, nil)
	for _, c := range []struct{ what, got, want string }{
		{"config", o.configPath, "/srv/runtime_data/current/config"},
		{"redis-url", o.redisURL, "unix:///var/run/nutcracker/ratelimit.sock"},
		{"log-level", o.logLevel, "warn"},
		{"log-format", o.logFormat, "console"},
	} {
		if c.got != c.want {
			t.Errorf("-%s: got %q, want %q", c.what, c.got, c.want)
		}
	}
	if o.grpcTLSCert != "" || o.shadowMode || o.answers.quotaMode || o.answers.dynamicMetadata || o.answers.ratelimitHeaders {
		t.Errorf("got TLS %q, shadow %v, quota %v, metadata %v, headers %v: want all off",
			o.grpcTLSCert, o.shadowMode, o.answers.quotaMode, o.answers.dynamicMetadata, o.answers.ratelimitHeaders)
	}
}

func TestDropInValues(t *testing.T) {
	o := dropInOptions(t, map[string]string{
		"HOST": "127.0.0.1", "PORT": "9080", "GRPC_HOST": "::1", "GRPC_PORT": "9081", "DEBUG_PORT": "0",
		"LOG_LEVEL": "TRACE", "LOG_FORMAT": "JSON",
		"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "127.0.0.1:6379", "REDIS_AUTH": "app:s3cret",
		"REDIS_POOL_SIZE": "20", "REDIS_TIMEOUT": "200ms", "CACHE_KEY_PREFIX": "team_a",
		"LOCAL_CACHE_SIZE_IN_BYTES": "1048576", "SHADOW_MODE": "true", "QUOTA_MODE": "1",
		"RESPONSE_DYNAMIC_METADATA": "True", "LIMIT_RESPONSE_HEADERS_ENABLED": "true",
		"LIMIT_LIMIT_HEADER": "X-Limit", "LIMIT_REMAINING_HEADER": "X-Left", "LIMIT_RESET_HEADER": "X-Reset",
		"GRPC_MAX_CONNECTION_AGE": "1h", "MERGE_DOMAIN_CONFIG": "true",
		"RUNTIME_APPDIRECTORY": "limits",
	})
	for _, c := range []struct{ what, got, want string }{
		{"http-addr", o.httpAddr, "127.0.0.1:9080"},
		{"grpc-addr", o.grpcAddr, "[::1]:9081"},
		{"debug-addr", o.debugAddr, "0.0.0.0:0"},
		{"log-level", o.logLevel, "debug"},
		{"log-format", o.logFormat, "json"},
		{"redis-url", o.redisURL, "redis://127.0.0.1:6379"},
		{"redis-username", o.redisUsername, "app"},
		{"redis-password", o.redisPassword, "s3cret"},
		{"redis-key-prefix", o.redisKeyPrefix, "team_a"},
		{"config", o.configPath, "/srv/runtime_data/current/limits"},
		{"ratelimit-header-limit", o.answers.headerNames.Limit, "X-Limit"},
		{"ratelimit-header-remaining", o.answers.headerNames.Remaining, "X-Left"},
		{"ratelimit-header-reset", o.answers.headerNames.Reset, "X-Reset"},
	} {
		if c.got != c.want {
			t.Errorf("-%s: got %q, want %q", c.what, c.got, c.want)
		}
	}
	if o.redisPoolSize != 20 || o.storeTimeout != 200*time.Millisecond || o.grpcMaxConnectionAge != time.Hour {
		t.Errorf("pool %d, store timeout %v, connection age %v: want 20, 200ms, 1h", o.redisPoolSize, o.storeTimeout, o.grpcMaxConnectionAge)
	}
	if !o.overLimitCache || !o.shadowMode || !o.answers.quotaMode || !o.answers.dynamicMetadata || !o.answers.ratelimitHeaders || !o.mergeDomains {
		t.Errorf("over-limit cache %v, shadow %v, quota %v, metadata %v, headers %v, merge %v: want all on",
			o.overLimitCache, o.shadowMode, o.answers.quotaMode, o.answers.dynamicMetadata, o.answers.ratelimitHeaders, o.mergeDomains)
	}

	if o := dropInOptions(t, map[string]string{"GRPC_UDS": "/run/rls.sock"}); o.grpcAddr != "unix:/run/rls.sock" {
		t.Errorf("GRPC_UDS: -grpc-addr got %q, want unix:/run/rls.sock", o.grpcAddr)
	}
}

// REDIS_URL in each of its forms, with REDIS_TYPE and REDIS_SOCKET_TYPE.
func TestDropInRedisForms(t *testing.T) {
	type redis struct{ url, cluster, sentinel, master, user, pass, sentinelPass, ca string }
	for _, c := range []struct {
		name string
		vars map[string]string
		want redis
		tls  bool
	}{
		{"single", map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "redis:6379"},
			redis{url: "redis://redis:6379"}, false},
		{"single, url form", map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "redis://u:p@redis:6379/2"},
			redis{url: "redis://u:p@redis:6379/2"}, false},
		{"single, url query", map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "redis://redis:6379?password=p&db=3"},
			redis{url: "redis://:p@redis:6379/3"}, false},
		{"single, REDIS_AUTH wins", map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "redis://u:p@redis:6379", "REDIS_AUTH": "pw"},
			redis{url: "redis://redis:6379", pass: "pw"}, false},
		{"single, TLS", map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "redis:6380", "REDIS_TLS": "true", "REDIS_TLS_CACERT": "/ca.pem"},
			redis{url: "rediss://redis:6380", ca: "/ca.pem"}, false},
		{"single, CA without TLS", map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "redis:6379", "REDIS_TLS_CACERT": "/ca.pem"},
			redis{url: "redis://redis:6379"}, false},
		{"unix socket", map[string]string{"REDIS_SOCKET_TYPE": "unix", "REDIS_URL": "/run/redis.sock"},
			redis{url: "unix:///run/redis.sock"}, false},
		{"cluster, any case", map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_TYPE": "Cluster", "REDIS_URL": "a:7000,b:7001,redis://c:7002", "REDIS_AUTH": "u:p", "REDIS_TLS": "true"},
			redis{cluster: "a:7000,b:7001,c:7002", user: "u", pass: "p"}, true},
		{"sentinel", map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_TYPE": "SENTINEL", "REDIS_URL": "mymaster,s1:26379,s2:26379", "REDIS_AUTH": "p", "REDIS_SENTINEL_AUTH": "sp"},
			redis{sentinel: "s1:26379,s2:26379", master: "mymaster", pass: "p", sentinelPass: "sp"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := dropInOptions(t, c.vars)
			got := redis{o.redisURL, o.redisCluster, o.redisSentinel, o.redisSentinelMaster, o.redisUsername, o.redisPassword, o.redisSentinelPassword, o.redisTLSCA}
			if got != c.want || o.redisTLS != c.tls {
				t.Errorf("got %+v, TLS %v; want %+v, TLS %v", got, o.redisTLS, c.want, c.tls)
			}
		})
	}
}

// Envoy Gateway's Redis with TLS and a client certificate, hostname
// verification off, and Sentinels with a user of their own.
func TestDropInRedisTLSAndSentinelUser(t *testing.T) {
	o := dropInOptions(t, map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "r:6380", "REDIS_TLS": "true",
		"REDIS_TLS_CACERT": "/ca.pem", "REDIS_TLS_CLIENT_CERT": "/c.pem", "REDIS_TLS_CLIENT_KEY": "/k.pem",
		"REDIS_TLS_SKIP_HOSTNAME_VERIFICATION": "true"})
	if o.redisTLSCert != "/c.pem" || o.redisTLSKey != "/k.pem" || !o.redisTLSSkipHostname || o.redisTLSCA != "/ca.pem" {
		t.Errorf("TLS: cert %q key %q skip %v ca %q", o.redisTLSCert, o.redisTLSKey, o.redisTLSSkipHostname, o.redisTLSCA)
	}
	o = dropInOptions(t, map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "r:6380",
		"REDIS_TLS_CLIENT_CERT": "/c.pem", "REDIS_TLS_CLIENT_KEY": "/k.pem", "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION": "true"})
	if o.redisTLSCert != "" || o.redisTLSSkipHostname {
		t.Errorf("without REDIS_TLS, as upstream: cert %q skip %v, want neither", o.redisTLSCert, o.redisTLSSkipHostname)
	}
	o = dropInOptions(t, map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_TYPE": "sentinel", "REDIS_URL": "m,s:26379", "REDIS_SENTINEL_AUTH": "admin:pw"})
	if o.redisSentinelUsername != "admin" || o.redisSentinelPassword != "pw" {
		t.Errorf("REDIS_SENTINEL_AUTH=admin:pw: user %q password %q", o.redisSentinelUsername, o.redisSentinelPassword)
	}
}

// GRPC_CLIENT_TLS_SAN narrows mutual TLS to certificates that name it; with
// no client CA, as there, it does nothing.
func TestDropInClientSAN(t *testing.T) {
	base := map[string]string{"GRPC_SERVER_USE_TLS": "true", "GRPC_SERVER_TLS_CERT": "/c", "GRPC_SERVER_TLS_KEY": "/k", "GRPC_CLIENT_TLS_SAN": "envoy"}
	if o := dropInOptions(t, base); o.grpcTLSClientSAN != "" {
		t.Errorf("without a client CA: -grpc-tls-client-san %q, want none", o.grpcTLSClientSAN)
	}
	base["GRPC_CLIENT_TLS_CACERT"] = "/ca"
	if o := dropInOptions(t, base); o.grpcTLSClientSAN != "envoy" || o.grpcTLSClientCA != "/ca" {
		t.Errorf("with a client CA: SAN %q CA %q", o.grpcTLSClientSAN, o.grpcTLSClientCA)
	}
}

// An RLS_ variable that is set wins over what the upstream variables say,
// and replaces the rivals of its flag.
func TestDropInTwinsWin(t *testing.T) {
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "redis:6379", "REDIS_AUTH": "pw", "LOG_LEVEL": "info", "REDIS_TIMEOUT": "1s"}
	with := func(extra map[string]string) map[string]string {
		m := maps.Clone(base)
		maps.Copy(m, extra)
		return m
	}

	o := dropInOptions(t, with(map[string]string{
		"RLS_LOG_LEVEL": "error", "RLS_STORE_TIMEOUT": "20ms", "RLS_DEFAULT_ALGORITHM": "sliding_window",
		"RLS_COUNT_REFUSED": "false", "RLS_RATELIMIT_COMPAT": "false", "RLS_DEBUG_ADDR": "",
	}))
	if o.logLevel != "error" || o.storeTimeout != 20*time.Millisecond || o.defaultAlgorithm != limits.SlidingWindow ||
		o.countRefused || o.answers.ratelimitCompat || o.debugAddr != "" {
		t.Errorf("got log level %q, store timeout %v, algorithm %v, count-refused %v, compat %v, debug %q; want the RLS_ values",
			o.logLevel, o.storeTimeout, o.defaultAlgorithm, o.countRefused, o.answers.ratelimitCompat, o.debugAddr)
	}
	// An empty RLS_ variable of a flag whose empty value means nothing is
	// as good as unset: LOG_LEVEL stands.
	if o := dropInOptions(t, with(map[string]string{"RLS_LOG_LEVEL": ""})); o.logLevel != "info" {
		t.Errorf("RLS_LOG_LEVEL empty: got %q, want LOG_LEVEL's info", o.logLevel)
	}
	// RLS_REDIS_CLUSTER replaces REDIS_URL's Redis instead of clashing.
	if o := dropInOptions(t, with(map[string]string{"RLS_REDIS_CLUSTER": "c1:7000,c2:7000"})); o.redisURL != "" || o.redisCluster != "c1:7000,c2:7000" {
		t.Errorf("RLS_REDIS_CLUSTER: got url %q, cluster %q; want the cluster alone", o.redisURL, o.redisCluster)
	}
	// RLS_REDIS_URL empty: the embedded store.
	if o := dropInOptions(t, with(map[string]string{"RLS_REDIS_URL": ""})); o.usesRedis() {
		t.Errorf("RLS_REDIS_URL empty: got Redis %q, want the embedded store", o.redisURL)
	}
	// A password by file replaces REDIS_AUTH's.
	if o := dropInOptions(t, with(map[string]string{"RLS_REDIS_PASSWORD_FILE": pwFile})); o.redisPassword != "from-file" {
		t.Errorf("RLS_REDIS_PASSWORD_FILE: got password %q, want the file's", o.redisPassword)
	}
}

// A variable envoy-rls cannot honour, or a malformed one, stops the start
// with one line naming it, and the exit status 2.
func TestDropInRefused(t *testing.T) {
	for _, c := range []struct {
		vars map[string]string
		want string
	}{
		{map[string]string{"BACKEND_TYPE": "memcache"}, `BACKEND_TYPE="memcache": envoy-rls counts in Redis (or its embedded store), not in memcache`},
		{map[string]string{"BACKEND_TYPE": "etcd"}, `BACKEND_TYPE="etcd": want redis`},
		{map[string]string{"REDIS_PERSECOND": "true"}, `REDIS_PERSECOND="true": envoy-rls counts every limit in one Redis; point REDIS_URL at the Redis to use`},
		{map[string]string{"USE_STATSD": "true"}, `USE_STATSD="true": envoy-rls has no statsd sink; set USE_STATSD=false and USE_PROMETHEUS=true`},
		{map[string]string{"USE_DOG_STATSD": "1"}, `USE_DOG_STATSD="1": envoy-rls has no DogStatsD sink; use USE_PROMETHEUS=true`},
		{map[string]string{"TRACING_ENABLED": "true"}, `TRACING_ENABLED="true": envoy-rls has no tracing yet`},
		{map[string]string{"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT": "true"}, `STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT="true": envoy-rls has no such counting rule; RLS_COUNT_REFUSED=false counts only the hits it allows`},
		{map[string]string{"REDIS_HEALTH_CHECK_ACTIVE_CONNECTION": "true"}, `REDIS_HEALTH_CHECK_ACTIVE_CONNECTION="true": envoy-rls stays healthy while Redis is down and answers by its failure mode (RLS_FAILURE_MODE)`},
		{map[string]string{"REDIS_POOL_ON_EMPTY_BEHAVIOR": "create"}, `REDIS_POOL_ON_EMPTY_BEHAVIOR="create": envoyproxy/ratelimit refuses it too: a full pool waits; want WAIT`},
		{map[string]string{"USE_PROMETHEUS": "true", "PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS": "true"}, `PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS="true": envoy-rls reports the response time in seconds only`},
		{map[string]string{"GRPC_SERVER_USE_TLS": "true"}, `GRPC_SERVER_USE_TLS="true": needs GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY, the server's certificate and key`},
		// Malformed values: the variable and the form wanted.
		{map[string]string{"PORT": "http"}, `PORT="http": want a port number, 0 to 65535`},
		{map[string]string{"GRPC_PORT": "70000"}, `GRPC_PORT="70000": want a port number, 0 to 65535`},
		{map[string]string{"LOG_LEVEL": "verbose"}, `LOG_LEVEL="verbose": want trace, debug, info, warn, error, fatal or panic (any case)`},
		{map[string]string{"SHADOW_MODE": "yes"}, `SHADOW_MODE="yes": want true or false`},
		{map[string]string{"REDIS_TIMEOUT": "10"}, `REDIS_TIMEOUT="10": want a duration such as 500ms, 10s or 1h, not negative`},
		{map[string]string{"REDIS_TIMEOUT": "0s"}, `REDIS_TIMEOUT="0s": want a duration above zero: envoy-rls bounds every Redis call`},
		{map[string]string{"NEAR_LIMIT_RATIO": "1.5"}, `NEAR_LIMIT_RATIO="1.5": want a number from 0 to 1`},
		{map[string]string{"REDIS_POOL_SIZE": "-1"}, `REDIS_POOL_SIZE="-1": want a whole number, 0 or more`},
		{map[string]string{"EXPIRATION_JITTER_MAX_SECONDS": "lots"}, `EXPIRATION_JITTER_MAX_SECONDS="lots": want a whole number, 0 or more`},
		{map[string]string{"EXTRA_TAGS": "env=prod"}, `EXTRA_TAGS="env=prod": want key:value pairs separated by commas`},
		{map[string]string{"CONFIG_TYPE": "REST"}, `CONFIG_TYPE="REST": want FILE or GRPC_XDS_SOTW`},
		{map[string]string{"REDIS_TYPE": "replica"}, `REDIS_TYPE="replica": want single, sentinel or cluster (any case)`},
		{map[string]string{"REDIS_SOCKET_TYPE": "udp"}, `REDIS_SOCKET_TYPE="udp": want tcp or unix`},
		{map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "redis"}, `REDIS_URL="redis": want HOST:PORT or redis://[USER:PASSWORD@]HOST:PORT[/DB] (REDIS_TLS=true for TLS)`},
		{map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "rediss://:pw@r:6379"}, `REDIS_URL="rediss://:REDACTED@r:6379": want HOST:PORT or redis://[USER:PASSWORD@]HOST:PORT[/DB] (REDIS_TLS=true for TLS)`},
		{map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_TYPE": "sentinel", "REDIS_URL": "s1:26379"}, `REDIS_URL="s1:26379": want MASTER,HOST:PORT[,HOST:PORT...] for REDIS_TYPE=sentinel: the master's name, then the Sentinels`},
		{map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_TYPE": "cluster", "REDIS_URL": "a:1,b"}, `REDIS_URL="a:1,b": want HOST:PORT,HOST:PORT... for REDIS_TYPE=cluster (credentials in REDIS_AUTH)`},
		{map[string]string{"REDIS_TYPE": "cluster", "REDIS_URL": "a:1"}, `REDIS_SOCKET_TYPE="unix": REDIS_TYPE=cluster reaches its nodes over tcp: want REDIS_SOCKET_TYPE=tcp`},
		{map[string]string{"REDIS_URL": "redis.sock"}, `REDIS_URL="redis.sock": want the absolute path of Redis's unix socket for REDIS_SOCKET_TYPE=unix`},
		{map[string]string{"CACHE_KEY_PREFIX": "a{b}"}, `CACHE_KEY_PREFIX="a{b}": `},
	} {
		var stdout, stderr strings.Builder
		code := dropIn(nil, env(c.vars), &stdout, &stderr)
		lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
		if code != 2 || len(lines) != 1 || !strings.HasPrefix(lines[0], "ratelimit: "+c.want) {
			t.Errorf("%v: got exit %d and stderr:\n%s\nwant exit 2 and the one line\nratelimit: %s", c.vars, code, stderr.String(), c.want)
		}
	}
}

// Variables that change nothing when envoy-rls does not do what they tune
// are accepted, whatever they say, as long as they are well formed.
func TestDropInHarmless(t *testing.T) {
	o := dropInOptions(t, map[string]string{
		"USE_STATSD": "false", "STATSD_PORT": "9125", "EXTRA_TAGS": "env:prod,team:a",
		"REDIS_PERSECOND": "false", "REDIS_PERSECOND_URL": "/other.sock", "BACKEND_TYPE": "REDIS",
		"MEMCACHE_HOST_PORT": "m:11211", "REDIS_PIPELINE_WINDOW": "150us", "GRPC_MAX_CONNECTION_AGE_GRACE": "10m",
		"TRACING_SERVICE_NAME": "rls", "TRACING_SAMPLING_RATE": "0.5", "REDIS_POOL_ON_EMPTY_BEHAVIOR": "wait",
		// Without REDIS_TLS, GRPC_SERVER_USE_TLS or USE_PROMETHEUS, unused
		// there too.
		"REDIS_TLS_SKIP_HOSTNAME_VERIFICATION": "true", "GRPC_SERVER_TLS_CERT": "/c", "GRPC_CLIENT_TLS_SAN": "envoy",
		"USE_PROMETHEUS": "false", "PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS": "true",
	})
	if o.grpcTLSCert != "" {
		t.Errorf("-grpc-tls-cert: got %q without GRPC_SERVER_USE_TLS, want none", o.grpcTLSCert)
	}
}

// Every flag the drop-in translates to is one the server has: a test that
// fails until every flag named in the tables has landed.
func TestDropInFlagsExist(t *testing.T) {
	fs := serverFlags(&options{}).fs
	for _, vars := range []map[string]string{
		{"CONFIG_TYPE": "FILE", "USE_PROMETHEUS": "true", "PROMETHEUS_MAPPER_YAML": "/m.yaml", "DISABLE_STATS": "true", "NEAR_LIMIT_RATIO": "0.5",
			"GRPC_SERVER_USE_TLS": "true", "GRPC_SERVER_TLS_CERT": "/c", "GRPC_SERVER_TLS_KEY": "/k", "GRPC_CLIENT_TLS_CACERT": "/ca",
			"REDIS_SOCKET_TYPE": "tcp", "REDIS_TYPE": "sentinel", "REDIS_URL": "m,s:1", "REDIS_AUTH": "u:p", "REDIS_SENTINEL_AUTH": "sp",
			"REDIS_TLS": "true", "REDIS_TLS_CACERT": "/ca", "REDIS_POOL_SIZE": "3", "REDIS_TIMEOUT": "1s", "CACHE_KEY_PREFIX": "p",
			"LOCAL_CACHE_SIZE_IN_BYTES": "1", "MERGE_DOMAIN_CONFIG": "true", "SHADOW_MODE": "true", "QUOTA_MODE": "true",
			"RESPONSE_DYNAMIC_METADATA": "true", "LIMIT_RESPONSE_HEADERS_ENABLED": "true", "LIMIT_LIMIT_HEADER": "a",
			"LIMIT_REMAINING_HEADER": "b", "LIMIT_RESET_HEADER": "c"},
		{"CONFIG_TYPE": "GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_SERVER_URL": "x:1", "CONFIG_GRPC_XDS_NODE_ID": "n",
			"CONFIG_GRPC_XDS_NODE_METADATA": "a=b", "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS": "h:v",
			"CONFIG_GRPC_XDS_SERVER_USE_TLS": "true", "CONFIG_GRPC_XDS_CLIENT_TLS_CERT": "/c", "CONFIG_GRPC_XDS_CLIENT_TLS_KEY": "/k",
			"CONFIG_GRPC_XDS_SERVER_TLS_CACERT": "/ca", "CONFIG_GRPC_XDS_SERVER_TLS_SAN": "eg",
			"XDS_CLIENT_BACKOFF_INITIAL_INTERVAL": "1s", "XDS_CLIENT_BACKOFF_MAX_INTERVAL": "2s",
			"FORCE_START_WITHOUT_INITIAL_CONFIG": "true", "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED": "true"},
	} {
		e := newUpstreamEnv(env(vars))
		e.translate()
		if len(e.errs) > 0 {
			t.Fatalf("%v: %v", vars, e.errs)
		}
		names := slices.Sorted(maps.Keys(e.flags))
		for _, name := range names {
			if fs.Lookup(name) == nil {
				t.Errorf("%s: the drop-in translates it to -%s, which the server does not have yet", strings.Join(e.from[name], ", "), name)
			}
		}
	}
}

// mkfile writes a file, making its directory.
func mkfile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// configMapDir lays out dir as the kubelet mounts a ConfigMap with the key
// config.yaml.
func configMapDir(t *testing.T, dir string) {
	t.Helper()
	mkfile(t, filepath.Join(dir, "..2026_12_01_00_00_00.1", "config.yaml"), "domain: d\n")
	for _, l := range [][2]string{{"..2026_12_01_00_00_00.1", "..data"}, {"..data/config.yaml", "config.yaml"}} {
		if err := os.Symlink(l[0], filepath.Join(dir, l[1])); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCheckRuntimeDir(t *testing.T) {
	// A ConfigMap: loaded the same by both, with or without dotfiles.
	root := t.TempDir()
	configMapDir(t, filepath.Join(root, "rl", "config"))
	for _, ignoreDot := range []bool{true, false} {
		if err := checkRuntimeDir(root, "rl", "config", ignoreDot, false); err != nil {
			t.Errorf("ConfigMap, ignore dotfiles %v: %v", ignoreDot, err)
		}
	}
	// A directory that does not exist is the loader's to report.
	if err := checkRuntimeDir(root, "none", "config", true, true); err != nil {
		t.Errorf("missing directory: %v", err)
	}

	for _, c := range []struct {
		name, file           string
		ignoreDot, watchRoot bool
		stray                bool
	}{
		{"not yaml", "config/limits.conf", true, false, true},
		{"in a subdirectory", "config/team/limits.yaml", true, false, true},
		{"dotfile kept", "config/.limits.yaml", false, false, true},
		{"dotfile skipped", "config/.limits.yaml", true, false, false},
		{"dot directory skipped", "config/.git/limits.yaml", true, false, false},
		{"beside the app directory, root watched", "config.extra", true, true, true},
		{"beside the app directory, root not watched", "config.extra", true, false, false},
		{"another name beside it", "other.yaml", true, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			mkfile(t, filepath.Join(root, "rl", "config", "limits.yaml"), "domain: d\n")
			path := filepath.Join(root, "rl", c.file)
			mkfile(t, path, "domain: e\n")
			err := checkRuntimeDir(root, "rl", "config", c.ignoreDot, c.watchRoot)
			switch {
			case c.stray && (err == nil || !strings.HasPrefix(err.Error(), path+": envoyproxy/ratelimit would load this file")):
				t.Errorf("got %v, want the error naming %s", err, path)
			case !c.stray && err != nil:
				t.Errorf("got %v, want none", err)
			}
		})
	}
}

// -grpc-addr unix:PATH (GRPC_UDS) listens on a unix socket.
func TestListenUnixSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "rls.sock")
	ls, err := listen(&options{grpcAddr: "unix:" + sock, httpAddr: "127.0.0.1:0"}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer ls.close()
	if got := ls.grpc.Addr().Network(); got != "unix" {
		t.Errorf("network: got %s, want unix", got)
	}
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatalf("dial %s: %v", sock, err)
	}
	c.Close()
}

// An empty runtime directory (a ConfigMap with no keys yet) is no limits,
// as envoyproxy/ratelimit loads it, not a failed start: the drop-in serves,
// every request allowed, and takes the first file that appears, and the
// directory's emptying again, as reloads.
func TestDropInEmptyRuntimeDir(t *testing.T) {
	if o := dropInOptions(t, envoyGatewayFileEnv(t.TempDir())); !o.allowEmpty {
		t.Error("-allow-empty-config: got off in the drop-in, want on")
	}
	vars := envoyGatewayFileEnv(t.TempDir())
	vars["RLS_ALLOW_EMPTY_CONFIG"] = "false"
	if o := dropInOptions(t, vars); o.allowEmpty {
		t.Error("RLS_ALLOW_EMPTY_CONFIG=false: got -allow-empty-config on, want the twin to win")
	}

	dir := t.TempDir()
	s := startInProcess(t, "-config", dir, "-allow-empty-config", "-default-algorithm", "fixed_window")
	if code, body := httpDo(t, "GET", "http://"+s.httpAddr+"/healthz", ""); code != 200 {
		t.Fatalf("/healthz with no limits files: %d %s", code, body)
	}
	const req = `{"domain":"d","descriptors":[{"entries":[{"key":"k","value":"v"}]}]}`
	for i := range 3 {
		if code, body := s.postJSON(t, req); code != 200 || !strings.Contains(body, `"overallCode":"OK"`) {
			t.Fatalf("request %d with no limits files: %d %s, want 200 OK", i, code, body)
		}
	}
	file := filepath.Join(dir, "d.yaml")
	mkfile(t, file, "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 1}\n")
	awaitStatus(t, s, req, 200, 429, "after the first file appeared")
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	awaitStatus(t, s, req, 429, 200, "after the last file went")
}

// awaitStatus posts req to /json until it is answered want, for as long as
// it is answered was, and fails the test on another answer or after
// reloadBound.
func awaitStatus(t *testing.T, s *inProcess, req string, was, want int, what string) {
	t.Helper()
	deadline := time.Now().Add(reloadBound)
	for {
		code, body := s.postJSON(t, req)
		if code == want {
			return
		}
		if code != was || time.Now().After(deadline) {
			t.Fatalf("%s: %d %s, want %d within %v", what, code, body, want, reloadBound)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
