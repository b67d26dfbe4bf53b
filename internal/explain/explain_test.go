package explain

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	rlv3common "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
	"github.com/envoy-rls/envoy-rls/internal/server"
	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

// serveLimits is one hourly limit of one hit on k.
const serveLimits = `
domain: test
descriptors:
  - key: k
    rate_limit: {name: one, algorithm: fixed_window, unit: hour, requests_per_unit: 1}
`

// env is a lookup of the environment vars.
func env(vars map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

func writeServeLimits(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "limits.yaml")
	if err := os.WriteFile(path, []byte(serveLimits), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func runExplain(t *testing.T, vars map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr strings.Builder
	code := Command(args, env(vars), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestExplainCommandEmbedded(t *testing.T) {
	cfg := writeServeLimits(t)
	code, out, errOut := runExplain(t, nil, "-config", cfg, "test", "k=a")
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	for _, want := range []string{
		"store:      embedded (this command's own: the state is empty",
		"domain:     test (" + cfg + ")\n",
		"descriptor: k=a\n",
		"  1. k=a: bare key k (one counter per value) -> node k (line ",
		"  [0] one: fixed_window, 1 per hour, failure mode allow (the service's), shadow false",
		"      key:   rls:{",
		"      state: remaining 1 of 1, reset 0s; a request of cost 1 would be allowed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	code, out, _ = runExplain(t, nil, "-json", "-config", cfg, "test", "k=a", "x=y=z")
	var ex rls.Explanation
	if err := json.Unmarshal([]byte(out), &ex); code != 0 || err != nil {
		t.Fatalf("-json: exit %d, %v:\n%s", code, err, out)
	}
	if ex.Domain != "test" || len(ex.Entries) != 2 || ex.Entries[1].Value != "y=z" || len(ex.Levels) != 2 || ex.Levels[1].Match != rls.MatchNone {
		t.Errorf("-json: %s", out)
	}

	// Flags may follow the arguments; after --, everything is an entry.
	for _, args := range [][]string{
		{"-config", cfg, "test", "k=a", "-json"},
		{"test", "-json", "k=a", "-config", cfg},
		{"test", "k=a", "-config=" + cfg, "--json"},
	} {
		code, out, errOut := runExplain(t, nil, args...)
		if err := json.Unmarshal([]byte(out), &ex); code != 0 || err != nil || ex.Domain != "test" || len(ex.Entries) != 1 {
			t.Errorf("explain %q: exit %d, %v, stderr %q:\n%s", args, code, err, errOut, out)
		}
	}
	if code, _, errOut := runExplain(t, nil, "-config", cfg, "test", "k=a", "--", "-json"); code != 2 || !strings.Contains(errOut, `entry "-json": want key=value`) {
		t.Errorf("an entry after --: exit %d, stderr %q; want 2 and the entry refused", code, errOut)
	}

	// The server's RLS_ variables apply; flags win over them.
	code, out, _ = runExplain(t, map[string]string{"RLS_CONFIG": cfg, "RLS_REDIS_KEY_PREFIX": "env:", "RLS_HASH_VALUES": "true"}, "test", "k=a")
	if code != 0 || !strings.Contains(out, "key:   env:{") || strings.Contains(out, "1:a") {
		t.Errorf("from the environment: exit %d\n%s", code, out)
	}
	code, out, _ = runExplain(t, map[string]string{"RLS_CONFIG": cfg, "RLS_REDIS_KEY_PREFIX": "env:"}, "-redis-key-prefix", "cli:", "test", "k=a")
	if code != 0 || !strings.Contains(out, "key:   cli:{") {
		t.Errorf("flag over the environment: exit %d\n%s", code, out)
	}
}

func TestExplainCommandErrors(t *testing.T) {
	cfg := writeServeLimits(t)
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("domain: test\ndescriptors:\n  - key: k\n    rate_limti: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		vars map[string]string
		code int
		want string
	}{
		{nil, nil, 2, "usage: envoy-rls explain"},
		{[]string{"-config", cfg, "test"}, nil, 2, "usage: envoy-rls explain"},
		{[]string{"-config", cfg, "test", "novalue"}, nil, 2, `entry "novalue": want key=value`},
		{[]string{"-config", cfg, "test", "=v"}, nil, 2, `entry "=v"`},
		{[]string{"-nope", "test", "k=v"}, nil, 2, "flag provided but not defined"},
		{[]string{"-config", cfg, "-redis-url", "redis://a:1", "-redis-cluster", "b:1", "test", "k=v"}, nil, 2, "both set"},
		{[]string{"-config", cfg, "test", "k=v"}, map[string]string{"RLS_REDIS_SENTINEL": "a:1"}, 2, "needs -redis-sentinel-master"},
		{[]string{"-config", cfg, "test", "k=v"}, map[string]string{"RLS_FAILURE_MODE": "maybe"}, 2, `RLS_FAILURE_MODE="maybe": want allow, deny, local or error`},
		{[]string{"-config", cfg, "test", "k=v"}, map[string]string{"RLS_STORE_TIMEOUT": "abc"}, 2, `RLS_STORE_TIMEOUT="abc": want a duration such as 50ms or 1s`},
		{[]string{"-config", cfg, "test", "k=v", "-store-timeout", "50"}, nil, 2, `-store-timeout "50": want a duration such as 50ms or 1s`},
		{[]string{"-config", cfg, "test", "k=v", "-hash-values=maybe"}, nil, 2, `-hash-values "maybe": want true or false`},
		{[]string{"-config", cfg, "-redis-key-prefix", "a{", "test", "k=v"}, nil, 2, "-redis-key-prefix"},
		{[]string{"-config", bad, "test", "k=v"}, nil, 1, "rate_limti"},
		{[]string{"-config", filepath.Join(t.TempDir(), "missing.yaml"), "test", "k=v"}, nil, 1, "missing.yaml"},
		{[]string{"-config", cfg, "-addr", "http://127.0.0.1:1", "test", "k=v"}, nil, 2, "give -rlqs too"},
		{[]string{"-config", cfg, "-rlqs", "test", "k=v", "k=w"}, nil, 2, `key "k" given twice`},
		{[]string{"-config", cfg, "-rlqs", "test"}, nil, 2, "want DOMAIN and at least one key=value"},
		{[]string{"-rlqs", "-addr", "nourl", "test", "k=v"}, nil, 1, `-addr "nourl": want a URL`},
		{[]string{"-rlqs", "-addr", "http://127.0.0.1:1", "test", "k=v"}, nil, 1, "envoy-rls explain:"},
		{[]string{"-config", bad, "-rlqs", "test", "k=v"}, nil, 1, "rate_limti"},
		// The server's RLS_RLQS (serve RLQS) does not make explain's -rlqs.
		{[]string{"-config", cfg, "test", "k=v", "k=w"}, map[string]string{"RLS_RLQS": "true"}, 0, ""},
	} {
		code, _, errOut := runExplain(t, tc.vars, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("explain %q: exit %d, stderr %q; want %d and %q", tc.args, code, errOut, tc.code, tc.want)
		}
	}
	// Help is not an error: it goes to stdout, with the environment twins
	// (but -json's, which the server does not have).
	code, out, errOut := runExplain(t, nil, "-h")
	if code != 0 || errOut != "" || !strings.Contains(out, "usage: envoy-rls explain [flags] [-rlqs [-addr URL]] DOMAIN") ||
		!strings.Contains(out, "  -redis-url string  (RLS_REDIS_URL, default empty)") ||
		!strings.Contains(out, "  -store-timeout duration  (RLS_STORE_TIMEOUT, default 1s)") ||
		!strings.Contains(out, "  -json  (default false)") || !strings.Contains(out, "  -rlqs  (default false)") ||
		!strings.Contains(out, "  -rlqs-report-interval duration  (RLS_RLQS_REPORT_INTERVAL, default 5s)") {
		t.Errorf("-h: exit %d, stderr %q, stdout:\n%s", code, errOut, out)
	}
}

// hit spends one hit of k=value on the service the server would build
// on the Redis at url, and reports whether it was allowed.
func hit(t *testing.T, url, cfgPath, value string) bool {
	t.Helper()
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o := server.ExplainFlags(fs)
	if err := fs.Parse([]string{"-config", cfgPath, "-redis-url", url}); err != nil {
		t.Fatal(err)
	}
	cfg, err := o.LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	svc, closeStore, err := o.NewService(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore() //nolint:errcheck // a test's store
	req := &rlsv3.RateLimitRequest{Domain: "test", Descriptors: []*rlv3common.RateLimitDescriptor{{Entries: []*rlv3common.RateLimitDescriptor_Entry{{Key: "k", Value: value}}}}}
	resp, err := svc.ShouldRateLimit(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.OverallCode == rlsv3.RateLimitResponse_OK
}

// TestExplainCommandRedis: with -redis-url, explain peeks the state a
// server keeps in Redis, and consumes none of it.
func TestExplainCommandRedis(t *testing.T) {
	r := redistest.Start(t)
	cfg := writeServeLimits(t)

	if !hit(t, r.URL(), cfg, "a") {
		t.Fatal("first hit: refused")
	}
	for range 2 {
		code, out, errOut := runExplain(t, nil, "-config", cfg, "-redis-url", r.URL(), "test", "k=a")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		for _, want := range []string{"store:      Redis " + r.URL(), "state: remaining 0 of 1, reset ", "a request would be refused", "refused (OVER_LIMIT) by one"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
	}
	// Another value has its own counter.
	if _, out, _ := runExplain(t, map[string]string{"RLS_REDIS_URL": r.URL()}, "-config", cfg, "test", "k=b"); !strings.Contains(out, "remaining 1 of 1") {
		t.Errorf("k=b:\n%s", out)
	}
	// The peeks consumed nothing: a second value still gets its one hit.
	if !hit(t, r.URL(), cfg, "b") {
		t.Error("k=b after the peeks: refused")
	}

	// A store that does not answer: the state is unknown, exit 1.
	r.Stop()
	code, out, _ := runExplain(t, nil, "-config", cfg, "-redis-url", r.URL(), "-store-timeout", "200ms", "test", "k=a")
	if code != 1 || !strings.Contains(out, "state: unknown, the store failed") {
		t.Errorf("Redis down: exit %d\n%s", code, out)
	}
}
