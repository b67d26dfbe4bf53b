package integration

import (
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
)

// forwardAuthLimits are the limits behind config/forward-auth.yaml's edge
// policy in these tests: 3 a day per client address, 5 a day per API key
// (a day: no window ends while a test runs, but at midnight UTC).
const forwardAuthLimits = `
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {name: per-ip, algorithm: fixed_window, unit: day, requests_per_unit: 3}
  - key: api_key
    rate_limit: {name: per-key, algorithm: fixed_window, unit: day, requests_per_unit: 5}
`

// startForwardAuth starts envoy-rls on redisURL with the documented
// forward-auth file, config/forward-auth.yaml (it trusts 127.0.0.1, where
// the proxies connect from).
func startForwardAuth(t *testing.T, redisURL string) *server {
	t.Helper()
	return startServer(t, writeConfig(t, forwardAuthLimits), "-redis-url", redisURL,
		"-forward-auth-config", filepath.Join(mustRoot(t), "config/forward-auth.yaml"))
}

// proxyKinds start each documented proxy in front of app, asking rls.
var proxyKinds = []struct {
	name  string
	start func(t *testing.T, rls, app string) string
}{
	{"nginx", func(t *testing.T, rls, app string) string { return startNginx(t, rls, app, false) }},
	{"caddy", func(t *testing.T, rls, app string) string { return startCaddy(t, rls, app, false) }},
}

// TestForwardAuthProxies: through real nginx and Caddy, with the
// documented configs, allowed requests reach the application with the
// rate limit headers on their response; the limit's next request is a 429
// from the proxy with Retry-After, and does not reach the application; the
// client is the address the proxy saw, whatever X-Forwarded-For it sends.
func TestForwardAuthProxies(t *testing.T) {
	for _, kind := range proxyKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			rls := startForwardAuth(t, redistest.Start(t).URL())
			a := startApp(t)
			proxy := kind.start(t, rls.httpAddr, a.addr)
			client := clientAt("127.0.0.5")
			for i, remaining := range []string{"2", "1", "0"} {
				got := getVia(t, client, proxy, "/items?page=1")
				if got.code != http.StatusOK || got.body != "app\n" {
					t.Fatalf("request %d: %d %q, want the app's 200", i, got.code, got.body)
				}
				checkRateLimitHeaders(t, got, remaining)
			}
			got := getVia(t, client, proxy, "/items")
			if got.code != http.StatusTooManyRequests {
				t.Fatalf("the limit's next request: %d %q, want 429", got.code, got.body)
			}
			checkRateLimitHeaders(t, got, "0")
			if s, err := strconv.Atoi(got.header.Get("Retry-After")); err != nil || s < 1 || s > 86400 {
				t.Errorf("Retry-After %q, want 1..86400 seconds", got.header.Get("Retry-After"))
			}
			if n := a.served.Load(); n != 3 {
				t.Errorf("the app served %d requests, want 3", n)
			}
			// Another client spoofing the exhausted address in
			// X-Forwarded-For is keyed on its own.
			got = getVia(t, clientAt("127.0.0.6"), proxy, "/items", "X-Forwarded-For", "127.0.0.5", "X-Real-IP", "127.0.0.5")
			if got.code != http.StatusOK {
				t.Fatalf("a spoofing client: %d, want 200 (its own quota)", got.code)
			}
			checkRateLimitHeaders(t, got, "2")
			// Straight to envoy-rls from an address that is no trusted
			// proxy: the header is ignored, and counted.
			got = getVia(t, clientAt("127.0.0.7"), rls.httpAddr, "/v1/forward-auth/edge", "X-Forwarded-For", "127.0.0.5", "X-Forwarded-Uri", "/items")
			if got.code != http.StatusOK || got.header.Get("X-RateLimit-Remaining") != "2" {
				t.Fatalf("an untrusted caller spoofing: %d remaining %q, want 200 and 2 (its own quota)", got.code, got.header.Get("X-RateLimit-Remaining"))
			}
			if v, _ := rls.metric(t, `rls_forward_auth_untrusted_forwarded_total{policy="edge"}`); v != 1 {
				t.Errorf("untrusted forwarded counted %v, want 1", v)
			}
			rls.stop(t)
		})
	}
}

