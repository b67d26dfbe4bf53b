package server

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// These tests run the server in this process (serveOn, on port-0
// listeners) on the embedded store, and drive it over real gRPC and HTTP.

// serveLimits is the config of the in-process servers: one request per
// hour per value of k.
const serveLimits = `
domain: test
descriptors:
  - key: k
    rate_limit: {name: one, algorithm: fixed_window, unit: hour, requests_per_unit: 1}
`

// callBound is the deadline of one call to an in-process server.
const callBound = 5 * time.Second

type inProcess struct {
	grpcAddr, httpAddr, debugAddr string
	statsAddr                     string // -prometheus-addr's, when on
	adminAddr                     string // -admin-addr's, when on
}

// startInProcess runs the server with the standard test flags and more
// (later flags win), and stops it when the test ends, failing the test
// unless it stops cleanly.
func startInProcess(t *testing.T, args ...string) *inProcess {
	t.Helper()
	return startInProcessLogging(t, zap.NewNop(), args...)
}

// startInProcessLogging is startInProcess with the server's log to log.
func startInProcessLogging(t *testing.T, log *zap.Logger, args ...string) *inProcess {
	t.Helper()
	cfgPath := filepath.Join(t.TempDir(), "limits.yaml")
	if err := os.WriteFile(cfgPath, []byte(serveLimits), 0o644); err != nil {
		t.Fatal(err)
	}
	// A store call may wait a second, not the 50 ms of production: a test
	// that counts decisions on Redis, run beside the package's other
	// tests under the race detector on two cores, saw calls time out
	// into the failure mode. A test of the failure mode sets its own.
	base := []string{"-config", cfgPath, "-grpc-addr", "127.0.0.1:0", "-http-addr", "127.0.0.1:0",
		"-debug-addr", "", "-shutdown-timeout", "5s", "-store-timeout", "1s"}
	o, err := parseFlags(append(base, args...), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	src, err := openSource(o, zap.NewNop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ls, err := listen(o, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	s := &inProcess{grpcAddr: ls.grpc.Addr().String(), httpAddr: ls.http.Addr().String()}
	if ls.debug != nil {
		s.debugAddr = ls.debug.Addr().String()
	}
	if ls.stats != nil {
		s.statsAddr = ls.stats.Addr().String()
	}
	if ls.admin != nil {
		s.adminAddr = ls.admin.Addr().String()
	}
	ctx, cancel := context.WithCancel(context.Background())
	serveLoggingUntilCleanup(t, ctx, cancel, o, src, ls, log)
	return s
}

// serveLoggingUntilCleanup runs serveOn, its log to log, until the test
// ends, then cancels ctx and fails the test unless the server stops
// cleanly and in time.
func serveLoggingUntilCleanup(t *testing.T, ctx context.Context, cancel context.CancelFunc, o *Options, src source, ls *listeners, log *zap.Logger) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- serveOn(ctx, o, src, log, ls) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("server stopped with %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Error("server did not stop within 15s")
		}
	})
}

var httpClient = &http.Client{Timeout: callBound}

// httpDo sends a request and returns the status and body.
func httpDo(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	return httpDoWith(t, method, url, body, nil)
}

// httpDoWith is httpDo with headers.
func httpDoWith(t *testing.T, method, url, body string, header http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func (s *inProcess) postJSON(t *testing.T, body string) (int, string) {
	t.Helper()
	return httpDo(t, "POST", "http://"+s.httpAddr+"/json", body)
}

func jsonRequest(value string, extra string) string {
	return `{"domain":"test","descriptors":[{"entries":[{"key":"k","value":"` + value + `"}]` + extra + `}]}`
}

func TestPprofOnlyOnDebugAddr(t *testing.T) {
	s := startInProcess(t, "-debug-addr", "127.0.0.1:0")
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/heap", "/debug/pprof/profile?seconds=1"} {
		if code, _ := httpDo(t, "GET", "http://"+s.httpAddr+path, ""); code != http.StatusNotFound {
			t.Errorf("GET %s on -http-addr: status %d, want 404", path, code)
		}
	}
	if code, body := httpDo(t, "GET", "http://"+s.debugAddr+"/debug/pprof/", ""); code != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Errorf("GET /debug/pprof/ on -debug-addr: status %d, want 200 with the profiles", code)
	}
}

