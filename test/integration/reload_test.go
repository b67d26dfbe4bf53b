package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// reloadLimits is a limits file whose one limit allows n per year.
func reloadLimits(n int) string {
	return fmt.Sprintf(`domain: reload
descriptors:
  - key: r
    rate_limit:
      name: r
      unit: year
      requests_per_unit: %d
`, n)
}

// badReloadLimits has a typo on line 5.
const badReloadLimits = `domain: reload
descriptors:
  - key: r
    rate_limit:
      requests_per_unitt: 9
      unit: year
`

const (
	reloadFailures = `rls_config_reloads_total{result="failure"}`
	reloadOK       = `rls_config_last_reload_successful`
)

// peekReload asks for the limit of r=a without consuming anything.
func peekReload(t *testing.T, s *server) *rlsv3.RateLimitResponse {
	t.Helper()
	return s.decide(t, request("reload", withHits(desc("r", "a"), 0)))
}

// waitLimit polls until the limit of r=a allows n, and fails the test unless
// that happens within reloadBound of the change.
func waitLimit(t *testing.T, s *server, n uint32, changed time.Time) {
	t.Helper()
	var last uint32
	ok := poll(reloadBound-time.Since(changed), func() bool {
		last = peekReload(t, s).GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit()
		return last == n
	})
	if !ok {
		t.Fatalf("requests_per_unit %s after the config change: got %d, want %d; stderr:\n%s",
			time.Since(changed).Round(time.Millisecond), last, n, s.stderr.String())
	}
}

// TestReload edits the limits file in place (temp file + rename): a valid
// change applies within 2 s; an invalid one is refused, counted, logged with
// the startup message, and the last good config stays in effect.
func TestReload(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store) {
		path := writeConfig(t, reloadLimits(2))
		s := startServer(t, path, st.flags(t)...)
		checkResponse(t, s.decide(t, request("reload", desc("r", "a"))), codeOK, want{codeOK, limit("r", 2, unitYear), 1})

		changed := time.Now()
		replaceFile(t, path, reloadLimits(5))
		waitLimit(t, s, 5, changed)
		// The counter is the same (its key names the domain, the entries,
		// the algorithm, the period and the index, not the rate): 5 − 1.
		checkResponse(t, peekReload(t, s), codeOK, want{codeOK, limit("r", 5, unitYear), 4})

		replaceFile(t, path, badReloadLimits)
		if !poll(5*time.Second, func() bool { v, ok := s.metric(t, reloadFailures); return ok && v >= 1 }) {
			v, ok := s.metric(t, reloadFailures)
			t.Fatalf("%s after a bad edit: got %v (present %t), want ≥ 1; stderr:\n%s", reloadFailures, v, ok, s.stderr.String())
		}
		if v, ok := s.metric(t, reloadOK); !ok || v != 0 {
			t.Errorf("%s after a bad edit: got %v (present %t), want 0", reloadOK, v, ok)
		}
		// Logged with the message of a refused start (and of check-config).
		_, msg, code := runBinary(t, nil, "check-config", path)
		msg = strings.TrimSpace(msg)
		if code != 1 || !strings.Contains(msg, path+":5: requests_per_unitt") {
			t.Fatalf("check-config of the bad edit: got status %d, %q; want 1 and an error at %s:5", code, msg, path)
		}
		if !poll(5*time.Second, func() bool { return strings.Contains(s.stderr.String(), msg) }) {
			t.Errorf("stderr does not log the refused reload with %q; stderr:\n%s", msg, s.stderr.String())
		}
		// Still serving, with the last good config.
		checkServing(t, s)
		checkResponse(t, peekReload(t, s), codeOK, want{codeOK, limit("r", 5, unitYear), 4})
		checkResponse(t, s.decide(t, request("reload", desc("r", "b"))), codeOK, want{codeOK, limit("r", 5, unitYear), 4})

		// A good edit after a bad one applies again.
		changed = time.Now()
		replaceFile(t, path, reloadLimits(7))
		waitLimit(t, s, 7, changed)
		if v, ok := s.metric(t, reloadOK); !ok || v != 1 {
			t.Errorf("%s after a good edit: got %v (present %t), want 1", reloadOK, v, ok)
		}
	})
}

// TestReloadConfigMap swaps a directory config the way the kubelet updates
// a mounted ConfigMap: limits.yaml -> ..data/limits.yaml, ..data -> a
// timestamped directory, updated by renaming a new ..data_tmp symlink over
// ..data.
func TestReloadConfigMap(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store) {
		dir := t.TempDir()
		first := writeConfigMapData(t, dir, "..2025_01_01_00_00_00.000000001", reloadLimits(2))
		mustSymlink(t, first, filepath.Join(dir, "..data"))
		mustSymlink(t, filepath.Join("..data", "limits.yaml"), filepath.Join(dir, "limits.yaml"))

		s := startServer(t, dir, st.flags(t)...)
		// The ..data copy is skipped: one domain, loaded once.
		checkResponse(t, s.decide(t, request("reload", desc("r", "a"))), codeOK, want{codeOK, limit("r", 2, unitYear), 1})

		second := writeConfigMapData(t, dir, "..2025_01_01_00_01_00.000000002", reloadLimits(5))
		mustSymlink(t, second, filepath.Join(dir, "..data_tmp"))
		if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
		changed := time.Now()
		if err := os.RemoveAll(filepath.Join(dir, first)); err != nil {
			t.Fatal(err)
		}
		waitLimit(t, s, 5, changed)
		checkResponse(t, peekReload(t, s), codeOK, want{codeOK, limit("r", 5, unitYear), 4})
		if v, ok := s.metric(t, reloadOK); !ok || v != 1 {
			t.Errorf("%s: got %v (present %t), want 1", reloadOK, v, ok)
		}
	})
}

// writeConfigMapData writes limits.yaml into dir/name, a ConfigMap's
// timestamped directory, and returns name.
func writeConfigMapData(t *testing.T, dir, name, data string) string {
	t.Helper()
	if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, name), "limits.yaml", data)
	return name
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// checkServing checks that gRPC health answers SERVING.
func checkServing(t *testing.T, s *server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callBound)
	defer cancel()
	resp, err := s.health.Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("gRPC health: got %v, %v; want SERVING", resp.GetStatus(), err)
	}
}
