package server

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
)

// failoverBound bounds how long after a replica's promotion a call may
// still fail on the keys of its slots: a wide margin over the store's
// reloads of the cluster's map (go-redis alone waits up to a minute).
const failoverBound = 10 * time.Second

// metricLine is the line of s's /metrics that starts with name and a
// space, "" if none does.
func metricLine(t *testing.T, s *inProcess, name string) string {
	t.Helper()
	_, body := httpDo(t, "GET", "http://"+s.httpAddr+"/metrics", "")
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, name+" ") {
			return l
		}
	}
	return ""
}

// On a Redis Cluster, a master that dies is reported while it is down:
// /healthz still answers 200 (the other masters' keys are decided) and says
// the store is degraded, naming the master; rls_store_up is 0 and
// rls_store_masters_unreachable 1. Once its replica is promoted, every key
// is decided again within seconds, and the reports clear.
func TestClusterFailoverReported(t *testing.T) {
	routeGRPCLog(zap.NewNop()) // as serveOn would, before this test's client
	cl := redistest.StartClusterReplicas(t, 3, redistest.Options{})
	s := startInProcess(t, "-redis-cluster", strings.Join(cl.Addrs(), ","), "-failure-mode", "error")
	conn := grpcDial(t, s.grpcAddr, insecure.NewCredentials())
	// Values enough that some have their keys on every master; a value is
	// decided (allowed once, then over the limit) or UNAVAILABLE.
	const values = 30
	decided := func() int {
		n := 0
		for i := range values {
			_, err := grpcCall(conn, "v"+strconv.Itoa(i))
			switch {
			case err == nil:
				n++
			case status.Code(err) != codes.Unavailable:
				t.Fatalf("value %d: %v", i, err)
			}
		}
		return n
	}
	if n := decided(); n != values {
		t.Fatalf("%d of %d values decided before the failure", n, values)
	}
	health := func() (int, string) { return httpDo(t, "GET", "http://"+s.httpAddr+"/healthz", "") }
	eventually(t, "health and metrics reporting every master", func() bool {
		code, body := health()
		return code == 200 && strings.Contains(body, "store: ok") && metricLine(t, s, "rls_store_masters") == "rls_store_masters 3"
	})

	victim := 1
	addr := cl.Nodes[victim].Addr()
	cl.Nodes[victim].Stop()
	if n := decided(); n == values {
		t.Fatalf("every value decided with master %s down", addr)
	}
	eventually(t, "health and metrics reporting the dead master", func() bool {
		code, body := health()
		return code == 200 && strings.Contains(body, "store: degraded: redisstore: 1 of 3 masters unreachable: "+addr) &&
			metricLine(t, s, "rls_store_masters_unreachable") == "rls_store_masters_unreachable 1" &&
			metricLine(t, s, "rls_store_up") == "rls_store_up 0"
	})

	promoted := cl.Promote(t, victim)
	for decided() < values {
		if time.Since(promoted) > failoverBound {
			t.Fatalf("values still UNAVAILABLE %v after the promotion", failoverBound)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("every value decided again %v after the promotion", time.Since(promoted))
	eventually(t, "health and metrics clearing", func() bool {
		code, body := health()
		return code == 200 && strings.Contains(body, "store: ok") &&
			metricLine(t, s, "rls_store_masters_unreachable") == "rls_store_masters_unreachable 0" &&
			metricLine(t, s, "rls_store_up") == "rls_store_up 1"
	})
}
