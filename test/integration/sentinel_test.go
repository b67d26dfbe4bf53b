package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
)

// TestSentinelFailover: envoy-rls started with -redis-sentinel decides on
// the master the Sentinel names; when that master dies it answers by the
// failure mode at once, and after the Sentinel promotes the replica the
// limits apply again, from the state the replica copied.
func TestSentinelFailover(t *testing.T) {
	t.Parallel()
	sen := redistest.StartSentinel(t)
	s := startServer(t, writeConfig(t, smallLimits), "-redis-sentinel", strings.Join(sen.Addrs(), ","),
		"-redis-sentinel-master", redistest.SentinelMaster, "-failure-mode", "deny")
	lim := limit("per-user", 2, unitYear)
	checkResponse(t, s.decide(t, request("small", desc("user", "before"))), codeOK, want{codeOK, lim, 1})
	sen.WaitReplicated(t)

	sen.Master.Stop()
	// Failure mode deny: OVER_LIMIT for a key that has quota left.
	if got := s.decide(t, request("small", desc("user", "during"))).GetOverallCode(); got != codeOver {
		t.Errorf("with the master down and -failure-mode deny: got %v, want OVER_LIMIT", got)
	}

	sen.WaitFailover(t)
	// The breaker probes twice a second: limits apply again within about
	// a second of the promotion; a wide bound for a busy machine.
	if !poll(15*time.Second, func() bool {
		return s.decide(t, request("small", desc("user", "probe"))).GetOverallCode() == codeOK
	}) {
		t.Fatal("no OK answer within 15 s of the failover")
	}
	// The replica had the first hit: one left for "before", then none.
	checkResponse(t, s.decide(t, request("small", desc("user", "before"))), codeOK, want{codeOK, lim, 0})
	checkResponse(t, s.decide(t, request("small", desc("user", "before"))), codeOver, want{codeOver, lim, 0})
}
