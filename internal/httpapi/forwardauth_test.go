package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/envoy-rls/envoy-rls/internal/forwardauth"
)

const forwardAuthLimits = `
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {name: per-ip, unit: minute, requests_per_unit: 3}
  - key: api_key
    rate_limit: {name: per-key, unit: minute, requests_per_unit: 2}
`

const forwardAuthPolicies = `
policies:
  - name: edge
    domain: edge
    rate_limits:
      - actions: [{remote_address: {}}]
  - name: keys
    domain: edge
    refused_status: 403
    rate_limits:
      - actions: [{request_headers: {header_name: x-api-key, descriptor_key: api_key}}]
      - actions: [{request_headers: {header_name: ":path", descriptor_key: path}}]
  - name: optional
    domain: edge
    rate_limits:
      - actions: [{request_headers: {header_name: x-api-key, descriptor_key: api_key}}]
  - name: typo
    domain: egde
    rate_limits:
      - actions: [{remote_address: {}}]
`

// forwardAuthServer is a real HTTP server of the API with forward-auth
// over an rls.Service on the embedded store, trusting proxies (a YAML
// list), and what it counted, as "policy outcome" lines.
func forwardAuthServer(t *testing.T, proxies string) (string, func() []string) {
	t.Helper()
	svc, _ := memoryService(t, forwardAuthLimits)
	cfg, err := forwardauth.Parse("fa.yaml", []byte("trusted_proxies: "+proxies+"\n"+forwardAuthPolicies))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var counted []string
	count := func(s string) { mu.Lock(); counted = append(counted, s); mu.Unlock() }
	fa := &ForwardAuth{
		Config:      func() *forwardauth.Config { return cfg },
		KnownDomain: func(d string) bool { return svc.Index().Known(d) },
		Count:       func(p, o string) { count(p + " " + o) },
		Ignored:     func(p string) { count(p + " ignored") },
	}
	srv := httptest.NewServer(Handler(Options{Limiter: svc, ConfigLines: func() []string { return nil }, ForwardAuth: fa}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := counted
		counted = nil
		return out
	}
}

// forwardCall sends method to url with headers (name, value, ...), and
// returns the status, the response's headers and its body.
func forwardCall(t *testing.T, method, url string, header ...string) (int, http.Header, string) {
	t.Helper()
	return roundTrip(t, method, url, nil, header...)
}

// TestForwardAuthDecides: allowed calls are 200 with the rate limit
// headers and an empty body, the limit's next call is 429 with
// Retry-After, and each is counted once.
func TestForwardAuthDecides(t *testing.T) {
	url, counted := forwardAuthServer(t, "[]")
	for i, wantRemaining := range []string{"2", "1", "0"} {
		code, h, body := forwardCall(t, "GET", url+"/v1/forward-auth/edge")
		if code != 200 || body != "" {
			t.Fatalf("call %d: got %d %q, want 200 and no body", i, code, body)
		}
		if got := h.Get("X-RateLimit-Remaining"); got != wantRemaining {
			t.Fatalf("call %d: X-RateLimit-Remaining %q, want %s", i, got, wantRemaining)
		}
		if got := h.Get("X-RateLimit-Limit"); !strings.HasPrefix(got, "3, 3;w=60") {
			t.Fatalf("call %d: X-RateLimit-Limit %q, want 3, 3;w=60...", i, got)
		}
	}
	code, h, body := forwardCall(t, "GET", url+"/v1/forward-auth/edge")
	if code != http.StatusTooManyRequests || h.Get("Retry-After") == "" || body != "" {
		t.Fatalf("got %d Retry-After %q body %q, want 429 with Retry-After and no body", code, h.Get("Retry-After"), body)
	}
	// HEAD is answered as GET, and counts as a call.
	if code, _, _ := forwardCall(t, "HEAD", url+"/v1/forward-auth/edge"); code != http.StatusTooManyRequests {
		t.Fatalf("HEAD: got %d, want 429", code)
	}
	if got, want := strings.Join(counted(), ","), "edge allowed,edge allowed,edge allowed,edge refused,edge refused"; got != want {
		t.Fatalf("counted %s, want %s", got, want)
	}
}

// TestForwardAuthRefusedStatus: a policy's refused_status, and the query
// parameter that overrides it for nginx.
func TestForwardAuthRefusedStatus(t *testing.T) {
	url, _ := forwardAuthServer(t, "[]")
	key := []string{"X-Api-Key", "k1", "X-Original-URI", "/a"}
	for range 2 {
		if code, _, body := forwardCall(t, "GET", url+"/v1/forward-auth/keys", key...); code != 200 {
			t.Fatalf("got %d %s, want 200", code, body)
		}
	}
	if code, h, _ := forwardCall(t, "GET", url+"/v1/forward-auth/keys", key...); code != http.StatusForbidden || h.Get("Retry-After") == "" {
		t.Fatalf("got %d Retry-After %q, want the policy's 403 with Retry-After", code, h.Get("Retry-After"))
	}
	if code, _, _ := forwardCall(t, "GET", url+"/v1/forward-auth/keys?refused_status=429", key...); code != http.StatusTooManyRequests {
		t.Fatalf("got %d, want 429 as the query asks", code)
	}
	if code, _, _ := forwardCall(t, "GET", url+"/v1/forward-auth/edge?refused_status=403"); code != 200 {
		t.Fatalf("got %d, want 200 (allowed whatever the refused status)", code)
	}
}

// TestForwardAuthBadInput: every call that cannot be decided gets its
// documented status and a reason, is counted by its outcome, and charges
// nothing.
func TestForwardAuthBadInput(t *testing.T) {
	url, counted := forwardAuthServer(t, "[127.0.0.1]")
	ep := url + "/v1/forward-auth/"
	cases := []struct {
		name, method, path string
		header             []string
		code               int
		reason, counted    string
	}{
		{"unknown policy", "GET", "nope", nil, 404, "no forward-auth policy", " unknown_policy"},
		{"other method", "POST", "edge", nil, 405, "", ""},
		{"bad refused_status", "GET", "edge?refused_status=500", nil, 400, "refused_status must be", "edge bad_request"},
		{"path not forwarded", "GET", "keys", []string{"X-Api-Key", "k"}, 400, "X-Forwarded-Uri or X-Original-URI", "keys missing_forwarded"},
		{"repeated header", "GET", "keys", []string{"X-Api-Key", "a", "X-Api-Key", "b", "X-Forwarded-Uri", "/"}, 400, "x-api-key is repeated", "keys repeated_header"},
		{"long header", "GET", "keys", []string{"X-Api-Key", strings.Repeat("k", forwardauth.MaxValueBytes+1), "X-Forwarded-Uri", "/"}, 431, "above the 1024", "keys too_long"},
		{"bad X-Forwarded-For", "GET", "edge", []string{"X-Forwarded-For", "not-an-ip"}, 400, "not an address", "edge bad_forwarded_for"},
		{"unknown domain", "GET", "typo", nil, 404, "domain egde is not in the limits", "typo unknown_domain"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, body := forwardCall(t, c.method, ep+c.path, c.header...)
			if code != c.code || !strings.Contains(body, c.reason) {
				t.Fatalf("got %d %q, want %d with %q", code, body, c.code, c.reason)
			}
			want := []string{}
			if c.counted != "" {
				want = []string{c.counted}
			}
			if got := counted(); strings.Join(got, ",") != strings.Join(want, ",") {
				t.Fatalf("counted %q, want %q", got, want)
			}
		})
	}
	// None of them charged the client: three calls are still allowed.
	for i := range 3 {
		if code, _, _ := forwardCall(t, "GET", ep+"edge"); code != 200 {
			t.Fatalf("call %d after the bad ones: got %d, want 200", i, code)
		}
	}
}

