package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

const usageLimits = `
domain: llm
descriptors:
  - key: api_key
    rate_limits:
      - {name: tokens-per-minute, algorithm: token_bucket, unit: minute, requests_per_unit: 1000}
      - {name: daily-budget, algorithm: fixed_window, unit: day, requests_per_unit: 10000, warn_at: [0.5, 0.8]}
  - key: path
    value: /healthz
    rate_limit: {unlimited: true}
`

// usageServer is a real HTTP server of the API, with GET /v1/usage over
// an rls.Service on a fixed-clock embedded store; tokens, when not nil,
// guard it. It returns the server's URL and whether the store reads
// holds.
func usageServer(t *testing.T, tokens *Tokens) (string, bool) {
	t.Helper()
	svc, store := memoryService(t, usageLimits) // explain_test.go
	o := Options{Limiter: svc, ConfigLines: func() []string { return nil }, Usage: svc}
	if tokens != nil {
		o.UsageTokens = func() *Tokens { return tokens }
	}
	srv := httptest.NewServer(Handler(o))
	t.Cleanup(srv.Close)
	_, reads := limits.Store(store).(limits.HoldReader)
	return srv.URL, reads
}

// call sends method to url with the headers given (name, value, …) and
// returns the status and the body.
func call(t *testing.T, method, url string, body []byte, header ...string) (int, string) {
	t.Helper()
	code, _, out := roundTrip(t, method, url, body, header...)
	return code, out
}

// roundTrip sends method to url with body and the headers given (name,
// value, …; a name given twice is sent twice) and returns the status, the
// response's headers and its body.
func roundTrip(t *testing.T, method, url string, body []byte, header ...string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, res.Header, string(out)
}

// TestUsageEndpoint: every limit of the descriptor with what is used and
// left, as JSON, consuming nothing: a decision after the reads sees only
// the hits charged before them.
func TestUsageEndpoint(t *testing.T) {
	url, readsHolds := usageServer(t, nil)
	charge := []byte(`{"domain":"llm","hitsAddend":5000,"descriptors":[{"entries":[{"key":"api_key","value":"t1"}],"hitsAddend":"600"}]}`)
	if code, out := call(t, "POST", url+"/json", charge, "Content-Type", "application/json"); code != http.StatusOK {
		t.Fatalf("/json: %d %s", code, out)
	}
	target := url + "/v1/usage?domain=llm&descriptor=api_key=t1"
	var first string
	for i := range 3 {
		code, out := call(t, "GET", target, nil)
		if code != http.StatusOK {
			t.Fatalf("read %d: %d %s", i, code, out)
		}
		if i == 0 {
			first = out
		} else if out != first {
			t.Fatalf("read %d differs from the first:\n%s\n%s", i, out, first)
		}
	}
	var u rls.Usage
	if err := json.Unmarshal([]byte(first), &u); err != nil {
		t.Fatalf("%v\n%s", err, first)
	}
	if u.Domain != "llm" || len(u.Entries) != 1 || len(u.Limits) != 2 {
		t.Fatalf("usage: %s", first)
	}
	tpm, daily := u.Limits[0], u.Limits[1]
	if tpm.Name != "tokens-per-minute" || tpm.Limit != (rls.UsageRule{Algorithm: "token_bucket", Requests: 1000, PeriodSeconds: 60, Capacity: 1000}) ||
		tpm.Used != 600 || tpm.Remaining != 400 || !tpm.Allowed || tpm.ResetSeconds <= 0 || tpm.WarnAt != nil {
		t.Errorf("tokens-per-minute: %+v", tpm)
	}
	if daily.Name != "daily-budget" || daily.Limit.Requests != 10000 || daily.Limit.PeriodSeconds != 86400 ||
		daily.Used != 600 || daily.Remaining != 9400 || daily.WarnReached != 0 || len(daily.WarnAt) != 2 {
		t.Errorf("daily-budget: %+v", daily)
	}
	for _, l := range u.Limits {
		if l.HeldKnown != readsHolds || l.Held != 0 {
			t.Errorf("%s: held %d known %v; want 0, %v", l.Name, l.Held, l.HeldKnown, readsHolds)
		}
	}
	for _, field := range []string{`"used": 600`, `"held": 0`, `"held_known": `, `"remaining": 400`, `"reset_seconds": `, `"period_seconds": 60`} {
		if !strings.Contains(first, field) {
			t.Errorf("the JSON lacks %s:\n%s", field, first)
		}
	}
	// The reads consumed nothing: 600 + 400 fits the bucket exactly.
	fill := []byte(`{"domain":"llm","descriptors":[{"entries":[{"key":"api_key","value":"t1"}],"hitsAddend":"400"}]}`)
	if code, out := call(t, "POST", url+"/json", fill, "Content-Type", "application/json"); code != http.StatusOK {
		t.Errorf("/json after the reads: %d %s, want 200", code, out)
	}
}

