package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
	"github.com/envoy-rls/envoy-rls/pkg/limits/memory"
	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

func TestParseExplainQuery(t *testing.T) {
	es := func(kv ...string) []descriptors.Entry {
		var out []descriptors.Entry
		for i := 0; i+1 < len(kv); i += 2 {
			out = append(out, descriptors.Entry{Key: kv[i], Value: kv[i+1]})
		}
		return out
	}
	for _, tc := range []struct {
		raw     string
		domain  string
		entries []descriptors.Entry
		format  string
	}{
		{"domain=edge&descriptor=remote_address=1.2.3.4,path=/login", "edge", es("remote_address", "1.2.3.4", "path", "/login"), ""},
		// Separators before decoding: a value may hold , and =.
		{"descriptor=q=a%2Cb%3Dc,k=v&domain=edge&format=json", "edge", es("q", "a,b=c", "k", "v"), "json"},
		{"domain=my%20domain&descriptor=path=%2Fapi%2Fv1+x,e=", "my domain", es("path", "/api/v1 x", "e", ""), ""},
		// Encoded whole, as curl --data-urlencode writes it.
		{"domain=edge&descriptor=remote_address%3D1.2.3.4%2Cpath%3D%2Flogin&format=text", "edge", es("remote_address", "1.2.3.4", "path", "/login"), "text"},
		{"domain=edge&descriptor=a=b=c", "edge", es("a", "b=c"), ""},
	} {
		q, err := parseExplainQuery(tc.raw)
		if err != nil {
			t.Errorf("%s: %v", tc.raw, err)
			continue
		}
		if q.domain != tc.domain || !reflect.DeepEqual(q.entries, tc.entries) || q.format != tc.format {
			t.Errorf("%s: got %q %v %q, want %q %v %q", tc.raw, q.domain, q.entries, q.format, tc.domain, tc.entries, tc.format)
		}
	}
	for raw, want := range map[string]string{
		"":                                      "missing domain",
		"descriptor=a=b":                        "missing domain",
		"domain=edge":                           "missing descriptor",
		"domain=edge&descriptor=":               "missing descriptor",
		"domain=edge&descriptor=a=b&x=1":        `unknown parameter "x"`,
		"domain=edge&descriptor=a=b&domain=e":   "domain given twice",
		"domain=edge&descriptor=a=b&format=xml": `format "xml"`,
		"domain=edge&descriptor=a=b,c":          `entry "c"`,
		"domain=edge&descriptor=a=b,,c=d":       `entry ""`,
		"domain=edge&descriptor==b":             `entry "=b"`,
		"domain=edge&descriptor=a=%zz":          "descriptor",
		"domain=%zz&descriptor=a=b":             "domain",
	} {
		if _, err := parseExplainQuery(raw); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one mentioning %q", raw, err, want)
		}
	}
}

// newExplainHandler is the HTTP API with /explain over a real rls.Service
// on a fixed-clock embedded store, with rlsLimits loaded.
func newExplainHandler(t *testing.T) http.Handler {
	t.Helper()
	svc, _ := memoryService(t, rlsLimits)
	return Handler(Options{Limiter: svc, ConfigLines: func() []string { return nil }, Explainer: svc})
}

