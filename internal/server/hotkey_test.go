package server

import (
	"os"
	"path/filepath"
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
}
