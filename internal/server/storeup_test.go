package server

import (
	"strconv"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
)

// storeUpBound bounds how long the first call takes to find Redis gone (or
// back): a wide margin over -store-timeout (50 ms), and well under the
// health check's 2 s period, which the gauge no longer waits for.
const storeUpBound = time.Second

// storeUpGauge returns the rls_store_up line of s's /metrics.
func storeUpGauge(t *testing.T, s *inProcess) string {
	t.Helper()
	l := metricLine(t, s, "rls_store_up")
	if l == "" {
		t.Fatal("no rls_store_up in /metrics")
	}
	return l
}

// rls_store_up follows the calls: it reads 0 as soon as a call has been
// answered by the failure mode because Redis died, and 1 as soon as a call
// has been decided by Redis again, without waiting for the health check.
func TestStoreUpFollowsCalls(t *testing.T) {
	// serveOn sets grpc-go's logger, which must not happen while this
	// test's client uses it: set it first, as serveOn would.
	routeGRPCLog(zap.NewNop())
	srv := redistest.Start(t)
	s := startInProcess(t, "-redis-url", srv.URL(), "-failure-mode", "error")
	conn := grpcDial(t, s.grpcAddr, insecure.NewCredentials())
	n := 0
	// call makes calls with fresh values (each is allowed by Redis) until
	// one is UNAVAILABLE (want down) or OK (want up), and returns how long
	// that took.
	call := func(wantDown bool) time.Duration {
		t.Helper()
		start := time.Now()
		for {
			n++
			_, err := grpcCall(conn, "v"+strconv.Itoa(n))
			switch {
			case wantDown && status.Code(err) == codes.Unavailable, !wantDown && err == nil:
				return time.Since(start)
			case err != nil && status.Code(err) != codes.Unavailable:
				t.Fatalf("call %d: %v", n, err)
			}
			if time.Since(start) > storeUpBound {
				t.Fatalf("no call found Redis %s within %v (the last: %v)", map[bool]string{true: "down", false: "up"}[wantDown], storeUpBound, err)
			}
		}
	}

	call(false)
	eventually(t, "rls_store_up 1 at the start", func() bool { return storeUpGauge(t, s) == "rls_store_up 1" })

	srv.Stop()
	took := call(true)
	if got := storeUpGauge(t, s); got != "rls_store_up 0" {
		t.Errorf("Redis killed, a call answered by the failure mode %v later: %s, want rls_store_up 0", took, got)
	}

	srv.Restart()
	took = call(false)
	if got := storeUpGauge(t, s); got != "rls_store_up 1" {
		t.Errorf("Redis back, a call decided by it %v later: %s, want rls_store_up 1", took, got)
	}
}
