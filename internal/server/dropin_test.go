package server

import (
	"maps"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/envoy-rls/envoy-rls/internal/dropin"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// The drop-in's environment (package dropin), as the server parses it.

// dropInOptions translates vars as the drop-in does and parses the
// server's flags from the result.
func dropInOptions(t *testing.T, vars map[string]string) *Options {
	t.Helper()
	lookup, err := dropin.Environment(env(vars), CommandLine(Help{}))
	if err != nil {
		t.Fatalf("dropin.Environment: %v", err)
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

// -grpc-addr unix:PATH (GRPC_UDS) listens on a unix socket.
func TestListenUnixSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "rls.sock")
	ls, err := listen(&Options{grpcAddr: "unix:" + sock, httpAddr: "127.0.0.1:0"}, zap.NewNop())
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
	if err := os.WriteFile(file, []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
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

// envoyGatewayTracingEnv is what Envoy Gateway's Deployment adds to its
// env once tracing is on (internal/infrastructure/kubernetes/ratelimit):
// the instance id is the pod's name, the endpoint its collector's OTLP/HTTP
// port.
func envoyGatewayTracingEnv(endpoint string) map[string]string {
	return map[string]string{
		"TRACING_ENABLED": "true", "TRACING_SERVICE_NAME": "envoy-ratelimit",
		"TRACING_SERVICE_NAMESPACE": "envoy-gateway-system", "TRACING_SERVICE_INSTANCE_ID": "envoy-ratelimit-6d4b9c7f5-x2k8q",
		"TRACING_SAMPLING_RATE": "1.0", "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
	}
}

func TestDropInTracing(t *testing.T) {
	vars := envoyGatewayFileEnv(t.TempDir())
	maps.Copy(vars, envoyGatewayTracingEnv("http://trace-collector.envoy-gateway-system.svc.cluster.local:4318"))
	want := tracingOptions{on: true, protocol: "http", samplingRate: 1, serviceName: "envoy-ratelimit",
		serviceNamespace: "envoy-gateway-system", instanceID: "envoy-ratelimit-6d4b9c7f5-x2k8q"}
	if got := dropInOptions(t, vars).tracing; got != want {
		t.Errorf("Envoy Gateway's tracing env: got %+v, want %+v", got, want)
	}
	// envoyproxy/ratelimit's defaults, and a rate past 1 is 1 there.
	vars = envoyGatewayFileEnv(t.TempDir())
	vars["TRACING_ENABLED"], vars["TRACING_SAMPLING_RATE"], vars["TRACING_EXPORTER_PROTOCOL"] = "true", "2", "grpc"
	want = tracingOptions{on: true, protocol: "grpc", samplingRate: 1, serviceName: "RateLimit"}
	if got := dropInOptions(t, vars).tracing; got != want {
		t.Errorf("defaults: got %+v, want %+v", got, want)
	}
	// Off, the others change nothing.
	vars = envoyGatewayFileEnv(t.TempDir())
	vars["TRACING_SERVICE_NAME"], vars["TRACING_SAMPLING_RATE"] = "x", "0.5"
	if got := dropInOptions(t, vars).tracing; got.on || got.serviceName != "envoy-rls" || got.samplingRate != 1 {
		t.Errorf("TRACING_ENABLED unset: got %+v, want tracing off with envoy-rls's defaults", got)
	}
}
