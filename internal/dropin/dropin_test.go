package dropin

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/envoy-rls/envoy-rls/internal/server"
)

// env is a lookup of the environment vars.
func env(vars map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

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
		if got := Is(argv0); got != want {
			t.Errorf("Is(%q): got %v, want %v", argv0, got, want)
		}
	}
}

// Every variable of envoyproxy/ratelimit's is in the table, once, and the
// table holds no other.
func TestTableHoldsEveryVariable(t *testing.T) {
	seen := map[string]bool{}
	for _, v := range variables {
		if seen[v.name] {
			t.Errorf("%s: twice in the table", v.name)
		}
		seen[v.name] = true
		if !slices.Contains(upstreamSettings, v.name) {
			t.Errorf("%s: in the table, but not one of envoyproxy/ratelimit's settings", v.name)
		}
	}
	for _, name := range upstreamSettings {
		if !seen[name] {
			t.Errorf("%s: not in the table", name)
		}
	}
}

// Whatever the mode, the table's defaults pass their own kinds and every
// variable a step reads is in the table: translate records either
// mistake as an error.
func TestTableConsistent(t *testing.T) {
	for _, mode := range []string{"FILE", "GRPC_XDS_SOTW"} {
		e := newUpstreamEnv(env(map[string]string{"CONFIG_TYPE": mode, "RUNTIME_ROOT": t.TempDir(), "USE_PROMETHEUS": "true",
			"REDIS_SOCKET_TYPE": "tcp", "REDIS_TYPE": "sentinel", "REDIS_URL": "m,s:1", "REDIS_SENTINEL_AUTH": "u:p", "REDIS_TLS": "true"}))
		e.translate()
		if len(e.errs) > 0 {
			t.Errorf("CONFIG_TYPE=%s: %v", mode, e.errs)
		}
	}
}

// A variable envoy-rls cannot honour, or a malformed one, stops the start
// with one line naming it.
func TestDropInRefused(t *testing.T) {
	for _, c := range []struct {
		vars map[string]string
		want string
	}{
		{map[string]string{"BACKEND_TYPE": "memcache"}, `BACKEND_TYPE="memcache": envoy-rls counts in Redis (or its embedded store), not in memcache`},
		{map[string]string{"BACKEND_TYPE": "etcd"}, `BACKEND_TYPE="etcd": want redis`},
		{map[string]string{"REDIS_PERSECOND": "true"}, `REDIS_PERSECOND="true": envoy-rls counts every limit in one Redis; point REDIS_URL at the Redis to use`},
		{map[string]string{"USE_STATSD": "true", "USE_DOG_STATSD": "1"}, `USE_DOG_STATSD="1": and USE_STATSD=true both push to STATSD_HOST:STATSD_PORT: set USE_STATSD=false for DogStatsD`},
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
		{map[string]string{"EXTRA_TAGS": "v:1:2"}, `EXTRA_TAGS="v:1:2": want key:value pairs separated by commas, one colon each`},
		{map[string]string{"STATSD_PORT": "statsd"}, `STATSD_PORT="statsd": want a port number, 0 to 65535`},
		{map[string]string{"STATS_FLUSH_INTERVAL": "10"}, `STATS_FLUSH_INTERVAL="10": want a duration such as 500ms, 10s or 1h, not negative`},
		{map[string]string{"STATS_FLUSH_INTERVAL": "0s"}, `STATS_FLUSH_INTERVAL="0s": want a duration above zero, such as 10s`},
		{map[string]string{"USE_DOG_STATSD": "true", "USE_DOG_STATSD_MOGRIFIERS": "hits"}, `DOG_STATSD_MOGRIFIER_HITS_PATTERN="": want the regular expression of the stat names to mogrify, for USE_DOG_STATSD_MOGRIFIERS`},
		{map[string]string{"USE_DOG_STATSD": "true", "USE_DOG_STATSD_MOGRIFIERS": "hits", "DOG_STATSD_MOGRIFIER_HITS_PATTERN": "^a(.*)$"}, `DOG_STATSD_MOGRIFIER_HITS_NAME="": want the name of the stats the pattern matches`},
		{map[string]string{"USE_DOG_STATSD": "true", "USE_DOG_STATSD_MOGRIFIERS": "hits", "DOG_STATSD_MOGRIFIER_HITS_PATTERN": "^a(.*$", "DOG_STATSD_MOGRIFIER_HITS_NAME": "a"}, `DOG_STATSD_MOGRIFIER_HITS_PATTERN="^a(.*$": want a regular expression (Go's syntax, as there): `},
		{map[string]string{"USE_DOG_STATSD": "true", "USE_DOG_STATSD_MOGRIFIERS": "hits", "DOG_STATSD_MOGRIFIER_HITS_PATTERN": "^a(.*)$", "DOG_STATSD_MOGRIFIER_HITS_NAME": "a", "DOG_STATSD_MOGRIFIER_HITS_TAGS": "k"}, `DOG_STATSD_MOGRIFIER_HITS_TAGS="k": want key:value pairs separated by commas, one colon each, neither empty`},
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
		{map[string]string{"TRACING_ENABLED": "yes"}, `TRACING_ENABLED="yes": want true or false`},
		{map[string]string{"TRACING_SAMPLING_RATE": "half"}, `TRACING_SAMPLING_RATE="half": want a number, from 0 (no trace started here is sampled) to 1 (all are)`},
		// Checked by the flag it becomes, and refused in its own name.
		{map[string]string{"USE_PROMETHEUS": "true", "PROMETHEUS_PATH": "metrics"}, `PROMETHEUS_PATH="metrics": want a path that starts with /`},
		{map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_NODE_METADATA": "zone"}, `CONFIG_GRPC_XDS_NODE_METADATA="zone": want comma-separated key=value pairs, such as a=1,b=2`},
		{map[string]string{"TRACING_ENABLED": "true", "TRACING_EXPORTER_PROTOCOL": "GRPC"}, `TRACING_EXPORTER_PROTOCOL="GRPC": want http or grpc`},
	} {
		_, err := Environment(env(c.vars), server.CommandLine(server.Help{}))
		if err == nil || strings.Contains(err.Error(), "\n") || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%v: got %v, want the one line\n%s", c.vars, err, c.want)
		}
	}
}

