package integration

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
)

// blockLimits close one path with envoyproxy/ratelimit's block rule,
// requests_per_unit 0, as its own example file does.
const blockLimits = `domain: edge
descriptors:
  - key: path
    value: /admin
    rate_limit: {unit: minute, requests_per_unit: 0}
  - key: path
    rate_limit: {unit: minute, requests_per_unit: 100}
`

// Operators' mistakes, made as a new user makes them, run as
// envoyproxy/ratelimit: a notes.txt and a team/ subdirectory in the
// runtime directory, a wrong REDIS_AUTH, a typo in an RLS_ variable, a
// PROMETHEUS_MAPPER_YAML that names nothing. The drop-in serves through
// every one and says so, naming the variables the operator set; Redis's
// refusal is unhealthy until Redis takes the password. And the block rule
// refuses every request.
func TestDropInMistakes(t *testing.T) {
	t.Parallel()
	bin := dropInBinary(t)
	srv := redistest.StartWith(t, redistest.Options{Password: "right"})
	root := t.TempDir()
	dir := filepath.Join(root, "ratelimit", "config")
	newConfigMap(t, dir, map[string]string{"config.yaml": blockLimits, "notes.txt": "ask the edge team before changing these\n"})
	if err := os.MkdirAll(filepath.Join(dir, "team"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "team", "limits.yaml"), []byte("domain: team\ndescriptors: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mapper := filepath.Join(t.TempDir(), "statsd_conf.yaml")
	s := startDropIn(t, bin, []string{
		"RUNTIME_ROOT=" + root, "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_IGNOREDOTFILES=true",
		"LOG_LEVEL=info", "USE_STATSD=false", "REDIS_SOCKET_TYPE=tcp", "REDIS_URL=" + srv.Addr(), "REDIS_AUTH=wrong",
		"RLS_REDIS_ULR=redis://elsewhere:6379", "USE_PROMETHEUS=true", "PROMETHEUS_ADDR=127.0.0.1:0", "PROMETHEUS_MAPPER_YAML=" + mapper,
		"PORT=0", "GRPC_PORT=0", "DEBUG_PORT=0",
	})
	// The store's watch says Redis's refusal at its first check, which
	// may come just after the serving line.
	refusal := `Redis refuses the settings: deciding by the failure mode, and reporting unhealthy, until they are fixed	{"check": "REDIS_AUTH"`
	poll(startBound, func() bool { return strings.Contains(s.stderr.String(), refusal) })
	out := s.stderr.String()
	for _, want := range []string{
		"RLS_REDIS_ULR is set but is no flag's twin: ignored, did you mean RLS_REDIS_URL?",
		"PROMETHEUS_MAPPER_YAML names " + mapper + ", which does not exist",
		"not loaded from the config directory",
		filepath.Join(dir, "notes.txt"), filepath.Join(dir, "team") + "/",
		refusal,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the start's log does not say %q; stderr:\n%s", want, out)
		}
	}
	if strings.Contains(out, "wrong") {
		t.Errorf("the log shows REDIS_AUTH's password; stderr:\n%s", out)
	}
	if code, body := s.healthcheck(t); code != http.StatusServiceUnavailable || !strings.Contains(body, "check REDIS_AUTH") {
		t.Errorf("GET /healthcheck while Redis refuses REDIS_AUTH: got %d %q, want 503 naming it", code, body)
	}
	if _, err := srv.Do("CONFIG", "SET", "requirepass", ""); err != nil {
		t.Fatal(err)
	}
	if !poll(startBound, func() bool { code, _ := s.healthcheck(t); return code == http.StatusOK }) {
		code, body := s.healthcheck(t)
		t.Errorf("GET /healthcheck once Redis takes the password: got %d %q, want 200", code, body)
	}
	c := s.client(t, insecure.NewCredentials())
	closed := limit("", 0, rlsv3.RateLimitResponse_RateLimit_MINUTE)
	for range 3 {
		checkResponse(t, decideWith(t, c, request("edge", desc("path", "/admin"))), codeOver, want{codeOver, closed, 0})
	}
	checkResponse(t, decideWith(t, c, request("edge", desc("path", "/home"))), codeOK,
		want{codeOK, limit("", 100, rlsv3.RateLimitResponse_RateLimit_MINUTE), 99})
}

// A runtime directory that does not exist stops the start with one line
// naming RUNTIME_ROOT, the variable the operator set.
func TestDropInMissingRuntimeRoot(t *testing.T) {
	t.Parallel()
	bin := dropInBinary(t)
	root := filepath.Join(t.TempDir(), "srv", "runtime_data", "current")
	cmd := exec.Command(bin)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "RUNTIME_ROOT=" + root, "RUNTIME_SUBDIRECTORY=ratelimit",
		"USE_STATSD=false", "PORT=0", "GRPC_PORT=0", "DEBUG_PORT=0"}
	var stderr buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(exitBound):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("still running after %s; stderr:\n%s", exitBound, stderr.String())
	}
	want := filepath.Join(root, "ratelimit", "config") + ": stat: no such file or directory: check RUNTIME_ROOT\n"
	if code, got := cmd.ProcessState.ExitCode(), stderr.String(); code == 0 || got != want {
		t.Errorf("got exit %d and stderr %q, want a non-zero exit and the one line %q", code, got, want)
	}
}
