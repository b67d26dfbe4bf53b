package server

import (
	"strings"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

func env(kv map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := kv[k]; return v, ok }
}

func TestFlagsDefaults(t *testing.T) {
	o, err := parseFlags(nil, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if o.configPath != "config/limits.yaml" || o.grpcAddr != ":8081" || o.httpAddr != ":8080" ||
		o.debugAddr != "127.0.0.1:6070" || o.storeTimeout != 50*time.Millisecond ||
		o.failureMode != config.FailAllow || o.maxDelay != time.Second || o.logFormat != "json" {
		t.Errorf("defaults = %+v", o)
	}
}

func TestFlagsEnvironment(t *testing.T) {
	o, err := parseFlags([]string{"-grpc-addr", ":9000"}, env(map[string]string{
		"RLS_GRPC_ADDR":     ":1",
		"RLS_HTTP_ADDR":     ":9001",
		"RLS_DEBUG_ADDR":    "",
		"RLS_STORE_TIMEOUT": "20ms",
		"RLS_FAILURE_MODE":  "deny",
		"RLS_LOG_LEVEL":     "", // empty is unset for a flag where empty means nothing
	}))
	if err != nil {
		t.Fatal(err)
	}
	if o.grpcAddr != ":9000" {
		t.Errorf("grpc-addr = %q, want the command line's :9000", o.grpcAddr)
	}
	if o.httpAddr != ":9001" || o.storeTimeout != 20*time.Millisecond || o.failureMode != config.FailDeny {
		t.Errorf("environment not applied: %+v", o)
	}
	if o.debugAddr != "" {
		t.Errorf("RLS_DEBUG_ADDR=\"\" left debug-addr %q, want it off", o.debugAddr)
	}
	if o.logLevel != "info" {
		t.Errorf("RLS_LOG_LEVEL=\"\" changed log-level to %q", o.logLevel)
	}
}

func TestFlagsErrors(t *testing.T) {
	tests := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"-redis-url", "redis://a", "-redis-cluster", "b:1"}, nil, "both set"},
		{[]string{"-redis-url", "redis://a", "-redis-sentinel", "b:1", "-redis-sentinel-master", "m"}, nil, "-redis-url and -redis-sentinel are both set"},
		{[]string{"-redis-url", "redis://a", "-redis-cluster", "b:1", "-redis-sentinel", "c:1"}, nil, "-redis-url, -redis-cluster and -redis-sentinel are all set"},
		{[]string{"-redis-sentinel", "b:1"}, nil, "needs -redis-sentinel-master"},
		{nil, map[string]string{"RLS_REDIS_SENTINEL_MASTER": "m"}, "needs -redis-sentinel,"},
		{nil, map[string]string{"RLS_FAILURE_MODE": "sometimes"}, "RLS_FAILURE_MODE"},
		{[]string{"-failure-mode", "sometimes"}, nil, `-failure-mode "sometimes": want allow, deny, local or error`},
		{[]string{"-log-format", "xml"}, nil, `-log-format "xml": want json or console`},
		{[]string{"-store-timeout", "0s"}, nil, "-store-timeout"},
		{[]string{"serve"}, nil, "unexpected argument"},
	}
	for _, tt := range tests {
		_, err := parseFlags(tt.args, env(tt.env))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("parseFlags(%q, %v) = %v, want an error mentioning %q", tt.args, tt.env, err, tt.want)
		}
	}
}

// -redis-url takes a bare host:port, as the drop-in's REDIS_URL and
// redis-cli do; a URL is kept as it is.
func TestRedisURLHostPort(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:6379":         "redis://127.0.0.1:6379",
		"redis:6379":             "redis://redis:6379",
		"[::1]:6379":             "redis://[::1]:6379",
		"redis://u:p@r:6379/2":   "redis://u:p@r:6379/2",
		"rediss://r:6380":        "rediss://r:6380",
		"redis-without-a-port":   "redis-without-a-port",
		"unix:///run/redis.sock": "unix:///run/redis.sock",
	} {
		o, err := parseFlags([]string{"-redis-url", in}, env(nil))
		if err != nil {
			t.Errorf("-redis-url %s: %v", in, err)
			continue
		}
		if o.redisURL != want {
			t.Errorf("-redis-url %s: got %q, want %q", in, o.redisURL, want)
		}
	}
}

// An RLS_ variable that is no flag's twin is noted for the start's warning,
// with the twin it most likely meant.
func TestNoteEnvironment(t *testing.T) {
	o := &Options{}
	o.NoteEnvironment([]string{"RLS_REDIS_ULR=redis:6379", "RLS_REDIS_URL=redis:6379", "HOME=/"})
	if want := []string{"RLS_REDIS_ULR is set but is no flag's twin: ignored, did you mean RLS_REDIS_URL?"}; len(o.envWarnings) != 1 || o.envWarnings[0] != want[0] {
		t.Errorf("warnings: got %q, want %q", o.envWarnings, want)
	}
}
