package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/rlqs"
)

// fakeQuotas answers every bucket as divided, or fails.
type fakeQuotas struct {
	got []descriptors.Entry
	err error
}

func (f *fakeQuotas) Explain(_ context.Context, domain string, entries []descriptors.Entry) (rlqs.Bucket, error) {
	f.got = entries
	return rlqs.Bucket{Domain: domain, DomainKnown: true, Entries: entries, Outcome: rlqs.OutcomeDivided, Strategy: "token_bucket",
		RatePerSecond: 10, Clients: []rlqs.BucketClient{{ID: "i-1", SharePerSecond: 10}}}, f.err
}

func TestRLQSEndpoint(t *testing.T) {
	tokens, err := ParseTokens([]byte("ops ops-0123456789abcdef\n"))
	if err != nil {
		t.Fatal(err)
	}
	q := &fakeQuotas{}
	counted := map[string]int{}
	h := AdminHandler(AdminOptions{Quotas: q, Tokens: func() *Tokens { return tokens }, Log: zap.NewNop(),
		Counted: func(endpoint, result string) { counted[endpoint+" "+result]++ }})
	get := func(target string, auth bool, accept string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, target, nil)
		if auth {
			req.Header.Set("Authorization", "Bearer ops-0123456789abcdef")
		}
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	if w := get("/rlqs?domain=edge&bucket=plan=free", false, ""); w.Code != http.StatusUnauthorized {
		t.Fatalf("without a token: %d", w.Code)
	}
	w := get("/rlqs?domain=edge&bucket=plan=free,api_key=a%2Cb%3Dc", true, "")
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "clients:    1 live") {
		t.Fatalf("text: %d %s", w.Code, w.Body.String())
	}
	if len(q.got) != 2 || q.got[1] != (descriptors.Entry{Key: "api_key", Value: "a,b=c"}) {
		t.Fatalf("entries %v", q.got)
	}
	for _, target := range []string{"/rlqs?domain=edge&bucket=plan=free&format=json", "/rlqs?domain=edge&bucket=plan=free"} {
		w = get(target, true, map[bool]string{true: "", false: "application/json"}[strings.Contains(target, "format")])
		var b rlqs.Bucket
		if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil || w.Code != http.StatusOK || b.Outcome != rlqs.OutcomeDivided || len(b.Clients) != 1 {
			t.Fatalf("%s as JSON: %d %v %s", target, w.Code, err, w.Body.String())
		}
	}
	for _, target := range []string{
		"/rlqs?domain=edge",                           // no bucket
		"/rlqs?bucket=plan=free",                      // no domain
		"/rlqs?domain=edge&bucket=plan=free,plan=pro", // a key twice
		"/rlqs?domain=edge&bucket=plan=free&descriptor=x=y",
		"/rlqs?domain=edge&bucket=plan",
	} {
		if w := get(target, true, ""); w.Code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", target, w.Code)
		}
	}
	q.err = errors.New("redis down")
	if w := get("/rlqs?domain=edge&bucket=plan=free", true, ""); w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "redis down") {
		t.Fatalf("store down: %d %s", w.Code, w.Body.String())
	}
	off := AdminHandler(AdminOptions{Log: zap.NewNop()})
	w = httptest.NewRecorder()
	off.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/rlqs?domain=edge&bucket=plan=free", nil))
	if w.Code != http.StatusNotFound {
		t.Fatalf("RLQS off: %d", w.Code)
	}
	if counted["rlqs ok"] != 3 || counted["rlqs bad_request"] != 5 || counted["rlqs error"] != 1 || counted["rlqs unauthorized"] != 1 {
		t.Fatalf("counted %v", counted)
	}
}
