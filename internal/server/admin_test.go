package server

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
	"github.com/envoy-rls/envoy-rls/internal/topk"
)

const (
	opsToken   = "ops-0123456789abcdef"
	otherToken = "other-0123456789abcdef"
)

// tokenFile writes a token file and returns its path.
func tokenFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// adminDo sends an admin call with token ("" for none).
func adminDo(t *testing.T, method, url, token, body string) (int, string) {
	t.Helper()
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	if method == http.MethodPost {
		h.Set("Content-Type", "application/json")
	}
	return httpDoWith(t, method, url, body, h)
}

// wantMetrics checks samples of the server's /metrics, by series.
func wantMetrics(t *testing.T, httpAddr string, want map[string]string) {
	t.Helper()
	for series, v := range want {
		if got := metric(t, httpAddr, series); got != v {
			t.Errorf("%s: got %q, want %s", series, got, v)
		}
	}
}

// metric reads one sample of the server's /metrics, "" when absent.
func metric(t *testing.T, httpAddr, series string) string {
	t.Helper()
	_, body := httpDo(t, "GET", "http://"+httpAddr+"/metrics", "")
	for line := range strings.SplitSeq(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	return ""
}

func TestAdminOffByDefault(t *testing.T) {
	s := startInProcess(t)
	for _, c := range []struct{ method, path string }{{"GET", "/top"}, {"POST", "/reset"}} {
		if code, _ := adminDo(t, c.method, "http://"+s.httpAddr+c.path, opsToken, jsonRequest("a", "")); code != http.StatusNotFound {
			t.Errorf("%s %s without -admin-token-file or -admin-addr: %d, want 404", c.method, c.path, code)
		}
	}
}

// TestAdminOnHTTPAddr: with -admin-token-file the endpoints are on
// -http-addr; a call without a token or with a wrong one gets 401, changes
// nothing and is counted; /top shows the descriptor refused; a reset lets
// it through, is logged with the token's name and counted; a reset no
// limit matches is 404 with the reason.
func TestAdminOnHTTPAddr(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	s := startInProcessLogging(t, zap.New(core), "-admin-token-file", tokenFile(t, "# ops\nops "+opsToken+"\n"))
	conn := grpcDial(t, s.grpcAddr, insecure.NewCredentials())
	base := "http://" + s.httpAddr
	wantCode := func(value string, want rlsv3.RateLimitResponse_Code) {
		t.Helper()
		resp, err := grpcCall(conn, value)
		if err != nil || resp.OverallCode != want {
			t.Fatalf("k=%s: got %v, %v; want %v", value, resp, err, want)
		}
	}
	wantCode("a", rlsv3.RateLimitResponse_OK)
	wantCode("a", rlsv3.RateLimitResponse_OVER_LIMIT)

	for _, tok := range []string{"", otherToken} {
		if code, _ := adminDo(t, "POST", base+"/reset", tok, jsonRequest("a", "")); code != http.StatusUnauthorized {
			t.Errorf("reset with token %q: %d, want 401", tok, code)
		}
		if code, _ := adminDo(t, "GET", base+"/top", tok, ""); code != http.StatusUnauthorized {
			t.Errorf("top with token %q: %d, want 401", tok, code)
		}
	}
	wantCode("a", rlsv3.RateLimitResponse_OVER_LIMIT) // nothing was reset

	code, body := adminDo(t, "GET", base+"/top", opsToken, "")
	var rep topk.Report
	if err := json.Unmarshal([]byte(body), &rep); code != http.StatusOK || err != nil {
		t.Fatalf("top: %d %s (%v)", code, body, err)
	}
	if len(rep.Rules) != 1 || rep.Rules[0].Rule != "one" || rep.Rules[0].Refused != 2 ||
		rep.Rules[0].Top[0] != (topk.Key{Descriptor: "k=a", Count: 2}) {
		t.Fatalf("top: got %s, want rule one refusing k=a twice", body)
	}

	if code, body := adminDo(t, "POST", base+"/reset", opsToken, jsonRequest("a", "")); code != http.StatusOK || !strings.Contains(body, `"name": "one"`) {
		t.Fatalf("reset: %d %s, want 200 naming the limit one", code, body)
	}
	wantCode("a", rlsv3.RateLimitResponse_OK)
	code, body = adminDo(t, "POST", base+"/reset", opsToken, `{"domain":"test","descriptors":[{"entries":[{"key":"nothing","value":"1"}]}]}`)
	if code != http.StatusNotFound || !strings.Contains(body, "no node matches entry 1 (nothing=1)") {
		t.Errorf("reset of a descriptor no limit matches: %d %s, want 404 with the reason", code, body)
	}

	resets := logs.FilterMessage("reset").All()
	if len(resets) != 1 || !strings.HasPrefix(resets[0].ContextMap()["who"].(string), "token ops from 127.0.0.1:") ||
		resets[0].ContextMap()["descriptor"] != "k=a" {
		t.Errorf("reset log: got %v, want one line naming the token ops, its peer and k=a", resets)
	}
	wantMetrics(t, s.httpAddr, map[string]string{
		`rls_admin_requests_total{endpoint="reset",result="unauthorized"}`: "2",
		`rls_admin_requests_total{endpoint="top",result="unauthorized"}`:   "2",
		`rls_admin_requests_total{endpoint="reset",result="ok"}`:           "1",
		`rls_admin_requests_total{endpoint="reset",result="not_found"}`:    "1",
		`rls_admin_requests_total{endpoint="top",result="ok"}`:             "1",
	})
}

// TestAdminResetRedis: on -admin-addr, with a token, a reset lets a
// descriptor through on a single Redis and on a Cluster, past the
// over-limit cache that answered its last refusal; /top is not on
// -http-addr then.
func TestAdminResetRedis(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	cl := redistest.StartCluster(t, 3)
	for name, store := range map[string][]string{
		"single":  {"-redis-url", srv.URL()},
		"cluster": {"-redis-cluster", strings.Join(cl.Addrs(), ",")},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"-admin-addr", "127.0.0.1:0", "-admin-token-file", tokenFile(t, opsToken+"\n")}, store...)
			s := startInProcess(t, args...)
			conn := grpcDial(t, s.grpcAddr, insecure.NewCredentials())
			for i, want := range []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT, rlsv3.RateLimitResponse_OVER_LIMIT} {
				if resp, err := grpcCall(conn, "a"); err != nil || resp.OverallCode != want {
					t.Fatalf("call %d: %v, %v; want %v", i, resp, err, want)
				}
			}
			if code, _ := adminDo(t, "GET", "http://"+s.httpAddr+"/top", opsToken, ""); code != http.StatusNotFound {
				t.Errorf("/top on -http-addr with -admin-addr: %d, want 404", code)
			}
			if code, body := adminDo(t, "POST", "http://"+s.adminAddr+"/reset", "", jsonRequest("a", "")); code != http.StatusUnauthorized {
				t.Errorf("reset on -admin-addr without a token: %d %s, want 401", code, body)
			}
			if code, body := adminDo(t, "POST", "http://"+s.adminAddr+"/reset", opsToken, jsonRequest("a", "")); code != http.StatusOK {
				t.Fatalf("reset: %d %s", code, body)
			}
			if resp, err := grpcCall(conn, "a"); err != nil || resp.OverallCode != rlsv3.RateLimitResponse_OK {
				t.Errorf("after the reset: %v, %v; want OK", resp, err)
			}
		})
	}
}

