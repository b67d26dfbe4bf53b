package server

import (
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/envoy-rls/envoy-rls/internal/metrics"
)

// forwardAuthPolicy is a forward-auth file of one policy, name, keying
// serveLimits' k on the header X-K.
func forwardAuthPolicy(name string) string {
	return "policies:\n  - name: " + name + "\n    domain: test\n    rate_limits:\n      - actions: [{request_headers: {header_name: x-k, descriptor_key: k}}]\n"
}

func forwardAuthGet(t *testing.T, s *inProcess, policy, k string) (int, string) {
	t.Helper()
	return httpDoWith(t, "GET", "http://"+s.httpAddr+"/v1/forward-auth/"+policy, "", http.Header{"X-K": {k}})
}

// TestForwardAuthOffByDefault: without -forward-auth-config the path is
// unknown, and GET / does not list it.
func TestForwardAuthOffByDefault(t *testing.T) {
	s := startInProcess(t)
	if code, _ := forwardAuthGet(t, s, "edge", "a"); code != http.StatusNotFound {
		t.Errorf("GET /v1/forward-auth/edge by default: %d, want 404", code)
	}
	if _, index := httpDo(t, "GET", "http://"+s.httpAddr+"/", ""); strings.Contains(index, "/v1/forward-auth") {
		t.Errorf("GET / lists /v1/forward-auth while it is off:\n%s", index)
	}
}

// TestForwardAuthReload: the file is served, decided by the service
// (serveLimits: one an hour), reread when it changes; a bad edit is
// counted and the last good file stays in force.
func TestForwardAuthReload(t *testing.T) {
	path := writeFile(t, "forward-auth.yaml", forwardAuthPolicy("one"))
	s := startInProcess(t, "-forward-auth-config", path)
	if _, index := httpDo(t, "GET", "http://"+s.httpAddr+"/", ""); !strings.Contains(index, "/v1/forward-auth/{policy}") {
		t.Errorf("GET / does not list /v1/forward-auth:\n%s", index)
	}
	if code, out := forwardAuthGet(t, s, "one", "a"); code != http.StatusOK {
		t.Fatalf("first call: %d %s, want 200", code, out)
	}
	if code, out := forwardAuthGet(t, s, "one", "a"); code != http.StatusTooManyRequests {
		t.Fatalf("second call: %d %s, want 429", code, out)
	}
	if err := os.WriteFile(path, []byte("policies:\n  - name: two\n    domian: test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := waitMetric(t, s, `rls_forward_auth_reloads_total{result="failure"}`, "1", 15*time.Second); got != "1" {
		t.Fatalf("failed reloads: %q, want 1", got)
	}
	if code, out := forwardAuthGet(t, s, "one", "b"); code != http.StatusOK {
		t.Fatalf("after a bad edit: %d %s, want the last good file's 200", code, out)
	}
	if got := metric(t, s.httpAddr, "rls_forward_auth_last_reload_successful"); got != "0" {
		t.Errorf("last reload successful after a bad edit: %q, want 0", got)
	}
	if err := os.WriteFile(path, []byte(forwardAuthPolicy("two")), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := waitMetric(t, s, `rls_forward_auth_reloads_total{result="success"}`, "1", 15*time.Second); got != "1" {
		t.Fatalf("good reloads: %q, want 1", got)
	}
	if code, _ := forwardAuthGet(t, s, "one", "c"); code != http.StatusNotFound {
		t.Errorf("the old policy after a good edit: %d, want 404", code)
	}
	if code, out := forwardAuthGet(t, s, "two", "c"); code != http.StatusOK {
		t.Errorf("the new policy: %d %s, want 200", code, out)
	}
	_, body := httpDo(t, "GET", "http://"+s.httpAddr+"/metrics", "")
	for _, want := range []string{`rls_forward_auth_total{outcome="allowed",policy="one"} 2`, `rls_forward_auth_total{outcome="refused",policy="one"} 1`, `rls_forward_auth_total{outcome="unknown_policy",policy=""} 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// TestForwardAuthBadFileStopsStart: a file that does not load stops the
// start, with the flag, the file, the line and the field.
func TestForwardAuthBadFileStopsStart(t *testing.T) {
	path := writeFile(t, "fa.yaml", "policies:\n  - name: p\n    domain: test\n    rate_limits:\n      - actions: [{destination_cluster: {}}]\n")
	o, err := parseFlags([]string{"-forward-auth-config", path}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	_, err = newForwardAuth(o, metrics.New(), zap.NewNop())
	want := "-forward-auth-config: " + path + ":5: destination_cluster: not available behind forward-auth"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("got %v, want %s...", err, want)
	}
}
