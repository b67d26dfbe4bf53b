package integration

import (
	"net/http"
	"strings"
	"testing"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
)

// securityLimits is the config of the security tests: one request per hour
// per API key.
const securityLimits = `
domain: sec
descriptors:
  - key: api_key
    rate_limit: {name: per-key, algorithm: fixed_window, unit: hour, requests_per_unit: 1}
`

// TestRedisTLSAndAuth runs the binary against a Redis that speaks TLS only
// and requires an ACL user: -redis-url rediss://user:pass@… with
// -redis-tls-ca decides, with its keys under -redis-key-prefix and, with
// -hash-values, no descriptor value in Redis. The deciding cases give the
// store 2 s (-store-timeout) and wait for /healthz to find it: what they
// check is the credentials, and a TLS handshake on a loaded machine can
// take longer than the default 50 ms, which the failure mode would answer.
func TestRedisTLSAndAuth(t *testing.T) {
	t.Parallel()
	const (
		user     = "rls"
		password = "rls-s3cret"
		secret   = "sk-live-123456"
	)
	srv := redistest.StartWith(t, redistest.Options{TLS: true, Users: []redistest.User{{Name: user, Password: password}}})
	config := writeConfig(t, securityLimits)

	t.Run("URL credentials", func(t *testing.T) {
		s := startServer(t, config,
			"-redis-url", srv.URLWithUser(user, password),
			"-redis-tls-ca", srv.TLS().CA.File,
			"-redis-key-prefix", "sec-test:",
			"-hash-values", "-store-timeout", "2s")
		awaitStoreOK(t, s)
		lim := limit("per-key", 1, unitHour)
		checkResponse(t, s.decide(t, request("sec", desc("api_key", secret))), codeOK, want{codeOK, lim, 0})
		checkResponse(t, s.decide(t, request("sec", desc("api_key", secret))), codeOver, want{codeOver, lim, 0})
		if code, body := s.get(t, "/healthz"); code != http.StatusOK || !strings.Contains(body, "store: ok") {
			t.Errorf("/healthz: %d %q, want 200 with store: ok", code, body)
		}
		keys, err := srv.Do("KEYS", "*")
		if err != nil {
			t.Fatal(err)
		}
		if keys == "" {
			t.Fatal("no key in Redis after two decisions")
		}
		for _, k := range strings.Split(keys, "\n") {
			if !strings.HasPrefix(k, "sec-test:{") {
				t.Errorf("key %q does not start with -redis-key-prefix and the hash tag", k)
			}
			if strings.Contains(k, secret) {
				t.Errorf("key %q holds the descriptor value despite -hash-values", k)
			}
		}
	})

	// Credentials from the flag and its environment twin, with rediss://.
	t.Run("flag and environment credentials", func(t *testing.T) {
		s := startServerWith(t, func(grpcAddr, httpAddr string) ([]string, []string) {
			args := append(standardFlags(config, grpcAddr, httpAddr),
				"-redis-url", srv.URL(), "-redis-username", user, "-redis-key-prefix", "sec-env:", "-store-timeout", "2s")
			return args, []string{"RLS_REDIS_PASSWORD=" + password, "RLS_REDIS_TLS_CA=" + srv.TLS().CA.File}
		})
		awaitStoreOK(t, s)
		lim := limit("per-key", 1, unitHour)
		checkResponse(t, s.decide(t, request("sec", desc("api_key", "env"))), codeOK, want{codeOK, lim, 0})
		checkResponse(t, s.decide(t, request("sec", desc("api_key", "env"))), codeOver, want{codeOver, lim, 0})
	})

	// A wrong password does not stop the service: it answers by its failure
	// mode, and says why on /healthz (503: a configuration error, not an
	// outage), in gRPC health and in its log, without the password.
	t.Run("wrong password", func(t *testing.T) {
		const wrong = "not-the-password"
		s := startServerRefused(t, config,
			"-redis-url", srv.URLWithUser(user, wrong),
			"-redis-tls-ca", srv.TLS().CA.File,
			"-failure-mode", "deny")
		resp := s.decide(t, request("sec", desc("api_key", "w")))
		if resp.GetOverallCode() != codeOver {
			t.Errorf("decision with a wrong password and -failure-mode deny: %v, want OVER_LIMIT", resp)
		}
		code, body := s.get(t, "/healthz")
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "WRONGPASS") || !strings.Contains(body, "check -redis-url") {
			t.Errorf("/healthz: %d %q, want 503 naming WRONGPASS and -redis-url", code, body)
		}
		if !poll(reloadBound, func() bool { return strings.Contains(s.stderr.String(), "WRONGPASS") }) {
			t.Errorf("the log does not say WRONGPASS; stderr:\n%s", s.stderr.String())
		}
		if strings.Contains(s.stderr.String(), wrong) || strings.Contains(body, wrong) {
			t.Error("the password shows in the log or on /healthz")
		}
	})

	// A CA that did not sign the server's certificate: refused, and said so.
	t.Run("wrong CA", func(t *testing.T) {
		s := startServerRefused(t, config,
			"-redis-url", srv.URLWithUser(user, password),
			"-redis-tls-ca", redistest.NewCA(t).File)
		if resp := s.decide(t, request("sec", desc("api_key", "ca"))); resp.GetOverallCode() != codeOK {
			t.Errorf("decision with an untrusted Redis and -failure-mode allow: %v, want OK", resp)
		}
		// Each /healthz probes Redis again; on a loaded machine a probe's
		// handshake may time out first (reported as unreachable), so the
		// refusal is awaited, within a wide bound, rather than read once.
		var code int
		var body string
		refused := poll(4*reloadBound, func() bool {
			code, body = s.get(t, "/healthz")
			return code == http.StatusServiceUnavailable && strings.Contains(body, "certificate signed by unknown authority") && strings.Contains(body, "-redis-tls-ca")
		})
		if !refused {
			t.Errorf("/healthz: %d %q, want 503 naming the unknown authority and -redis-tls-ca", code, body)
		}
	})
}

// startServerRefused starts the service as startServer does, against a
// Redis that refuses its settings: serving, and reporting NOT_SERVING.
func startServerRefused(t *testing.T, config string, flags ...string) *server {
	t.Helper()
	return startServerHealth(t, healthpb.HealthCheckResponse_NOT_SERVING, func(grpcAddr, httpAddr string) ([]string, []string) {
		return append(standardFlags(config, grpcAddr, httpAddr), flags...), nil
	})
}

// awaitStoreOK waits until s's /healthz finds its store answering.
func awaitStoreOK(t *testing.T, s *server) {
	t.Helper()
	var code int
	var body string
	if !poll(reloadBound, func() bool {
		code, body = s.get(t, "/healthz")
		return code == http.StatusOK && strings.Contains(body, "store: ok")
	}) {
		t.Fatalf("/healthz: %d %q %s after the start, want 200 with store: ok", code, body, reloadBound)
	}
}
