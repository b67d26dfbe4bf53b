package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

const tenantToken = "tenant-0123456789abcdef"

// readUsage reads GET /v1/usage of k=value on s with token ("" for
// none).
func readUsage(t *testing.T, s *inProcess, value, token string) (int, string) {
	t.Helper()
	return adminDo(t, "GET", "http://"+s.httpAddr+"/v1/usage?domain=test&descriptor=k="+value, token, "")
}

// TestUsageOffByDefault: without -usage-endpoint or -tenant-token-file,
// /v1/usage is an unknown path, and GET / does not list it.
func TestUsageOffByDefault(t *testing.T) {
	s := startInProcess(t)
	if code, _ := readUsage(t, s, "a", ""); code != http.StatusNotFound {
		t.Errorf("GET /v1/usage by default: %d, want 404", code)
	}
	if _, index := httpDo(t, "GET", "http://"+s.httpAddr+"/", ""); strings.Contains(index, "/v1/usage") {
		t.Errorf("GET / lists /v1/usage while it is off:\n%s", index)
	}
}

// TestUsageEndpointFlag: -usage-endpoint serves the read without a
// token, on the embedded store; it consumes nothing.
func TestUsageEndpointFlag(t *testing.T) {
	s := startInProcess(t, "-usage-endpoint")
	if _, index := httpDo(t, "GET", "http://"+s.httpAddr+"/", ""); !strings.Contains(index, "/v1/usage") {
		t.Errorf("GET / does not list /v1/usage:\n%s", index)
	}
	for range 2 {
		if code, out := readUsage(t, s, "a", ""); code != http.StatusOK || !strings.Contains(out, `"used": 0`) {
			t.Fatalf("before any hit: %d %s", code, out)
		}
	}
	if code, out := s.postJSON(t, jsonRequest("a", "")); code != http.StatusOK {
		t.Fatalf("the first hit, after the reads: %d %s, want 200 (the reads consumed nothing)", code, out)
	}
	code, out := readUsage(t, s, "a", "")
	var u rls.Usage
	if err := json.Unmarshal([]byte(out), &u); code != http.StatusOK || err != nil || len(u.Limits) != 1 {
		t.Fatalf("after a hit: %d %s (%v)", code, out, err)
	}
	if l := u.Limits[0]; l.Name != "one" || l.Used != 1 || l.Remaining != 0 || l.Allowed || l.ResetSeconds <= 0 || l.Limit.PeriodSeconds != 3600 {
		t.Errorf("after a hit: %+v", l)
	}
	if code, out := readUsage(t, s, "a", "anything-at-all-here"); code != http.StatusOK {
		t.Errorf("a token where none is asked for: %d %s, want 200", code, out)
	}
}

// TestUsageTenantTokens: -tenant-token-file guards the read with its own
// tokens; the admin's are not accepted there, nor the tenants' on the
// admin endpoints, which stay as they are.
func TestUsageTenantTokens(t *testing.T) {
	s := startInProcess(t, "-tenant-token-file", tokenFile(t, "acme "+tenantToken+"\n"),
		"-admin-token-file", tokenFile(t, "ops "+opsToken+"\n"))
	for _, tc := range []struct {
		token string
		code  int
	}{{"", http.StatusUnauthorized}, {opsToken, http.StatusUnauthorized}, {tenantToken, http.StatusOK}} {
		if code, out := readUsage(t, s, "a", tc.token); code != tc.code {
			t.Errorf("GET /v1/usage with token %q: %d %s, want %d", tc.token, code, out, tc.code)
		}
	}
	top := "http://" + s.httpAddr + "/top"
	if code, _ := adminDo(t, "GET", top, tenantToken, ""); code != http.StatusUnauthorized {
		t.Errorf("GET /top with a tenant's token: %d, want 401", code)
	}
	if code, _ := adminDo(t, "GET", top, opsToken, ""); code != http.StatusOK {
		t.Errorf("GET /top with the admin's token: %d, want 200", code)
	}
	if code, out := adminDo(t, "GET", "http://"+s.httpAddr+"/v1/usage?domain=nowhere&descriptor=k=a", tenantToken, ""); code != http.StatusNotFound {
		t.Errorf("an unknown domain: %d %s, want 404", code, out)
	}
}

// TestUsageBadTokenFile: a tenant token file that does not load stops
// the start, as the admin's does.
func TestUsageBadTokenFile(t *testing.T) {
	o, err := parseFlags([]string{"-tenant-token-file", tokenFile(t, "short\n")}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newUsage(o, zap.NewNop()); err == nil || !strings.Contains(err.Error(), "-tenant-token-file: line 1") {
		t.Errorf("a token too short: %v, want an error naming -tenant-token-file and the line", err)
	}
}

// TestUsageAcrossInstances: on Redis, one instance reads what another
// charged.
func TestUsageAcrossInstances(t *testing.T) {
	srv := redistest.Start(t)
	a := startInProcess(t, "-redis-url", srv.URL(), "-usage-endpoint")
	b := startInProcess(t, "-redis-url", srv.URL(), "-usage-endpoint")
	if code, out := a.postJSON(t, jsonRequest("shared", "")); code != http.StatusOK {
		t.Fatalf("hit on a: %d %s", code, out)
	}
	code, out := readUsage(t, b, "shared", "")
	if code != http.StatusOK || !strings.Contains(out, `"used": 1`) || !strings.Contains(out, `"remaining": 0`) {
		t.Errorf("read on b: %d %s; want used 1, remaining 0", code, out)
	}
	if code, out := b.postJSON(t, jsonRequest("shared", "")); code != http.StatusTooManyRequests {
		t.Errorf("hit on b after the read: %d %s, want 429", code, out)
	}
}
