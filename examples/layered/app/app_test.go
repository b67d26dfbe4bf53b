package app

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/envoy-rls/envoy-rls/pkg/client"
)

// closedAddr is an address nothing listens on: a listener's, closed.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// serveWithoutRLS serves the handler on a real HTTP server, with a client
// of an envoy-rls that is not there, deciding by mode.
func serveWithoutRLS(t *testing.T, mode client.FailureMode) string {
	t.Helper()
	c, err := client.Dial(closedAddr(t), client.WithFailureMode(mode), client.WithTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	srv := httptest.NewServer(Handler(c, DemoUsers(), zap.NewNop()))
	t.Cleanup(srv.Close)
	return srv.URL
}

func get(t *testing.T, url, authorization string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
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

// TestAuthenticate: a request without a known user is 401 with a Bearer
// challenge, before the limit is asked (here it could not be: fail
// closed, envoy-rls absent, any call would be a 429); /healthz needs no
// user.
func TestAuthenticate(t *testing.T) {
	url := serveWithoutRLS(t, client.FailClosed)
	for _, authorization := range []string{"", "Bearer", "Bearer ", "Basic YWxpY2U6eA==", "Bearer mallory", "Bearer alice bob", "alice"} {
		resp, body := get(t, url+"/", authorization)
		if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer ") || !strings.Contains(body, "Bearer <user>") {
			t.Errorf("Authorization %q: %s, WWW-Authenticate %q, body %q; want 401 with a Bearer challenge",
				authorization, resp.Status, resp.Header.Get("WWW-Authenticate"), body)
		}
	}
	if resp, _ := get(t, url+HealthPath, ""); resp.StatusCode != http.StatusOK {
		t.Errorf("%s: %s, want 200 without a user", HealthPath, resp.Status)
	}
}

// TestFailureModes: with envoy-rls unreachable, an authenticated request
// is served without rate-limit headers (fail open) or refused with 429
// (fail closed): the failure mode decides, never an error page.
func TestFailureModes(t *testing.T) {
	for _, tc := range []struct {
		mode client.FailureMode
		code int
		body string
	}{
		{client.FailOpen, http.StatusOK, "hello alice\n"},
		{client.FailClosed, http.StatusTooManyRequests, ""},
	} {
		resp, body := get(t, serveWithoutRLS(t, tc.mode)+"/", "bearer alice")
		if resp.StatusCode != tc.code || (tc.body != "" && body != tc.body) {
			t.Errorf("%v: %s %q, want %d %q", tc.mode, resp.Status, body, tc.code, tc.body)
		}
		if v := resp.Header.Get("X-Ratelimit-Limit"); v != "" {
			t.Errorf("%v: x-ratelimit-limit %q with no answer from envoy-rls", tc.mode, v)
		}
	}
}

func TestParseUsers(t *testing.T) {
	u, err := ParseUsers(strings.NewReader("# the team\nalice\n\n  bob  \n"))
	if err != nil || len(u) != 2 || !u.Has("alice") || !u.Has("bob") {
		t.Fatalf("ParseUsers: %v, %v; want alice and bob", u, err)
	}
	for _, tc := range []struct{ in, want string }{
		{"# nobody\n", "no user names"},
		{"alice\nbob smith\n", "line 2: user name \"bob smith\": only printable ASCII without spaces"},
		{"al\u00efce\n", "line 1: user name"},
		{strings.Repeat("a", maxUserLen+1), "line 1: user name of 65 bytes, at most 64"},
	} {
		if _, err := ParseUsers(strings.NewReader(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseUsers(%q): %v, want an error containing %q", tc.in, err, tc.want)
		}
	}
}

func TestLoadUsers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users")
	if err := os.WriteFile(path, []byte("carol\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := ParseFlags([]string{"-users", path}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if u, err := c.Users(); err != nil || len(u) != 1 || !u.Has("carol") {
		t.Errorf("Users: %v, %v; want carol", u, err)
	}
	c.UsersFile = filepath.Join(t.TempDir(), "missing")
	if _, err := c.Users(); err == nil || !strings.Contains(err.Error(), "users file") {
		t.Errorf("a missing users file: %v, want an error naming it", err)
	}
}

func TestParseFlags(t *testing.T) {
	c, err := ParseFlags(nil, io.Discard)
	if err != nil || c.Listen != ":5678" || c.RLS != "envoy-rls:8081" || c.FailureMode != client.FailOpen || c.Timeout != 100*time.Millisecond {
		t.Errorf("defaults: %+v, %v", c, err)
	}
	if c, err := ParseFlags([]string{"-failure-mode=closed"}, io.Discard); err != nil || c.FailureMode != client.FailClosed {
		t.Errorf("-failure-mode=closed: %+v, %v", c, err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-failure-mode", "deny"}, `-failure-mode "deny": want open or closed`},
		{[]string{"-timeout", "0s"}, "-timeout 0s: want a positive duration"},
		{[]string{"-rls", ""}, "-rls is empty"},
		{[]string{"serve"}, `unexpected argument "serve"`},
		{[]string{"-nope"}, "flag provided but not defined: -nope"},
	} {
		if _, err := ParseFlags(tc.args, io.Discard); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseFlags(%q): %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}

// TestRunErrors: what stops Run before it serves is an error, not a
// panic or a server that half starts.
func TestRunErrors(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, tc := range []struct {
		c    Config
		want string
	}{
		{Config{Listen: "127.0.0.1:0", RLS: closedAddr(t), Timeout: time.Second, UsersFile: filepath.Join(t.TempDir(), "missing")}, "users file"},
		{Config{Listen: busy.Addr().String(), RLS: closedAddr(t), Timeout: time.Second}, "listen:"},
	} {
		if err := Run(t.Context(), tc.c, zap.NewNop()); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Run(%+v): %v, want an error containing %q", tc.c, err, tc.want)
		}
	}
}

// TestRunStops: Run serves until its context ends, then returns nil.
func TestRunStops(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{Listen: "127.0.0.1:0", RLS: closedAddr(t), Timeout: time.Second}, zap.NewNop())
	}()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run after cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10 s of its context's end")
	}
}

// TestLogin: POST /login needs no credentials (it is where they are had)
// nor envoy-rls; a known x-user is told what to send, an unknown one gets
// 401 and x-login-failed, which Envoy's /login route charges to the
// address's lockout.
func TestLogin(t *testing.T) {
	url := serveWithoutRLS(t, client.FailClosed)
	for _, tc := range []struct {
		user   string
		code   int
		failed string
		body   string
	}{
		{"alice", http.StatusOK, "", "logged in: send Authorization: Bearer alice\n"},
		{"mallory", http.StatusUnauthorized, "1", "login failed\n"},
		{"", http.StatusUnauthorized, "1", "login failed\n"},
	} {
		req, err := http.NewRequest(http.MethodPost, url+LoginPath, nil)
		if err != nil {
			t.Fatal(err)
		}
		if tc.user != "" {
			req.Header.Set("X-User", tc.user)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != tc.code || resp.Header.Get(LoginFailedHeader) != tc.failed || string(body) != tc.body {
			t.Errorf("login as %q: %s, %s %q, body %q; want %d, %q, %q",
				tc.user, resp.Status, LoginFailedHeader, resp.Header.Get(LoginFailedHeader), body, tc.code, tc.failed, tc.body)
		}
	}
}