// checkRateLimitHeaders checks the headers a proxy copied from the
// answer: the per-ip limit (3 a day) with remaining left.
func checkRateLimitHeaders(t *testing.T, got proxied, remaining string) {
	t.Helper()
	if l := got.header.Get("X-RateLimit-Limit"); !strings.HasPrefix(l, "3, 3;w=86400") {
		t.Errorf("X-RateLimit-Limit %q, want 3, 3;w=86400...", l)
	}
	if r := got.header.Get("X-RateLimit-Remaining"); r != remaining {
		t.Errorf("X-RateLimit-Remaining %q, want %s", r, remaining)
	}
	if r, err := strconv.Atoi(got.header.Get("X-RateLimit-Reset")); err != nil || r < 0 || r > 86400 {
		t.Errorf("X-RateLimit-Reset %q, want 0..86400", got.header.Get("X-RateLimit-Reset"))
	}
}

// TestForwardAuthSharedLimit: nginx and Caddy in front of two envoy-rls
// instances on one Redis share one limit exactly: of 12 requests of one
// API key, from 12 addresses, alternately through each, 5 are served.
func TestForwardAuthSharedLimit(t *testing.T) {
	t.Parallel()
	redisURL := redistest.Start(t).URL()
	a := startApp(t)
	nginx := startNginx(t, startForwardAuth(t, redisURL).httpAddr, a.addr, false)
	caddy := startCaddy(t, startForwardAuth(t, redisURL).httpAddr, a.addr, false)
	served := map[string]int{}
	for i := range 12 {
		proxy, name := nginx, "nginx"
		if i%2 == 1 {
			proxy, name = caddy, "caddy"
		}
		got := getVia(t, clientAt("127.0.0."+strconv.Itoa(20+i)), proxy, "/", "X-Api-Key", "shared")
		switch got.code {
		case http.StatusOK:
			served[name]++
		case http.StatusTooManyRequests:
		default:
			t.Fatalf("request %d via %s: %d %q", i, name, got.code, got.body)
		}
	}
	if total := served["nginx"] + served["caddy"]; total != 5 || a.served.Load() != 5 {
		t.Fatalf("served %v (%d in all, the app saw %d), want 5 in all", served, total, a.served.Load())
	}
	if served["nginx"] == 0 || served["caddy"] == 0 {
		t.Errorf("served %v: want both proxies to have served some", served)
	}
}

// TestForwardAuthServiceDown: with envoy-rls down, each proxy does what
// docs/forward-auth.md says: nginx answers 500 (fail closed), or serves
// the request with the config's fail-open line enabled; Caddy answers 502,
// or serves it with its fail-open lines enabled.
func TestForwardAuthServiceDown(t *testing.T) {
	t.Parallel()
	rls := startForwardAuth(t, redistest.Start(t).URL())
	a := startApp(t)
	nginx := startNginx(t, rls.httpAddr, a.addr, false)
	open := startNginx(t, rls.httpAddr, a.addr, true)
	caddy := startCaddy(t, rls.httpAddr, a.addr, false)
	caddyOpen := startCaddy(t, rls.httpAddr, a.addr, true)
	c := clientAt("127.0.0.40")
	for i, p := range []string{nginx, open, caddy, caddyOpen} {
		if got := getVia(t, clientAt("127.0.0."+strconv.Itoa(41+i)), p, "/"); got.code != http.StatusOK {
			t.Fatalf("via %s while envoy-rls is up: %d, want 200", p, got.code)
		}
	}
	rls.stop(t)
	for _, tc := range []struct {
		name, addr string
		code       int
	}{{"nginx", nginx, http.StatusInternalServerError}, {"nginx fail-open", open, http.StatusOK}, {"caddy", caddy, http.StatusBadGateway}, {"caddy fail-open", caddyOpen, http.StatusOK}} {
		if got := getVia(t, c, tc.addr, "/"); got.code != tc.code {
			t.Errorf("%s with envoy-rls down: %d %q, want %d", tc.name, got.code, got.body, tc.code)
		}
	}
	if n := a.served.Load(); n != 6 {
		t.Errorf("the app served %d, want 6 (4 while up, 2 failing open)", n)
	}
}