func TestJSONEndpointFlag(t *testing.T) {
	t.Parallel()
	t.Run("default", func(t *testing.T) {
		t.Parallel()
		s := startInProcess(t)
		if code, body := s.postJSON(t, jsonRequest("a", "")); code != http.StatusOK {
			t.Errorf("POST /json: %d %s, want 200", code, body)
		}
	})
	t.Run("off", func(t *testing.T) {
		t.Parallel()
		s := startInProcess(t, "-json-endpoint=false")
		if code, _ := s.postJSON(t, jsonRequest("a", "")); code != http.StatusNotFound {
			t.Errorf("POST /json with -json-endpoint=false: %d, want 404", code)
		}
		for _, p := range []string{"//json", "/./json"} {
			if code, _ := httpDo(t, "POST", "http://"+s.httpAddr+p, jsonRequest("a", "")); code == http.StatusOK || code == http.StatusTooManyRequests {
				t.Errorf("POST %s with -json-endpoint=false: %d, want no decision", p, code)
			}
		}
		// The rest of the API stays.
		for _, p := range []string{"/healthz", "/healthcheck", "/metrics", "/rlconfig"} {
			if code, _ := httpDo(t, "GET", "http://"+s.httpAddr+p, ""); code != http.StatusOK {
				t.Errorf("GET %s: %d, want 200", p, code)
			}
		}
	})
}

func TestNegativeHitsFlag(t *testing.T) {
	t.Parallel()
	refund := jsonRequest("a", `,"isNegativeHits":true`)
	t.Run("default", func(t *testing.T) {
		t.Parallel()
		s := startInProcess(t)
		// Refunds are Envoy's, over gRPC: /json refuses them by default.
		s.postJSON(t, jsonRequest("a", ""))
		if code, body := s.postJSON(t, refund); code != http.StatusBadRequest || !strings.Contains(body, "-json-negative-hits") {
			t.Errorf("a refund over /json: %d %s, want 400 naming -json-negative-hits", code, body)
		}
		if code, _ := s.postJSON(t, jsonRequest("a", "")); code != http.StatusTooManyRequests {
			t.Errorf("second hit after a refused refund: %d, want 429", code)
		}
		conn := grpcDial(t, s.grpcAddr, insecure.NewCredentials())
		ctx, cancel := context.WithTimeout(context.Background(), callBound)
		defer cancel()
		resp, err := rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "test",
			Descriptors: []*ratelimitv3.RateLimitDescriptor{{IsNegativeHits: true,
				Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "k", Value: "a"}}}}})
		if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
			t.Errorf("a refund over gRPC: %v, %v; want OK", resp, err)
		}
	})
	t.Run("json refunds on", func(t *testing.T) {
		t.Parallel()
		s := startInProcess(t, "-json-negative-hits")
		s.postJSON(t, jsonRequest("a", ""))
		if code, body := s.postJSON(t, refund); code != http.StatusOK {
			t.Errorf("a refund with -json-negative-hits: %d %s, want 200", code, body)
		}
		if code, _ := s.postJSON(t, jsonRequest("a", "")); code != http.StatusOK {
			t.Errorf("a hit after the refund: %d, want 200", code)
		}
	})
	t.Run("off", func(t *testing.T) {
		t.Parallel()
		s := startInProcess(t, "-negative-hits=false")
		s.postJSON(t, jsonRequest("a", ""))
		if code, body := s.postJSON(t, refund); code != http.StatusBadRequest || !strings.Contains(body, "is_negative_hits") {
			t.Errorf("a refund with -negative-hits=false: %d %s, want 400 naming is_negative_hits", code, body)
		}
		// Not refunded: the next hit is still over the limit.
		if code, _ := s.postJSON(t, jsonRequest("a", "")); code != http.StatusTooManyRequests {
			t.Errorf("second hit after a refused refund: %d, want 429", code)
		}
	})
}

func TestShadowModeFlag(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want int
	}{
		{"default", nil, http.StatusTooManyRequests},
		{"on", []string{"-shadow-mode"}, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := startInProcess(t, tc.args...)
			if code, _ := s.postJSON(t, jsonRequest("a", "")); code != http.StatusOK {
				t.Fatalf("first hit: %d, want 200", code)
			}
			code, body := s.postJSON(t, jsonRequest("a", ""))
			if code != tc.want {
				t.Errorf("second hit: %d %s, want %d", code, body, tc.want)
			}
			_, metrics := httpDo(t, "GET", "http://"+s.httpAddr+"/metrics", "")
			shadowed := strings.Contains(metrics, `rls_decisions_total{domain="test",outcome="shadow_over_limit",rule="one"} 1`)
			if shadowed != (tc.want == http.StatusOK) {
				t.Errorf("shadow_over_limit counted: %v, want %v", shadowed, tc.want == http.StatusOK)
			}
		})
	}
}