// Every flag the drop-in translates to is one the server has: a test that
// fails until every flag named in the tables has landed.
func TestDropInFlagsExist(t *testing.T) {
	fs := server.CommandLine(server.Help{}).FS
	for _, vars := range []map[string]string{
		{"CONFIG_TYPE": "FILE", "USE_PROMETHEUS": "true", "PROMETHEUS_MAPPER_YAML": "/m.yaml", "DISABLE_STATS": "true", "NEAR_LIMIT_RATIO": "0.5",
			"GRPC_SERVER_USE_TLS": "true", "GRPC_SERVER_TLS_CERT": "/c", "GRPC_SERVER_TLS_KEY": "/k", "GRPC_CLIENT_TLS_CACERT": "/ca",
			"REDIS_SOCKET_TYPE": "tcp", "REDIS_TYPE": "sentinel", "REDIS_URL": "m,s:1", "REDIS_AUTH": "u:p", "REDIS_SENTINEL_AUTH": "sp",
			"REDIS_TLS": "true", "REDIS_TLS_CACERT": "/ca", "REDIS_POOL_SIZE": "3", "REDIS_TIMEOUT": "1s", "CACHE_KEY_PREFIX": "p",
			"LOCAL_CACHE_SIZE_IN_BYTES": "1", "MERGE_DOMAIN_CONFIG": "true", "SHADOW_MODE": "true", "QUOTA_MODE": "true",
			"RESPONSE_DYNAMIC_METADATA": "true", "LIMIT_RESPONSE_HEADERS_ENABLED": "true", "LIMIT_LIMIT_HEADER": "a",
			"LIMIT_REMAINING_HEADER": "b", "LIMIT_RESET_HEADER": "c", "TRACING_ENABLED": "true", "TRACING_SERVICE_NAME": "s",
			"TRACING_SERVICE_NAMESPACE": "ns", "TRACING_SERVICE_INSTANCE_ID": "pod", "TRACING_EXPORTER_PROTOCOL": "grpc", "TRACING_SAMPLING_RATE": "0.5"},
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
