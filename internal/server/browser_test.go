package server

import (
	"io"
	"net/http"
	"strings"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/credentials/insecure"
)

// browserDo sends a request with header, and with host as its Host when
// not empty, as a page in a browser would.
func browserDo(t *testing.T, method, url, host, body string, header map[string]string) int {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body) //nolint:errcheck // the status is what counts
	return resp.StatusCode
}

// TestBrowserRequestsRefused: with -admin-addr and no token file, a
// locked-out descriptor stays refused whatever a page in a browser sends
// to POST /reset: a simple request (text/plain, a form, no Origin, as an
// old browser sends it), a request another site's page sends, one from a
// page whose name rebinds to the service's address; GET /top and POST
// /json refuse them too. Each refusal is counted by endpoint and reason.
// curl's requests, and a page served from the address itself, still
// work.
func TestBrowserRequestsRefused(t *testing.T) {
	s := startInProcess(t, "-admin-addr", "127.0.0.1:0")
	conn := grpcDial(t, s.grpcAddr, insecure.NewCredentials())
	wantCode := func(want rlsv3.RateLimitResponse_Code) {
		t.Helper()
		resp, err := grpcCall(conn, "a")
		if err != nil || resp.OverallCode != want {
			t.Fatalf("k=a: got %v, %v; want %v", resp, err, want)
		}
	}
	wantCode(rlsv3.RateLimitResponse_OK)
	wantCode(rlsv3.RateLimitResponse_OVER_LIMIT)

	reset := "http://" + s.adminAddr + "/reset"
	rebound := "rebound.example:" + s.adminAddr[strings.LastIndex(s.adminAddr, ":")+1:]
	body := jsonRequest("a", "")
	for _, c := range []struct {
		name, host string
		header     map[string]string
		want       int
	}{
		{"text/plain, no Origin", "", map[string]string{"Content-Type": "text/plain"}, http.StatusUnsupportedMediaType},
		{"a form, no Origin", "", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, http.StatusUnsupportedMediaType},
		{"no type, no Origin", "", nil, http.StatusUnsupportedMediaType},
		{"text/plain, cross-site", "", map[string]string{"Content-Type": "text/plain", "Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"JSON, same-site", "", map[string]string{"Content-Type": "application/json", "Origin": "https://a.example.com", "Sec-Fetch-Site": "same-site"}, http.StatusForbidden},
		{"JSON, another Origin", "", map[string]string{"Content-Type": "application/json", "Origin": "https://evil.example"}, http.StatusForbidden},
		{"JSON, Origin null", "", map[string]string{"Content-Type": "application/json", "Origin": "null"}, http.StatusForbidden},
		{"JSON, rebinding page", rebound, map[string]string{"Content-Type": "application/json", "Origin": "http://" + rebound, "Sec-Fetch-Site": "same-origin"}, http.StatusForbidden},
	} {
		if code := browserDo(t, "POST", reset, c.host, body, c.header); code != c.want {
			t.Errorf("reset, %s: %d, want %d", c.name, code, c.want)
		}
	}
	wantCode(rlsv3.RateLimitResponse_OVER_LIMIT) // nothing was reset

	if code := browserDo(t, "GET", "http://"+s.adminAddr+"/top", "", "", map[string]string{"Sec-Fetch-Site": "cross-site"}); code != http.StatusForbidden {
		t.Errorf("top, cross-site: %d, want 403", code)
	}
	if code := browserDo(t, "GET", "http://"+s.adminAddr+"/top", rebound, "", map[string]string{"Sec-Fetch-Site": "same-origin"}); code != http.StatusForbidden {
		t.Errorf("top, rebinding page: %d, want 403", code)
	}
	json := "http://" + s.httpAddr + "/json"
	if code := browserDo(t, "POST", json, "", body, map[string]string{"Content-Type": "text/plain", "Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}); code != http.StatusForbidden {
		t.Errorf("json, cross-site: %d, want 403", code)
	}
	wantCode(rlsv3.RateLimitResponse_OVER_LIMIT)

	// curl's: /json with a form's type (curl -d), /top, and the reset.
	if code := browserDo(t, "POST", json, "", jsonRequest("b", ""), map[string]string{"Content-Type": "application/x-www-form-urlencoded"}); code != http.StatusOK {
		t.Errorf("json as curl -d sends it: %d, want 200", code)
	}
	if code := browserDo(t, "GET", "http://"+s.adminAddr+"/top", "", "", nil); code != http.StatusOK {
		t.Errorf("top as curl sends it: %d, want 200", code)
	}
	page := map[string]string{"Content-Type": "application/json", "Origin": "http://" + s.adminAddr, "Sec-Fetch-Site": "same-origin"}
	if code := browserDo(t, "POST", "http://"+s.adminAddr+"/reset", "", jsonRequest("nothing", ""), page); code == http.StatusForbidden || code == http.StatusUnsupportedMediaType {
		t.Errorf("reset from a page the admin address serves: %d, want it answered", code)
	}
	if code := browserDo(t, "POST", reset, "", body, map[string]string{"Content-Type": "application/json; charset=utf-8"}); code != http.StatusOK {
		t.Fatalf("reset as curl -H 'Content-Type: application/json' sends it: %d, want 200", code)
	}
	wantCode(rlsv3.RateLimitResponse_OK)

	wantMetrics(t, s.httpAddr, map[string]string{
		`rls_browser_refused_total{endpoint="reset",reason="content_type"}`:   "3",
		`rls_browser_refused_total{endpoint="reset",reason="cross_site"}`:     "2",
		`rls_browser_refused_total{endpoint="reset",reason="foreign_origin"}`: "3",
		`rls_browser_refused_total{endpoint="top",reason="cross_site"}`:       "1",
		`rls_browser_refused_total{endpoint="top",reason="foreign_origin"}`:   "1",
		`rls_browser_refused_total{endpoint="json",reason="cross_site"}`:      "1",
	})
}