// TestForwardAuthNoDescriptor: a call from which no rule builds a
// descriptor is allowed without asking the service, with no headers.
func TestForwardAuthNoDescriptor(t *testing.T) {
	url, counted := forwardAuthServer(t, "[]")
	code, h, body := forwardCall(t, "GET", url+"/v1/forward-auth/optional")
	if code != 200 || body != "" || h.Get("X-RateLimit-Limit") != "" {
		t.Fatalf("got %d %q X-RateLimit-Limit %q, want 200, nothing else", code, body, h.Get("X-RateLimit-Limit"))
	}
	if got := counted(); len(got) != 1 || got[0] != "optional no_descriptor" {
		t.Fatalf("counted %q, want optional no_descriptor", got)
	}
}

// TestForwardAuthSpoofedForwardedFor: from a peer that is not a trusted
// proxy, X-Forwarded-For is ignored and counted, and the peer is the
// client: a spoofer cannot spend another address's quota nor escape its
// own by rotating the header.
func TestForwardAuthSpoofedForwardedFor(t *testing.T) {
	url, counted := forwardAuthServer(t, "[10.0.0.0/8]")
	for i := range 3 {
		code, _, _ := forwardCall(t, "GET", url+"/v1/forward-auth/edge", "X-Forwarded-For", "198.51.100."+string(rune('1'+i)))
		if code != 200 {
			t.Fatalf("call %d: got %d, want 200", i, code)
		}
	}
	if code, _, _ := forwardCall(t, "GET", url+"/v1/forward-auth/edge", "X-Forwarded-For", "198.51.100.9"); code != http.StatusTooManyRequests {
		t.Fatalf("a fourth address in the header: got %d, want 429 (the peer's fourth call)", code)
	}
	if got := strings.Join(counted(), ","); !strings.Contains(got, "edge ignored,edge allowed") {
		t.Fatalf("counted %s, want each ignored header counted", got)
	}
}

