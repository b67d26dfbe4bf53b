package server

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"
)

// observed is a logger at info whose entries the test reads.
func observed() (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.InfoLevel)
	return zap.New(core), logs
}

// awaitServing waits for the "serving" line.
func awaitServing(t *testing.T, logs *observer.ObservedLogs) {
	t.Helper()
	eventually(t, "the serving line", func() bool { return logs.FilterMessage("serving").Len() > 0 })
}

// warnings are the entries at warn or above.
func warnings(logs *observer.ObservedLogs) []observer.LoggedEntry {
	return logs.Filter(func(e observer.LoggedEntry) bool { return e.Level >= zapcore.WarnLevel }).All()
}

// TestDefaultStartIsQuiet: `go run ./cmd/envoy-rls` serves the
// repository's config/limits.yaml (which has a concurrency limit and a
// lockout) on the embedded store, and logs the two info lines the README
// shows, no more, and no warning.
func TestDefaultStartIsQuiet(t *testing.T) {
	log, logs := observed()
	serveConfig(t, "../../config/limits.yaml", log, nil)
	awaitServing(t, logs)
	var got []string
	for _, e := range logs.All() {
		got = append(got, e.Level.String()+" "+e.Message)
	}
	want := []string{"info using the embedded store: limits are per instance", "info serving"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the start logged:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// quotaLimits has a concurrency limit beside a plain one, for RLQS.
const quotaLimits = `
domain: edge
descriptors:
  - key: path
    value: /reports
    rate_limit: {algorithm: concurrency, requests_per_unit: 10, lease: 30s}
  - key: path
    value: /search
    rate_limit: {unit: second, requests_per_unit: 50}
`

// TestRLQSCaveatWhenAsked: a file with a concurrency limit starts without
// a warning; the first quota stream whose bucket matches the concurrency
// limit is warned about, once, naming it, and one of the plain limit is
// not; a client that closes its stream and its connection is no warning
// (gRPC's "transport is closing").
func TestRLQSCaveatWhenAsked(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "limits.yaml"), []byte(quotaLimits), 0o644); err != nil {
		t.Fatal(err)
	}
	log, logs := observed()
	grpcAddr, _ := serveConfig(t, dir, log, nil)
	awaitServing(t, logs)
	if w := warnings(logs); len(w) > 0 {
		t.Fatalf("a concurrency limit warned at the start: %v", w)
	}
	conn := grpcDial(t, grpcAddr, insecure.NewCredentials())
	ctx, cancel := context.WithTimeout(context.Background(), callBound)
	defer cancel()
	st, err := rlqspb.NewRateLimitQuotaServiceClient(conn).StreamRateLimitQuotas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	report := func(path string) {
		t.Helper()
		err := st.Send(&rlqspb.RateLimitQuotaUsageReports{Domain: "edge", BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{{
			BucketId: &rlqspb.BucketId{Bucket: map[string]string{"path": path}}, TimeElapsed: durationpb.New(time.Second), NumRequestsAllowed: 1,
		}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Recv(); err != nil {
			t.Fatal(err)
		}
	}
	report("/search")
	if w := warnings(logs); len(w) > 0 {
		t.Fatalf("a bucket of a plain limit warned: %v", w)
	}
	report("/reports")
	report("/reports")
	w := warnings(logs)
	if len(w) != 1 || !strings.Contains(w[0].Message, "concurrency limit") || !strings.HasSuffix(w[0].ContextMap()["limit"].(string), "limits.yaml:6 (edge)") {
		t.Fatalf("after two reports of the concurrency limit's bucket: %v; want one warning naming limits.yaml:6", w)
	}
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	time.Sleep(300 * time.Millisecond) // what the server logs of the close
	for _, e := range warnings(logs)[1:] {
		t.Errorf("a client's close logged %s %q %v", e.Level, e.Message, e.ContextMap())
	}
}
