package client_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/client"
)

// describeUser limits a request per its X-User header; a request without
// one is not limited.
func describeUser(r *http.Request) []client.Descriptor {
	u := r.Header.Get("X-User")
	if u == "" {
		return nil
	}
	return []client.Descriptor{user(u)}
}

// limitedServer is a real HTTP server whose handler counts its runs,
// behind HTTPMiddleware.
func limitedServer(t *testing.T, c *client.Client, describe func(*http.Request) []client.Descriptor, opts ...client.MiddlewareOption) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var served atomic.Int64
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		io.WriteString(w, "hello\n")
	})
	srv := httptest.NewServer(client.HTTPMiddleware(c, "app", describe, opts...)(next))
	t.Cleanup(srv.Close)
	return srv, &served
}

// get sends a GET as user (none when empty) and returns the response,
// its body read.
func get(t *testing.T, srv *httptest.Server, as string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	if as != "" {
		req.Header.Set("X-User", as)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

// TestHTTPMiddleware: allowed requests are served with the rate-limit
// headers; the limit's next one is a 429 with Retry-After, the headers
// and the body, and the handler does not run; a request without
// descriptors passes untouched.
func TestHTTPMiddleware(t *testing.T) {
	var decisions atomic.Int64
	srv, served := limitedServer(t, dial(t, serve(t, memoryService(t), nil)), describeUser,
		client.OnDecision(func(*http.Request, client.Decision) { decisions.Add(1) }))
	for i := range 3 {
		resp, body := get(t, srv, "ann")
		if resp.StatusCode != http.StatusOK || body != "hello\n" {
			t.Fatalf("request %d: %d %q, want 200 from the handler", i, resp.StatusCode, body)
		}
		if got, want := resp.Header.Get("X-RateLimit-Remaining"), strconv.Itoa(2-i); got != want {
			t.Errorf("request %d: X-RateLimit-Remaining %q, want %q", i, got, want)
		}
		if resp.Header.Get("X-RateLimit-Limit") == "" || resp.Header.Get("X-RateLimit-Reset") == "" {
			t.Errorf("request %d: headers %v, want X-RateLimit-Limit and -Reset", i, resp.Header)
		}
	}
	resp, body := get(t, srv, "ann")
	if resp.StatusCode != http.StatusTooManyRequests || body != "rate limited\n" {
		t.Fatalf("fourth request: %d %q, want 429 \"rate limited\"", resp.StatusCode, body)
	}
	if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || secs < 1 || secs > int(maxWait.Seconds()) {
		t.Errorf("Retry-After %q, want seconds in [1, %.0f]", resp.Header.Get("Retry-After"), maxWait.Seconds())
	}
	if got := resp.Header.Get("X-RateLimit-Remaining"); got != "0" {
		t.Errorf("refusal's X-RateLimit-Remaining %q, want 0", got)
	}
	if n := served.Load(); n != 3 {
		t.Errorf("handler ran %d times, want 3 (not for the refusal)", n)
	}
	resp, _ = get(t, srv, "")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-RateLimit-Limit") != "" {
		t.Errorf("request without descriptors: %d %v, want 200 without rate-limit headers", resp.StatusCode, resp.Header)
	}
	if n := decisions.Load(); n != 4 {
		t.Errorf("OnDecision saw %d decisions, want 4 (none for the request without descriptors)", n)
	}
}

// TestHTTPMiddlewareFailClosed: a service that cannot answer, failing
// closed, is a 429 with Retry-After 1 and no X-RateLimit-* headers.
func TestHTTPMiddlewareFailClosed(t *testing.T) {
	c := dial(t, closedAddr(t), client.WithTimeout(100*time.Millisecond), client.WithFailureMode(client.FailClosed))
	unavailable := make(chan error, 1)
	srv, served := limitedServer(t, c, describeUser, client.OnDecision(func(_ *http.Request, d client.Decision) { unavailable <- d.Unavailable }))
	resp, body := get(t, srv, "ann")
	if resp.StatusCode != http.StatusTooManyRequests || body != "rate limited\n" || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("%d %q Retry-After %q, want 429 \"rate limited\" Retry-After 1", resp.StatusCode, body, resp.Header.Get("Retry-After"))
	}
	if got := resp.Header.Get("X-RateLimit-Limit"); got != "" {
		t.Errorf("X-RateLimit-Limit %q without an answer of the service, want none", got)
	}
	if err := <-unavailable; err == nil || served.Load() != 0 {
		t.Errorf("OnDecision's Unavailable %v, handler ran %d times: want the cause and no run", err, served.Load())
	}
}

// TestHTTPMiddlewareOnRefused: OnRefused writes the refusal.
func TestHTTPMiddlewareOnRefused(t *testing.T) {
	srv, _ := limitedServer(t, dial(t, serve(t, memoryService(t), nil)), describeUser,
		client.OnRefused(func(w http.ResponseWriter, _ *http.Request, d client.Decision) {
			d.WriteHeaders(w.Header())
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "slow down\n")
		}))
	for range 3 {
		get(t, srv, "ann")
	}
	resp, body := get(t, srv, "ann")
	if resp.StatusCode != http.StatusServiceUnavailable || body != "slow down\n" || resp.Header.Get("Retry-After") == "" {
		t.Errorf("%d %q %v, want OnRefused's 503 with Retry-After", resp.StatusCode, body, resp.Header)
	}
}

// TestHTTPMiddlewareMistake: descriptors that Check refuses are a 500 and
// OnError's call; the handler does not run.
func TestHTTPMiddlewareMistake(t *testing.T) {
	mistakes := make(chan error, 1)
	srv, served := limitedServer(t, dial(t, serve(t, memoryService(t), nil)),
		func(r *http.Request) []client.Descriptor { return []client.Descriptor{user(r.Header.Get("X-User"))} },
		client.OnError(func(_ *http.Request, err error) { mistakes <- err }))
	resp, _ := get(t, srv, "")
	if mistake := <-mistakes; resp.StatusCode != http.StatusInternalServerError || !errors.Is(mistake, client.ErrEmptyValue) || served.Load() != 0 {
		t.Errorf("%d, OnError %v, handler ran %d times: want 500, ErrEmptyValue, no run", resp.StatusCode, mistake, served.Load())
	}
}

// TestHTTPMiddlewareNoDescribe: a nil describe fails every request with
// ErrNoDescribe rather than let it pass unlimited.
func TestHTTPMiddlewareNoDescribe(t *testing.T) {
	mistakes := make(chan error, 1)
	srv, served := limitedServer(t, dial(t, serve(t, memoryService(t), nil)), nil,
		client.OnError(func(_ *http.Request, err error) { mistakes <- err }))
	resp, _ := get(t, srv, "ann")
	if mistake := <-mistakes; resp.StatusCode != http.StatusInternalServerError || !errors.Is(mistake, client.ErrNoDescribe) || served.Load() != 0 {
		t.Errorf("%d, OnError %v, handler ran %d times: want 500, ErrNoDescribe, no run", resp.StatusCode, mistake, served.Load())
	}
}