// TestForwardAuthStoreDown: with Redis down, forward-auth answers as the
// failure mode decides, as gRPC does: allow serves, deny refuses with the
// policy's status, error is a 503.
func TestForwardAuthStoreDown(t *testing.T) {
	t.Parallel()
	redis := redistest.Start(t)
	want := map[string]int{"allow": http.StatusOK, "deny": http.StatusTooManyRequests, "error": http.StatusServiceUnavailable}
	servers := map[string]*server{}
	for mode := range want {
		servers[mode] = startServer(t, writeConfig(t, forwardAuthLimits), "-redis-url", redis.URL(), "-failure-mode", mode,
			"-forward-auth-config", filepath.Join(mustRoot(t), "config/forward-auth.yaml"))
	}
	redis.Stop()
	for mode, code := range want {
		got := getVia(t, clientAt("127.0.0.50"), servers[mode].httpAddr, "/v1/forward-auth/edge", "X-Forwarded-Uri", "/")
		if got.code != code {
			t.Errorf("-failure-mode %s with Redis down: %d %q, want %d", mode, got.code, got.body, code)
		}
	}
	if v, _ := servers["error"].metric(t, `rls_forward_auth_total{outcome="error",policy="edge"}`); v != 1 {
		t.Errorf("-failure-mode error: counted %v errors, want 1", v)
	}
}

// TestForwardAuthNoDescriptor: a request for which no rule builds a
// descriptor is served with no rate limit headers through either proxy
// (none empty, none a placeholder left unfilled), and one for which a rule
// does gets them.
func TestForwardAuthNoDescriptor(t *testing.T) {
	policies := writeFile(t, t.TempDir(), "forward-auth.yaml", `
trusted_proxies: [127.0.0.1]
policies:
  - name: edge
    domain: edge
    rate_limits:
      - actions: [{request_headers: {header_name: x-api-key, descriptor_key: api_key}}]
`)
	for _, kind := range proxyKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			rls := startServer(t, writeConfig(t, forwardAuthLimits), "-forward-auth-config", policies)
			a := startApp(t)
			proxy := kind.start(t, rls.httpAddr, a.addr)
			got := getVia(t, clientAt("127.0.0.60"), proxy, "/")
			if got.code != http.StatusOK || got.body != "app\n" {
				t.Fatalf("without an API key: %d %q, want the app's 200", got.code, got.body)
			}
			for name := range got.header {
				if strings.HasPrefix(strings.ToLower(name), "x-ratelimit") {
					t.Errorf("without an API key: header %s: %q, want none", name, got.header.Get(name))
				}
			}
			got = getVia(t, clientAt("127.0.0.60"), proxy, "/", "X-Api-Key", "k")
			if got.code != http.StatusOK || got.header.Get("X-RateLimit-Remaining") != "4" {
				t.Errorf("with an API key: %d X-RateLimit-Remaining %q, want 200 and 4", got.code, got.header.Get("X-RateLimit-Remaining"))
			}
		})
	}
}

// TestForwardAuthSpoofedURI: a client that sends the forwarding headers
// itself (X-Forwarded-Uri, X-Original-URI, X-Forwarded-Method) through
// either proxy is keyed on its real path: the proxy's own values win.
func TestForwardAuthSpoofedURI(t *testing.T) {
	policies := writeFile(t, t.TempDir(), "forward-auth.yaml", `
trusted_proxies: [127.0.0.1]
policies:
  - name: edge
    domain: edge
    rate_limits:
      - actions: [{request_headers: {header_name: ":path", descriptor_key: path}}, {request_headers: {header_name: ":method", descriptor_key: method}}]
`)
	limits := writeConfig(t, `
domain: edge
descriptors:
  - key: path
    descriptors:
      - key: method
        rate_limit: {name: per-path, algorithm: fixed_window, unit: day, requests_per_unit: 1}
`)
	for _, kind := range proxyKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			rls := startServer(t, limits, "-forward-auth-config", policies)
			proxy := kind.start(t, rls.httpAddr, startApp(t).addr)
			c := clientAt("127.0.0.70")
			if got := getVia(t, c, proxy, "/a"); got.code != http.StatusOK {
				t.Fatalf("first GET /a: %d, want 200", got.code)
			}
			for i, spoof := range [][]string{
				{"X-Forwarded-Uri", "/b"}, {"X-Original-URI", "/c"}, {"X-Forwarded-Method", "PUT"}, {"X-Original-Method", "PATCH"},
				{"X-Forwarded-Uri", "/d", "X-Original-URI", "/e", "X-Forwarded-Method", "POST"},
			} {
				if got := getVia(t, c, proxy, "/a", spoof...); got.code != http.StatusTooManyRequests {
					t.Errorf("GET /a again, spoofing %v (%d): %d, want 429 (keyed on GET /a)", spoof, i, got.code)
				}
			}
		})
	}
}