// grpcCall makes one ShouldRateLimit call over conn.
func grpcCall(conn *grpc.ClientConn, value string) (*rlsv3.RateLimitResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callBound)
	defer cancel()
	return rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{
		Domain: "test",
		Descriptors: []*ratelimitv3.RateLimitDescriptor{{
			Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "k", Value: value}},
		}},
	})
}

func grpcDial(t *testing.T, addr string, creds credentials.TransportCredentials) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// clientTLS is a client's TLS trusting ca, with the certificates given.
func clientTLS(ca *redistest.CA, certs ...tls.Certificate) credentials.TransportCredentials {
	return credentials.NewTLS(&tls.Config{RootCAs: ca.Pool(), Certificates: certs, MinVersion: tls.VersionTLS12})
}

// checkRefused fails the test unless a call over creds fails as
// UNAVAILABLE: the connection is refused, no decision made.
func checkRefused(t *testing.T, addr, what string, creds credentials.TransportCredentials) {
	t.Helper()
	resp, err := grpcCall(grpcDial(t, addr, creds), "refused")
	if status.Code(err) != codes.Unavailable {
		t.Errorf("%s: got %v, %v; want UNAVAILABLE", what, resp, err)
	}
}

func TestGRPCTLS(t *testing.T) {
	t.Parallel()
	ca := redistest.NewCA(t)
	cert, key := ca.Issue(t, "envoy-rls")
	s := startInProcess(t, "-grpc-tls-cert", cert, "-grpc-tls-key", key)

	resp, err := grpcCall(grpcDial(t, s.grpcAddr, clientTLS(ca)), "a")
	if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
		t.Fatalf("over TLS: %v, %v; want OK", resp, err)
	}
	checkRefused(t, s.grpcAddr, "plaintext", insecure.NewCredentials())
	checkRefused(t, s.grpcAddr, "trusting another CA", clientTLS(redistest.NewCA(t)))
	// TLS alone asks for no client certificate; one sent is ignored.
	sc, sk := redistest.NewCA(t).Issue(t, "stranger")
	if _, err := grpcCall(grpcDial(t, s.grpcAddr, clientTLS(ca, redistest.KeyPair(t, sc, sk))), "b"); err != nil {
		t.Errorf("TLS with a client certificate nobody asked for: %v", err)
	}
}

func TestGRPCMutualTLS(t *testing.T) {
	t.Parallel()
	ca := redistest.NewCA(t)
	cert, key := ca.Issue(t, "envoy-rls")
	clients := redistest.NewCA(t)
	s := startInProcess(t, "-grpc-tls-cert", cert, "-grpc-tls-key", key, "-grpc-tls-client-ca", clients.File)

	ec, ek := clients.Issue(t, "envoy")
	envoy := redistest.KeyPair(t, ec, ek)
	resp, err := grpcCall(grpcDial(t, s.grpcAddr, clientTLS(ca, envoy)), "a")
	if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
		t.Fatalf("mutual TLS with a client certificate: %v, %v; want OK", resp, err)
	}
	checkRefused(t, s.grpcAddr, "no client certificate", clientTLS(ca))
	// The server's own CA did not sign clients: its certificates are refused.
	nc, nk := ca.Issue(t, "not-a-client")
	checkRefused(t, s.grpcAddr, "a client certificate of another CA", clientTLS(ca, redistest.KeyPair(t, nc, nk)))
	checkRefused(t, s.grpcAddr, "plaintext", insecure.NewCredentials())
}

// With -grpc-tls-client-san only client certificates that name it pass,
// though the client CA signed others.
func TestGRPCClientSAN(t *testing.T) {
	t.Parallel()
	ca := redistest.NewCA(t)
	cert, key := ca.Issue(t, "envoy-rls")
	clients := redistest.NewCA(t)
	ec, ek := clients.Issue(t, "envoy") // names localhost, 127.0.0.1, ::1
	envoy := redistest.KeyPair(t, ec, ek)
	named := startInProcess(t, "-grpc-tls-cert", cert, "-grpc-tls-key", key, "-grpc-tls-client-ca", clients.File, "-grpc-tls-client-san", "localhost")
	if _, err := grpcCall(grpcDial(t, named.grpcAddr, clientTLS(ca, envoy)), "a"); err != nil {
		t.Errorf("a client certificate naming localhost: %v", err)
	}
	other := startInProcess(t, "-grpc-tls-cert", cert, "-grpc-tls-key", key, "-grpc-tls-client-ca", clients.File, "-grpc-tls-client-san", "envoy.example")
	checkRefused(t, other.grpcAddr, "a client certificate without the SAN", clientTLS(ca, envoy))
	if _, err := parseFlags([]string{"-grpc-tls-client-san", "x"}, env(nil)); err == nil || !strings.Contains(err.Error(), "-grpc-tls-client-ca") {
		t.Errorf("-grpc-tls-client-san alone: %v", err)
	}
}