// TestUsageEndpointAnswers: the status of each kind of query.
func TestUsageEndpointAnswers(t *testing.T) {
	url, _ := usageServer(t, nil)
	for _, tc := range []struct {
		target string
		code   int
		has    string
	}{
		{"/v1/usage?domain=llm&descriptor=path=/healthz", http.StatusOK, `"unlimited": true`},
		{"/v1/usage?domain=llm&descriptor=nothing=here", http.StatusOK, `"limits": []`},
		{"/v1/usage?domain=other&descriptor=api_key=t1", http.StatusNotFound, `unknown domain "other"`},
		{"/v1/usage?domain=llm", http.StatusBadRequest, "missing descriptor: /v1/usage?domain=D&descriptor=key=value,key2=value2"},
		{"/v1/usage?descriptor=a=b", http.StatusBadRequest, "missing domain"},
		{"/v1/usage?domain=llm&descriptor=nokey", http.StatusBadRequest, `descriptor entry "nokey": want key=value`},
		{"/v1/usage?domain=llm&descriptor=a=b&descriptor=c=d", http.StatusBadRequest, "given twice"},
		{"/v1/usage?domain=llm&descriptor=a=b&format=text", http.StatusBadRequest, "JSON only"},
		{"/v1/usage?domain=llm&descriptor=" + strings.Repeat("k=v,", rls.MaxEntries) + "k=v", http.StatusBadRequest, "above the maximum"},
	} {
		code, out := call(t, "GET", url+tc.target, nil)
		if code != tc.code || !strings.Contains(out, tc.has) {
			t.Errorf("%s: %d %s; want %d with %q", tc.target, code, out, tc.code, tc.has)
		}
	}
	if code, _ := call(t, "POST", url+"/v1/usage?domain=llm&descriptor=a=b", nil); code != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d, want 405", code)
	}
	if code, _ := call(t, "GET", url+"/v1/usage?domain=llm&descriptor=a=b", nil, "Sec-Fetch-Site", "cross-site"); code != http.StatusForbidden {
		t.Errorf("a page of another site: %d, want 403", code)
	}
}

// TestUsageEndpointTokens: with tokens, a call needs one of them; an
// admin's token is no tenant's.
func TestUsageEndpointTokens(t *testing.T) {
	tenants, err := ParseTokens([]byte("acme tenant-token-0123456789\n"))
	if err != nil {
		t.Fatal(err)
	}
	url, _ := usageServer(t, tenants)
	target := url + "/v1/usage?domain=llm&descriptor=api_key=t1"
	for _, tc := range []struct {
		header []string
		code   int
	}{
		{nil, http.StatusUnauthorized},
		{[]string{"Authorization", "Bearer admin-token-0123456789"}, http.StatusUnauthorized},
		{[]string{"Authorization", "tenant-token-0123456789"}, http.StatusUnauthorized},
		{[]string{"Authorization", "Bearer tenant-token-0123456789"}, http.StatusOK},
	} {
		if code, out := call(t, "GET", target, nil, tc.header...); code != tc.code {
			t.Errorf("%v: %d %s, want %d", tc.header, code, out, tc.code)
		}
	}
}

// TestUsageEndpointOff: without a reader, /v1/usage is an unknown path.
func TestUsageEndpointOff(t *testing.T) {
	h := Handler(Options{ConfigLines: func() []string { return nil }})
	if code, _, _ := get(h, "/v1/usage?domain=llm&descriptor=k=v"); code != http.StatusNotFound {
		t.Errorf("without a reader: %d, want 404", code)
	}
}
