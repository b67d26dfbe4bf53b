package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/envoy-rls/envoy-rls/internal/metrics"
)

// limiterFunc answers by domain, so one handler serves every case.
type limiterFunc func(*rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error)

func (f limiterFunc) ShouldRateLimit(_ context.Context, r *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	return f(r)
}

func byDomain(r *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	switch r.Domain {
	case "over":
		return &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OVER_LIMIT}, nil
	case "invalid":
		return nil, status.Error(codes.InvalidArgument, "bad descriptor")
	case "down":
		return nil, status.Error(codes.Unavailable, "store down")
	}
	return &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK}, nil
}

func do(t *testing.T, h http.Handler, method, path, body string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(body)))
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(b)
}

func TestJSON(t *testing.T) {
	h := Handler(Options{Limiter: limiterFunc(byDomain), ConfigLines: func() []string { return nil }})
	tests := []struct {
		body     string
		wantCode int
		wantBody string
	}{
		{`{"domain":"ok","descriptors":[{"entries":[{"key":"a","value":"b"}]}]}`, 200, `"overallCode":"OK"`},
		{`{"domain":"over"}`, 429, `"overallCode":"OVER_LIMIT"`},
		{`{"domain":"invalid"}`, 400, "bad descriptor"},
		{`{"domain":"down"}`, 503, "store down"},
		{`{"domain":`, 400, "bad RateLimitRequest"},
		{`{"domian":"x"}`, 400, "bad RateLimitRequest"},
		{strings.Repeat(" ", MaxBodyBytes+1), 400, "reading body"},
	}
	for _, tt := range tests {
		code, body := do(t, h, "POST", "/json", tt.body)
		if code != tt.wantCode || !strings.Contains(strings.ReplaceAll(body, " ", ""), strings.ReplaceAll(tt.wantBody, " ", "")) {
			t.Errorf("POST /json %.40q: got %d %q, want %d containing %q", tt.body, code, body, tt.wantCode, tt.wantBody)
		}
	}
	if code, _ := do(t, h, "GET", "/json", ""); code != http.StatusMethodNotAllowed {
		t.Errorf("GET /json: got %d, want 405", code)
	}
}

func TestHealth(t *testing.T) {
	serving := true
	var pingErr error
	h := Handler(Options{
		Limiter:     limiterFunc(byDomain),
		Serving:     func() bool { return serving },
		StorePing:   func(context.Context) error { return pingErr },
		ConfigLines: func() []string { return nil },
	})
	for _, path := range []string{"/healthz", "/healthcheck"} {
		if code, body := do(t, h, "GET", path, ""); code != 200 || !strings.Contains(body, "store: ok") {
			t.Errorf("GET %s: got %d %q, want 200 with store: ok", path, code, body)
		}
	}
	// A store that is down does not make the service unhealthy: it still
	// answers by its failure mode.
	pingErr = errors.New("connection refused")
	if code, body := do(t, h, "GET", "/healthz", ""); code != 200 || !strings.Contains(body, "unreachable: connection refused") {
		t.Errorf("store down: got %d %q, want 200 saying unreachable", code, body)
	}
	// Nor does a store that answers for some keys only (a cluster with a
	// master down); the body says it is degraded.
	pingErr = fmt.Errorf("ping: %w", partialError{degraded: true})
	if code, body := do(t, h, "GET", "/healthz", ""); code != 200 || !strings.Contains(body, "store: degraded: ping: 1 of 3 masters") {
		t.Errorf("store degraded: got %d %q, want 200 saying degraded", code, body)
	}
	pingErr = partialError{degraded: false}
	if code, body := do(t, h, "GET", "/healthz", ""); code != 200 || !strings.Contains(body, "store: unreachable: 1 of 3 masters") {
		t.Errorf("every master down: got %d %q, want 200 saying unreachable", code, body)
	}
	// A store that refuses the settings is a configuration error: 503
	// until they are fixed, the body saying what to check.
	pingErr = fmt.Errorf("ping: %w", refusedError{})
	if code, body := do(t, h, "GET", "/healthz", ""); code != http.StatusServiceUnavailable || body != "store: refused: ping: WRONGPASS; check REDIS_AUTH\n" {
		t.Errorf("store refusing the settings: got %d %q, want 503 saying refused", code, body)
	}
	pingErr = nil
	if code, _ := do(t, h, "GET", "/healthz", ""); code != 200 {
		t.Errorf("settings fixed: got %d, want 200", code)
	}
	serving = false
	if code, _ := do(t, h, "GET", "/healthz", ""); code != http.StatusServiceUnavailable {
		t.Errorf("shutting down: got %d, want 503", code)
	}
}

// refusedError is the error of a store that refuses the settings.
type refusedError struct{}

func (refusedError) Error() string { return "WRONGPASS; check REDIS_AUTH" }
func (refusedError) Refused() bool { return true }

// partialError is the error of a store that may answer for some keys: a
// cluster with masters down.
type partialError struct{ degraded bool }

func (partialError) Error() string {
	return "1 of 3 masters unreachable: 127.0.0.1:1 (connection refused)"
}
func (e partialError) Degraded() bool { return e.degraded }

func TestRLConfigAndMetrics(t *testing.T) {
	m := metrics.New()
	m.Decided(&metrics.Decision{Domain: "edge", Rule: "per-ip", Outcome: metrics.OutcomeOverLimit})
	h := Handler(Options{
		Limiter:     limiterFunc(byDomain),
		ConfigLines: func() []string { return []string{"edge.a: one", "edge.b: two"} },
		Gatherer:    m.Registry,
	})
	if code, body := do(t, h, "GET", "/rlconfig", ""); code != 200 || body != "edge.a: one\nedge.b: two\n" {
		t.Errorf("GET /rlconfig: got %d %q", code, body)
	}
	want := `rls_decisions_total{domain="edge",outcome="over_limit",rule="per-ip"} 1`
	if code, body := do(t, h, "GET", "/metrics", ""); code != 200 || !strings.Contains(body, want) {
		t.Errorf("GET /metrics: got %d, want a body containing %q", code, want)
	}
}
