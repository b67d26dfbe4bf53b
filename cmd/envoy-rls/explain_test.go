package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/grpc/credentials/insecure"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

// The explain subcommand, the /explain endpoint and the service's own
// headers, as the binary wires them (issue #5, items 6 and 7).

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
	code := run(append([]string{"explain"}, args...), env(vars), &stdout, &stderr)
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
	} {
		code, _, errOut := runExplain(t, tc.vars, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("explain %q: exit %d, stderr %q; want %d and %q", tc.args, code, errOut, tc.code, tc.want)
		}
	}
	// Help is not an error: it goes to stdout, with the environment twins
	// (but -json's, which the server does not have).
	code, out, errOut := runExplain(t, nil, "-h")
	if code != 0 || errOut != "" || !strings.Contains(out, "usage: envoy-rls explain [flags] DOMAIN") ||
		!strings.Contains(out, "  -redis-url string  (RLS_REDIS_URL, default empty)") ||
		!strings.Contains(out, "  -store-timeout duration  (RLS_STORE_TIMEOUT, default 1s)") ||
		!strings.Contains(out, "  -json  (default false)") {
		t.Errorf("-h: exit %d, stderr %q, stdout:\n%s", code, errOut, out)
	}
}

// TestExplainCommandRedis: with -redis-url, explain peeks the state a
// server keeps in Redis, and consumes none of it.
func TestExplainCommandRedis(t *testing.T) {
	r := redistest.Start(t)
	s := startInProcess(t, "-redis-url", r.URL())
	cfg := writeServeLimits(t)

	if code, body := s.postJSON(t, jsonRequest("a", "")); code != http.StatusOK {
		t.Fatalf("first hit: %d %s", code, body)
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
	if code, body := s.postJSON(t, jsonRequest("b", "")); code != http.StatusOK {
		t.Errorf("k=b after the peeks: %d %s", code, body)
	}

	// A store that does not answer: the state is unknown, exit 1.
	r.Stop()
	code, out, _ := runExplain(t, nil, "-config", cfg, "-redis-url", r.URL(), "-store-timeout", "200ms", "test", "k=a")
	if code != 1 || !strings.Contains(out, "state: unknown, the store failed") {
		t.Errorf("Redis down: exit %d\n%s", code, out)
	}
}

func TestExplainEndpointFlag(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want int
	}{
		{nil, http.StatusOK},
		{[]string{"-explain-endpoint=false"}, http.StatusNotFound},
	} {
		s := startInProcess(t, tc.args...)
		s.postJSON(t, jsonRequest("a", ""))
		code, body := httpDo(t, "GET", "http://"+s.httpAddr+"/explain?domain=test&descriptor=k=a", "")
		if code != tc.want {
			t.Errorf("%v: /explain %d, want %d", tc.args, code, tc.want)
		}
		if code == http.StatusOK && !strings.Contains(body, "state: remaining 0 of 1") {
			t.Errorf("%v: /explain:\n%s", tc.args, body)
		}
	}
}

// TestResponseHeadersFlags: over the server's real gRPC listener, the
// headers and the 429 body appear exactly when their flags ask.
func TestResponseHeadersFlags(t *testing.T) {
	t.Parallel()
	wait := regexp.MustCompile(`^"one";r=0;t=([0-9]+)$`)
	for _, tc := range []struct {
		args          []string
		headers, body bool
	}{
		{nil, false, false},
		{[]string{"-response-headers"}, true, false},
		{[]string{"-json-429-body"}, false, true},
		{[]string{"-response-headers", "-json-429-body"}, true, true},
	} {
		s := startInProcess(t, tc.args...)
		conn := grpcDial(t, s.grpcAddr, insecure.NewCredentials())
		first, err := grpcCall(conn, "a")
		if err != nil {
			t.Fatal(err)
		}
		refused, err := grpcCall(conn, "a")
		if err != nil {
			t.Fatal(err)
		}
		h := map[string]string{}
		for _, hv := range refused.GetResponseHeadersToAdd() {
			h[hv.GetKey()] = hv.GetValue()
		}
		if got := len(first.GetResponseHeadersToAdd()) > 0; got != tc.headers {
			t.Errorf("%v: allowed answer has headers %v, want %v", tc.args, first.GetResponseHeadersToAdd(), tc.headers)
		}
		if tc.headers {
			m := wait.FindStringSubmatch(h["RateLimit"])
			if h["RateLimit-Policy"] != `"one";q=1;w=3600` || m == nil || h["Retry-After"] != m[1] {
				t.Errorf("%v: refused headers %v", tc.args, h)
			}
		} else if h["RateLimit"] != "" || h["RateLimit-Policy"] != "" || h["Retry-After"] != "" {
			t.Errorf("%v: headers %v without -response-headers", tc.args, h)
		}
		body := string(refused.GetRawBody())
		if tc.body {
			if !regexp.MustCompile(`^\{"error":"rate limited","retry_after_seconds":[0-9]+,"limit":"one"\}$`).MatchString(body) ||
				h["content-type"] != "application/json" {
				t.Errorf("%v: body %q, headers %v", tc.args, body, h)
			}
		} else if body != "" || h["content-type"] != "" {
			t.Errorf("%v: body %q, headers %v without -json-429-body", tc.args, body, h)
		}
	}
}

func TestResponseHeadersFlagsParse(t *testing.T) {
	o, err := parseFlags(nil, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if o.responseHeaders || o.json429Body || !o.explainEndpoint {
		t.Errorf("defaults: headers %v body %v explain %v; want false false true", o.responseHeaders, o.json429Body, o.explainEndpoint)
	}
	vars := map[string]string{"RLS_RESPONSE_HEADERS": "true", "RLS_JSON_429_BODY": "1", "RLS_EXPLAIN_ENDPOINT": "false"}
	if o, err = parseFlags(nil, env(vars)); err != nil {
		t.Fatal(err)
	}
	if !o.responseHeaders || !o.json429Body || o.explainEndpoint {
		t.Errorf("from the environment: headers %v body %v explain %v", o.responseHeaders, o.json429Body, o.explainEndpoint)
	}
	if o, err = parseFlags([]string{"-response-headers=false", "-explain-endpoint"}, env(vars)); err != nil {
		t.Fatal(err)
	}
	if o.responseHeaders || !o.json429Body || !o.explainEndpoint {
		t.Errorf("flags over the environment: headers %v body %v explain %v", o.responseHeaders, o.json429Body, o.explainEndpoint)
	}
	if _, err := parseFlags(nil, env(map[string]string{"RLS_RESPONSE_HEADERS": "perhaps"})); err == nil || !strings.Contains(err.Error(), "RLS_RESPONSE_HEADERS") {
		t.Errorf("a bad RLS_RESPONSE_HEADERS: %v", err)
	}
}

// TestStoreDescription: explain names the store it reads, never a password.
func TestStoreDescription(t *testing.T) {
	for _, tc := range []struct {
		o    options
		want string
	}{
		{options{}, "embedded (this command's own"},
		{options{redisURL: "redis://user:secret@r:6379/0"}, "Redis redis://user:xxxxx@r:6379/0"},
		{options{redisCluster: "a:1,b:2"}, "Redis Cluster a:1,b:2"},
		{options{redisSentinel: "s:26379", redisSentinelMaster: "main", redisSentinelPassword: "secret"}, "Redis master main of Sentinels s:26379"},
	} {
		got := storeDescription(&tc.o)
		if !strings.HasPrefix(got, tc.want) || strings.Contains(got, "secret") {
			t.Errorf("storeDescription(%+v) = %q, want it to start with %q and hold no password", tc.o, got, tc.want)
		}
	}
}