// TestGRPCClientCAReload: a rotated -grpc-tls-client-ca file reaches new
// connections without a restart.
func TestGRPCClientCAReload(t *testing.T) {
	t.Parallel()
	ca := redistest.NewCA(t)
	cert, key := ca.Issue(t, "envoy-rls")
	oldCA, newCA := redistest.NewCA(t), redistest.NewCA(t)
	caFile := filepath.Join(t.TempDir(), "clients.pem")
	install := func(from string, at time.Time) {
		t.Helper()
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(caFile, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(caFile, at, at); err != nil {
			t.Fatal(err)
		}
	}
	install(oldCA.File, time.Now().Add(-time.Hour))
	s := startInProcess(t, "-grpc-tls-cert", cert, "-grpc-tls-key", key, "-grpc-tls-client-ca", caFile)
	oc, ok := oldCA.Issue(t, "envoy-old")
	nc, nk := newCA.Issue(t, "envoy-new")
	oldClient := clientTLS(ca, redistest.KeyPair(t, oc, ok))
	newClient := clientTLS(ca, redistest.KeyPair(t, nc, nk))
	if _, err := grpcCall(grpcDial(t, s.grpcAddr, oldClient), "a"); err != nil {
		t.Fatalf("client of the first CA: %v", err)
	}
	checkRefused(t, s.grpcAddr, "client of the next CA before the rotation", newClient)

	install(newCA.File, time.Now())
	// The watcher reloads the file within its debounce of the rewrite.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := grpcCall(grpcDial(t, s.grpcAddr, newClient), "b")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("client of the new CA still refused 10 s after the rotation: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	checkRefused(t, s.grpcAddr, "client of the old CA after the rotation", oldClient)
}

func TestGRPCTLSBadFiles(t *testing.T) {
	t.Parallel()
	ca := redistest.NewCA(t)
	cert, key := ca.Issue(t, "envoy-rls")
	_, otherKey := ca.Issue(t, "other")
	notPEM := filepath.Join(t.TempDir(), "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"missing cert", []string{"-grpc-tls-cert", cert + ".nope", "-grpc-tls-key", key}, "no such file"},
		{"key of another cert", []string{"-grpc-tls-cert", cert, "-grpc-tls-key", otherKey}, "private key does not match"},
		{"client CA missing", []string{"-grpc-tls-cert", cert, "-grpc-tls-key", key, "-grpc-tls-client-ca", notPEM + ".nope"}, "-grpc-tls-client-ca"},
		{"client CA not PEM", []string{"-grpc-tls-cert", cert, "-grpc-tls-key", key, "-grpc-tls-client-ca", notPEM}, "no PEM certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"-grpc-addr", "127.0.0.1:0", "-http-addr", "127.0.0.1:0", "-debug-addr", ""}, tc.args...)
			o, err := parseFlags(args, env(nil))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), callBound)
			defer cancel()
			err = runServer(ctx, o, fixedConfig(&config.Config{}), zap.NewNop())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("runServer: %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
}

func TestGRPCMaxConnectionAge(t *testing.T) {
	t.Parallel()
	s := startInProcess(t, "-grpc-max-connection-age", "200ms", "-shutdown-timeout", "1s")
	conn := grpcDial(t, s.grpcAddr, insecure.NewCredentials())
	if _, err := grpcCall(conn, "a"); err != nil {
		t.Fatal(err)
	}
	// The server sends GOAWAY after about 200 ms: the client leaves READY.
	ctx, cancel := context.WithTimeout(context.Background(), callBound)
	defer cancel()
	for conn.GetState() == connectivity.Ready {
		if !conn.WaitForStateChange(ctx, connectivity.Ready) {
			t.Fatalf("connection still READY after %s with -grpc-max-connection-age 200ms", callBound)
		}
	}
	// And reconnects for the next call.
	if _, err := grpcCall(conn, "b"); err != nil {
		t.Errorf("call after the connection aged out: %v", err)
	}
}

// fixedConfig is a source of cfg alone, never reloaded.
func fixedConfig(cfg *config.Config) source {
	s := &filesSource{log: zap.NewNop()}
	s.cur.Store(cfg)
	return s
}
