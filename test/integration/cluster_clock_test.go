package integration

import (
	"strconv"
	"strings"
	"testing"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
)

// TestDistributedClusterClockMasterDown: envoy-rls started on a
// three-master Redis Cluster whose clock master (the master of the store's
// clock key, {envoy-rls}:clock) is down, with no replica to take over,
// reads the clock of the next master and counts exactly on the live ones;
// only the dead master's keys take the failure mode (deny here).
func TestDistributedClusterClockMasterDown(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 3)
	owners := slotOwners(t, c)
	out, err := c.Nodes[0].Do("CLUSTER", "KEYSLOT", "{envoy-rls}:clock")
	slot, err2 := strconv.Atoi(out)
	if err != nil || err2 != nil || slot < 0 || slot >= len(owners) || owners[slot] < 0 {
		t.Fatalf("CLUSTER KEYSLOT of the clock's key: %q, %v", out, err)
	}
	dead := owners[slot]
	values := clusterValues(t, c, owners, "clock", 1)
	c.Nodes[dead].Stop()
	s := startServer(t, writeConfig(t, clusterLimits), "-redis-cluster", strings.Join(c.Addrs(), ","), "-failure-mode", "deny", "-store-timeout", "1s")

	lim := limit("k", clusterN, unitYear)
	for n, vs := range values {
		req := request("clu", desc("k", vs[0]))
		if n == dead {
			checkResponse(t, s.decide(t, req), codeOver, want{codeOver, lim, 0})
			continue
		}
		for i := range clusterN {
			checkResponse(t, s.decide(t, req), codeOK, want{codeOK, lim, uint32(clusterN - 1 - i)})
		}
		checkResponse(t, s.decide(t, req), codeOver, want{codeOver, lim, 0})
	}
}