// FuzzForwardAuth: whatever a caller sends (peer, forwarded headers,
// header values, query), the endpoint answers one of its documented
// statuses and never panics.
func FuzzForwardAuth(f *testing.F) {
	svc, _ := memoryService(f, forwardAuthLimits)
	cfg, err := forwardauth.Parse("fa.yaml", []byte("trusted_proxies: [127.0.0.1, '::1']\n"+forwardAuthPolicies))
	if err != nil {
		f.Fatal(err)
	}
	h := Handler(Options{Limiter: svc, ConfigLines: func() []string { return nil }, ForwardAuth: &ForwardAuth{
		Config:      func() *forwardauth.Config { return cfg },
		KnownDomain: func(d string) bool { return svc.Index().Known(d) },
	}})
	f.Add("127.0.0.1:1", "keys", "1.2.3.4, 10.0.0.1", "/a?b=c", "GET", "k1", "")
	f.Add("[::1]:1", "edge", "", "", "", "", "2001:db8::1")
	f.Add("192.0.2.1:1", "optional?refused_status=403", "x", "/", "POST", "a", "b")
	f.Add("127.0.0.1:1", "typo", "nonsense", "%zz", "GET", "", "")
	ok := map[int]bool{200: true, 400: true, 403: true, 404: true, 429: true, 431: true}
	f.Fuzz(func(t *testing.T, peer, target, xff, uri, method, key, realIP string) {
		req := httptest.NewRequest("GET", "/", nil)
		req.URL.Path = "/v1/forward-auth/" + target
		if p, q, cut := strings.Cut(target, "?"); cut {
			req.URL.Path, req.URL.RawQuery = "/v1/forward-auth/"+p, q
		}
		req.RemoteAddr = peer
		for name, v := range map[string]string{"X-Forwarded-For": xff, "X-Forwarded-Uri": uri, "X-Forwarded-Method": method, "X-Api-Key": key, "X-Real-Ip": realIP} {
			if v != "" {
				req.Header.Set(name, v)
			}
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		// A path with . or .. segments is the mux's, redirected to its
		// clean form before it reaches the endpoint.
		if !ok[rec.Code] && (rec.Code < 300 || rec.Code > 399) {
			t.Fatalf("%s from %s: status %d (%s), not a documented one", target, peer, rec.Code, rec.Body)
		}
	})
}