// TestAdminTokenFileReread: a new token file takes effect without a
// restart, and the old token stops working; a file that no longer loads
// keeps the last good tokens.
func TestAdminTokenFileReread(t *testing.T) {
	path := tokenFile(t, opsToken+"\n")
	s := startInProcess(t, "-admin-token-file", path)
	top := "http://" + s.httpAddr + "/top"
	if code, _ := adminDo(t, "GET", top, opsToken, ""); code != http.StatusOK {
		t.Fatalf("the first token: %d, want 200", code)
	}
	if err := os.WriteFile(path, []byte("other "+otherToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, _ := adminDo(t, "GET", top, otherToken, "")
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new token is still refused (%d) 10 s after the file changed", code)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, _ := adminDo(t, "GET", top, opsToken, ""); code != http.StatusUnauthorized {
		t.Errorf("the old token after the change: %d, want 401", code)
	}
	if err := os.WriteFile(path, []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // past the watch's debounce and settle
	if code, _ := adminDo(t, "GET", top, otherToken, ""); code != http.StatusOK {
		t.Errorf("after a file that does not load: %d, want the last good token still accepted", code)
	}
}

// TestAdminTokenFileRefused: a token file that does not load stops the
// start, naming the flag.
func TestAdminTokenFileRefused(t *testing.T) {
	for _, content := range []string{"", "# only a comment\n", "short\n", "a b c\n"} {
		o, err := parseFlags([]string{"-admin-token-file", tokenFile(t, content)}, env(nil))
		if err != nil {
			t.Fatal(err)
		}
		a, err := newAdmin(o, nil, nil, nil, zap.NewNop())
		if err == nil || !strings.Contains(err.Error(), "-admin-token-file") {
			a.close()
			t.Errorf("token file %q: got %v, want an error naming -admin-token-file", content, err)
		}
	}
}

// TestAdminResetHeardByOthers: two instances on one Redis; the second's
// over-limit cache holds the refusal of k=a, which would refuse it for the
// rest of the hour; a reset sent to the first reaches the second's cache
// through Redis, and the second lets k=a through.
func TestAdminResetHeardByOthers(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	tokens := tokenFile(t, opsToken+"\n")
	a := startInProcess(t, "-redis-url", srv.URL(), "-admin-token-file", tokens)
	b := startInProcess(t, "-redis-url", srv.URL(), "-admin-token-file", tokens)
	connB := grpcDial(t, b.grpcAddr, insecure.NewCredentials())
	for i, want := range []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT, rlsv3.RateLimitResponse_OVER_LIMIT} {
		if resp, err := grpcCall(connB, "a"); err != nil || resp.OverallCode != want {
			t.Fatalf("call %d on b: %v, %v; want %v", i, resp, err, want)
		}
	}
	if got := metric(t, b.httpAddr, "rls_over_limit_cache_answers_total"); got != "1" {
		t.Fatalf("b's over-limit cache answered %q refusals, want 1", got)
	}
	if code, body := adminDo(t, "POST", "http://"+a.httpAddr+"/reset", opsToken, jsonRequest("a", "")); code != http.StatusOK {
		t.Fatalf("reset on a: %d %s", code, body)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := grpcCall(connB, "a")
		if err != nil {
			t.Fatal(err)
		}
		if resp.OverallCode == rlsv3.RateLimitResponse_OK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("b still refuses k=a 10 s after the reset on a")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
