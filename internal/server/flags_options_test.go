package server

import (
	"strings"
	"testing"
	"time"
)

// The flags of issue #4 (items 6 and 7): gRPC TLS, connection age, Redis
// keys and pool, and what callers may do.

func TestNewFlagsDefaults(t *testing.T) {
	o, err := parseFlags(nil, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if o.grpcTLSCert != "" || o.grpcTLSKey != "" || o.grpcTLSClientCA != "" || o.grpcMaxConnectionAge != 0 {
		t.Errorf("gRPC TLS and age defaults = %q %q %q %s, want off", o.grpcTLSCert, o.grpcTLSKey, o.grpcTLSClientCA, o.grpcMaxConnectionAge)
	}
	if o.redisKeyPrefix != "rls:" || o.redisPoolSize != 0 {
		t.Errorf("redis defaults = %q, %d; want rls: and 0", o.redisKeyPrefix, o.redisPoolSize)
	}
	if o.shadowMode || !o.jsonEndpoint || !o.negativeHits || o.hashValues {
		t.Errorf("shadow %v json %v negative %v hash %v; want false true true false", o.shadowMode, o.jsonEndpoint, o.negativeHits, o.hashValues)
	}
}

func TestNewFlagsCommandLine(t *testing.T) {
	o, err := parseFlags([]string{
		"-grpc-tls-cert", "c.pem", "-grpc-tls-key", "k.pem", "-grpc-tls-client-ca", "ca.pem",
		"-grpc-max-connection-age", "30m",
		"-redis-key-prefix", "team-a:", "-redis-pool-size", "64",
		"-shadow-mode", "-json-endpoint=false", "-negative-hits=false", "-hash-values",
	}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if o.grpcTLSCert != "c.pem" || o.grpcTLSKey != "k.pem" || o.grpcTLSClientCA != "ca.pem" || o.grpcMaxConnectionAge != 30*time.Minute {
		t.Errorf("gRPC: %q %q %q %s", o.grpcTLSCert, o.grpcTLSKey, o.grpcTLSClientCA, o.grpcMaxConnectionAge)
	}
	if o.redisKeyPrefix != "team-a:" || o.redisPoolSize != 64 {
		t.Errorf("redis: %q %d", o.redisKeyPrefix, o.redisPoolSize)
	}
	if !o.shadowMode || o.jsonEndpoint || o.negativeHits || !o.hashValues {
		t.Errorf("shadow %v json %v negative %v hash %v; want true false false true", o.shadowMode, o.jsonEndpoint, o.negativeHits, o.hashValues)
	}
}

// TestNewFlagsEnvironment: every new flag has its RLS_ twin, and the
// command line wins over it.
func TestNewFlagsEnvironment(t *testing.T) {
	vars := map[string]string{
		"RLS_GRPC_TLS_CERT":           "c.pem",
		"RLS_GRPC_TLS_KEY":            "k.pem",
		"RLS_GRPC_TLS_CLIENT_CA":      "ca.pem",
		"RLS_GRPC_MAX_CONNECTION_AGE": "5m",
		"RLS_REDIS_KEY_PREFIX":        "env:",
		"RLS_REDIS_POOL_SIZE":         "32",
		"RLS_SHADOW_MODE":             "true",
		"RLS_JSON_ENDPOINT":           "false",
		"RLS_NEGATIVE_HITS":           "false",
		"RLS_HASH_VALUES":             "1",
	}
	o, err := parseFlags(nil, env(vars))
	if err != nil {
		t.Fatal(err)
	}
	if o.grpcTLSCert != "c.pem" || o.grpcTLSKey != "k.pem" || o.grpcTLSClientCA != "ca.pem" || o.grpcMaxConnectionAge != 5*time.Minute {
		t.Errorf("gRPC from the environment: %q %q %q %s", o.grpcTLSCert, o.grpcTLSKey, o.grpcTLSClientCA, o.grpcMaxConnectionAge)
	}
	if o.redisKeyPrefix != "env:" || o.redisPoolSize != 32 {
		t.Errorf("redis from the environment: %q %d", o.redisKeyPrefix, o.redisPoolSize)
	}
	if !o.shadowMode || o.jsonEndpoint || o.negativeHits || !o.hashValues {
		t.Errorf("from the environment: shadow %v json %v negative %v hash %v", o.shadowMode, o.jsonEndpoint, o.negativeHits, o.hashValues)
	}

	o, err = parseFlags([]string{"-redis-key-prefix", "cli:", "-shadow-mode=false", "-json-endpoint", "-redis-pool-size", "8"}, env(vars))
	if err != nil {
		t.Fatal(err)
	}
	if o.redisKeyPrefix != "cli:" || o.shadowMode || !o.jsonEndpoint || o.redisPoolSize != 8 {
		t.Errorf("the command line did not win: prefix %q shadow %v json %v pool %d", o.redisKeyPrefix, o.shadowMode, o.jsonEndpoint, o.redisPoolSize)
	}

	// An empty variable is unset: the default prefix stays.
	o, err = parseFlags(nil, env(map[string]string{"RLS_REDIS_KEY_PREFIX": "", "RLS_SHADOW_MODE": ""}))
	if err != nil {
		t.Fatal(err)
	}
	if o.redisKeyPrefix != "rls:" || o.shadowMode {
		t.Errorf("empty variables changed prefix %q, shadow %v", o.redisKeyPrefix, o.shadowMode)
	}
}

func TestNewFlagsErrors(t *testing.T) {
	tests := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"-grpc-tls-cert", "c.pem"}, nil, "go together"},
		{[]string{"-grpc-tls-key", "k.pem"}, nil, "go together"},
		{[]string{"-grpc-tls-client-ca", "ca.pem"}, nil, "needs -grpc-tls-cert"},
		{[]string{"-grpc-max-connection-age", "-1s"}, nil, "-grpc-max-connection-age"},
		{[]string{"-redis-pool-size", "-1"}, nil, "-redis-pool-size"},
		{[]string{"-redis-key-prefix", ""}, nil, "must not be empty"},
		{[]string{"-redis-key-prefix", "a{b}:"}, nil, "hash tag"},
		{nil, map[string]string{"RLS_SHADOW_MODE": "maybe"}, "RLS_SHADOW_MODE"},
		{nil, map[string]string{"RLS_REDIS_POOL_SIZE": "many"}, "RLS_REDIS_POOL_SIZE"},
		{nil, map[string]string{"RLS_GRPC_MAX_CONNECTION_AGE": "30"}, "RLS_GRPC_MAX_CONNECTION_AGE"},
	}
	for _, tt := range tests {
		_, err := parseFlags(tt.args, env(tt.env))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("parseFlags(%q, %v) = %v, want an error mentioning %q", tt.args, tt.env, err, tt.want)
		}
	}
}
