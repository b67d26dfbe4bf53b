package server

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
)

// A limit with a sync_interval goes through the hot-key layer of the
// server's store stack: one instance admits exactly its limit, and sends
// Redis fewer commands than the calls it admitted.
func TestHotKeyStack(t *testing.T) {
	routeGRPCLog(zap.NewNop()) // as serveOn would, before this test's client
	srv := redistest.Start(t)
	cfg := filepath.Join(t.TempDir(), "hot.yaml")
	limits := "domain: test\ndescriptors:\n  - key: k\n    rate_limit: {algorithm: fixed_window, unit: hour, requests_per_unit: 50, sync_interval: 1s}\n"
	if err := os.WriteFile(cfg, []byte(limits), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startInProcess(t, "-redis-url", srv.URL(), "-config", cfg)
	conn := grpcDial(t, s.grpcAddr, insecure.NewCredentials())
	if _, err := grpcCall(conn, "warm"); err != nil {
		t.Fatal(err)
	}
	before := srv.InfoInt(t, "stats", "total_commands_processed")
	allowed := 0
	for range 80 {
		resp, err := grpcCall(conn, "hot")
		if err != nil {
			t.Fatal(err)
		}
		if resp.OverallCode == rlsv3.RateLimitResponse_OK {
			allowed++
		}
	}
	used := srv.InfoInt(t, "stats", "total_commands_processed") - before - 1
	if allowed != 50 {
		t.Errorf("admitted %d of 80 calls, want the limit, 50", allowed)
	}
	if used >= 50 {
		t.Errorf("Redis processed %d commands for 50 admitted calls, want fewer: the mode is not in the stack", used)
	}
	t.Logf("%d commands for 80 calls", used)
	hotKeyShown(t, s.httpAddr, allowed)
}

// hotKeyShown checks what the HTTP endpoints show of TestHotKeyStack's
// limit after its calls: the layer's metrics account for the admitted
// calls (each admitted from a share, or by Redis in a plain call or the
// charge of a share), and /rlconfig and /explain give its sync_interval.
func hotKeyShown(t *testing.T, httpAddr string, allowed int) {
	t.Helper()
	n := func(series string) int {
		v, err := strconv.Atoi(metric(t, httpAddr, series))
		if err != nil {
			t.Fatalf("%s: %v", series, err)
		}
		return v
	}
	local, direct, syncs := n("rls_hot_key_local_decisions_total"), n("rls_hot_key_store_decisions_total"), n("rls_hot_key_syncs_total")
	if keys := n("rls_hot_key_keys"); keys != 2 {
		t.Errorf("rls_hot_key_keys %d, want 2: the warm-up's and the hot one", keys)
	}
	if local == 0 || syncs == 0 || local+direct+syncs < allowed {
		t.Errorf("local %d, store %d, syncs %d: want local decisions and syncs, covering the %d admitted calls", local, direct, syncs, allowed)
	}
	if charged := n("rls_hot_key_charged_total"); charged < local || charged > 50 {
		t.Errorf("rls_hot_key_charged_total %d, want at least the %d local decisions and at most the limit", charged, local)
	}
	if _, body := httpDo(t, "GET", "http://"+httpAddr+"/rlconfig", ""); !strings.Contains(body, "test.k: fixed_window 50/1h0m0s sync_interval=1s ") {
		t.Errorf("/rlconfig lacks the sync_interval:\n%s", body)
	}
	if _, body := httpDo(t, "GET", "http://"+httpAddr+"/explain?domain=test&descriptor=k=hot", ""); !strings.Contains(body, "hot key: sync_interval 1s,") {
		t.Errorf("/explain lacks the sync_interval:\n%s", body)
	}
}
