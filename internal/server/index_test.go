package server

import (
	"net/http"
	"strings"
	"testing"
)

// TestIndex: GET / answers a plain-text index of the version and the
// endpoints served on -http-addr, leaving out those the flags turned off;
// another method, or any other unknown path, is still 404.
func TestIndex(t *testing.T) {
	t.Parallel()
	s := startInProcess(t, "-admin-token-file", tokenFile(t, opsToken+"\n"))
	resp, err := httpClient.Get("http://" + s.httpAddr + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("GET /: %d %q, want 200 text/plain", resp.StatusCode, ct)
	}
	code, body := httpDo(t, "GET", "http://"+s.httpAddr+"/", "")
	for _, want := range []string{"envoy-rls (version unknown)\n", "GET  /healthz, /healthcheck", "POST /json", "GET  /metrics", "GET  /rlconfig", "GET  /explain?", "GET  /top", "POST /reset", "GET  /rlqs?",
		"gRPC, on " + s.grpcAddr + ":", "envoy.service.ratelimit.v3.RateLimitService", "RateLimitQuotaService (RLQS)", "server reflection", "envoy-rls call"} {
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("GET / (%d) lacks %q:\n%s", code, want, body)
		}
	}
	for _, req := range [][2]string{{"POST", "/"}, {"GET", "/nope"}} {
		if code, _ := httpDo(t, req[0], "http://"+s.httpAddr+req[1], ""); code != http.StatusNotFound && code != http.StatusMethodNotAllowed {
			t.Errorf("%s %s: %d, want 404 or 405", req[0], req[1], code)
		}
	}

	off := startInProcess(t, "-json-endpoint=false", "-explain-endpoint=false", "-rlqs=false", "-grpc-reflection=false")
	_, body = httpDo(t, "GET", "http://"+off.httpAddr+"/", "")
	for _, gone := range []string{"/json", "/explain", "/top", "RLQS", "reflection"} {
		if strings.Contains(body, gone) {
			t.Errorf("GET / with it off lists %q:\n%s", gone, body)
		}
	}
}