// memoryService is an rls.Service of the limits file yaml on a
// fixed-clock embedded store, which it returns too.
func memoryService(t testing.TB, yaml string) (*rls.Service, *memory.Store) {
	t.Helper()
	d, err := config.Parse("limits.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	store := memory.New(memory.Options{SweepInterval: -1, Now: fixedClock})
	t.Cleanup(func() { store.Close() })
	svc, err := rls.New(descriptors.NewIndex(&config.Config{Domains: map[string]*config.Domain{d.Name: d}}), rls.Options{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	return svc, store
}

func get(h http.Handler, target string, header ...string) (int, string, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := httptest.NewRequestWithContext(ctx, "GET", target, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	res := rec.Result()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header.Get("Content-Type"), string(body)
}

func TestExplainEndpoint(t *testing.T) {
	h := newExplainHandler(t)
	// Two hits on one user of /api/*: its two limits show them; the peeks
	// below consume nothing.
	body := []byte(`{"domain":"edge","descriptors":[{"entries":[{"key":"path","value":"/api/v1"},{"key":"user","value":"u1"}]}]}`)
	for range 2 {
		if code, _, out := postJSON(h, body); code != http.StatusOK {
			t.Fatalf("/json: %d %s", code, out)
		}
	}
	const target = "/explain?domain=edge&descriptor=path=/api/v1,user=u1"

	code, ctype, text := get(h, target)
	if code != http.StatusOK || ctype != "text/plain; charset=utf-8" {
		t.Fatalf("text: %d %q %s", code, ctype, text)
	}
	for _, want := range []string{
		"domain:     edge (limits.yaml)\n",
		"descriptor: path=/api/v1, user=u1\n",
		`  1. path=/api/v1: wildcard "/api/*" -> node path_/api/* (line `,
		"  2. user=u1: bare key user (one counter per value) -> node path_/api/*.user (line ",
		"  [0] user-log: sliding_log, 5 per second, failure mode allow (the service's), shadow false",
		"  [1] user-hour: fixed_window, 100 per hour, failure mode allow (the service's), shadow false",
		"      state: remaining 3 of 5, reset 1s; a request of cost 1 would be allowed (the status reports this limit)\n",
		// fixedClock is 800 s into its hour.
		"      state: remaining 98 of 100, reset 46m40s; a request of cost 1 would be allowed\n",
		"outcome:    a request of cost 1 would be allowed now; the status would report user-log with 3 remaining\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}

	for _, how := range [][]string{{target + "&format=json"}, {target, "Accept", "application/json"}} {
		code, ctype, out := get(h, how[0], how[1:]...)
		if code != http.StatusOK || ctype != "application/json" {
			t.Fatalf("%v: %d %q %s", how, code, ctype, out)
		}
		var ex rls.Explanation
		if err := json.NewDecoder(bytes.NewReader([]byte(out))).Decode(&ex); err != nil {
			t.Fatalf("%v: %v\n%s", how, err, out)
		}
		if !ex.DomainKnown || len(ex.Levels) != 2 || ex.Levels[0].Match != rls.MatchWildcard || ex.Levels[1].Match != rls.MatchBare ||
			len(ex.Limits) != 2 || ex.Limits[0].State.Remaining != 3 || ex.Limits[1].State.Remaining != 98 ||
			!strings.HasPrefix(ex.Limits[1].Key, "rls:{") {
			t.Errorf("%v: %s", how, out)
		}
	}
	// format=text wins over the Accept header.
	if _, ctype, _ := get(h, target+"&format=text", "Accept", "application/json"); !strings.HasPrefix(ctype, "text/plain") {
		t.Errorf("format=text answered %q", ctype)
	}
	// Still two hits: the peeks consumed nothing.
	if _, _, out := get(h, target); !strings.Contains(out, "remaining 3 of 5") {
		t.Errorf("after the peeks:\n%s", out)
	}

	for target, want := range map[string]int{
		"/explain?domain=edge":                  http.StatusBadRequest,
		"/explain?domain=edge&descriptor=nokey": http.StatusBadRequest,
		"/explain?domain=edge&descriptor=" + strings.Repeat("k=v,", rls.MaxEntries) + "k=v": http.StatusBadRequest,
		"/explain?domain=other&descriptor=k=v":                                              http.StatusOK,
	} {
		if code, _, out := get(h, target); code != want {
			t.Errorf("%s: %d %s, want %d", target, code, out, want)
		}
	}
}

func TestExplainEndpointOff(t *testing.T) {
	h := Handler(Options{ConfigLines: func() []string { return nil }})
	if code, _, _ := get(h, "/explain?domain=edge&descriptor=k=v"); code != http.StatusNotFound {
		t.Errorf("without an Explainer: %d, want 404", code)
	}
	hx := newExplainHandler(t)
	req := httptest.NewRequest("POST", "/explain?domain=edge&descriptor=k=v", nil)
	rec := httptest.NewRecorder()
	hx.ServeHTTP(rec, req)
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /explain: %d, want 405", rec.Code)
	}
}

// FuzzParseExplainQuery: any query either fails or yields a domain and
// entries with keys; none panics.
func FuzzParseExplainQuery(f *testing.F) {
	for _, s := range []string{
		"domain=edge&descriptor=remote_address=1.2.3.4,path=/login",
		"domain=edge&descriptor=remote_address%3D1.2.3.4%2Cpath%3D%2Flogin&format=json",
		"descriptor=a=%2C,b==&domain=%",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := parseExplainQuery(raw)
		if err != nil {
			return
		}
		if q.domain == "" || len(q.entries) == 0 {
			t.Fatalf("%q: accepted without a domain or entries: %+v", raw, q)
		}
		for _, e := range q.entries {
			if e.Key == "" {
				t.Fatalf("%q: an entry without a key: %+v", raw, q)
			}
		}
	})
}

// Before any config, /explain answers 503 with the decision's words, as
// the decision answers UNAVAILABLE; a request out of bounds stays 400.
func TestExplainBeforeConfig(t *testing.T) {
	store := memory.New(memory.Options{SweepInterval: -1, Now: fixedClock})
	t.Cleanup(func() { store.Close() })
	svc, err := rls.New(descriptors.NewIndex(nil), rls.Options{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	h := Handler(Options{Limiter: svc, ConfigLines: func() []string { return nil }, Explainer: svc})
	if code, _, out := get(h, "/explain?domain=edge&descriptor=a=b"); code != http.StatusServiceUnavailable || !strings.Contains(out, "no rate limit configuration loaded") {
		t.Errorf("before any config: %d %s, want 503 no rate limit configuration loaded", code, out)
	}
	long := "a=b" + strings.Repeat(",a=b", rls.MaxEntries)
	if code, _, out := get(h, "/explain?domain=edge&descriptor="+long); code != http.StatusBadRequest || !strings.Contains(out, "above the maximum") {
		t.Errorf("out of bounds: %d %s, want 400", code, out)
	}
}
