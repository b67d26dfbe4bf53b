package integration

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// clusterLimits is one fixed window per year: counts cannot move during the
// test.
const clusterLimits = `domain: clu
descriptors:
  - key: k
    rate_limit: {name: k, algorithm: fixed_window, unit: year, requests_per_unit: 5}
`

const clusterN = 5

// clusterLimit is the limit of clusterLimits, to compute its keys.
var clusterLimit = limits.Limit{Algorithm: limits.FixedWindow, Requests: clusterN, Period: distYear}

// slotOwners maps every hash slot to the index of its node in c, from
// CLUSTER NODES.
func slotOwners(t *testing.T, c *redistest.Cluster) [16384]int {
	t.Helper()
	var owners [16384]int
	for i := range owners {
		owners[i] = -1
	}
	index := map[string]int{}
	for i, n := range c.Nodes {
		index[n.Addr()] = i
	}
	out, err := c.Nodes[0].Do("CLUSTER", "NODES")
	if err != nil {
		t.Fatalf("CLUSTER NODES: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		node, ok := index[addr]
		if !ok {
			t.Fatalf("CLUSTER NODES names %s, not one of the cluster's nodes: %s", addr, out)
		}
		for _, r := range f[8:] {
			lo, hi, isRange := strings.Cut(r, "-")
			if !isRange {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 != nil || err2 != nil {
				continue // a slot being migrated: none here
			}
			for s := a; s <= b; s++ {
				owners[s] = node
			}
		}
	}
	return owners
}

// clusterValues picks, for each node of c, perNode descriptor values (with
// prefix) whose key lands on it, asking the cluster for the key's slot.
func clusterValues(t *testing.T, c *redistest.Cluster, owners [16384]int, prefix string, perNode int) [][]string {
	t.Helper()
	values := make([][]string, len(c.Nodes))
	for i := 0; ; i++ {
		done := true
		for _, vs := range values {
			done = done && len(vs) >= perNode
		}
		if done {
			return values
		}
		if i > 1000 {
			t.Fatalf("no %d values per node among 1000", perNode)
		}
		v := fmt.Sprintf("%s%d", prefix, i)
		out, err := c.Nodes[0].Do("CLUSTER", "KEYSLOT", distKey("clu", "k", v, clusterLimit))
		slot, err2 := strconv.Atoi(out)
		if err != nil || err2 != nil || slot < 0 || slot >= len(owners) || owners[slot] < 0 {
			t.Fatalf("CLUSTER KEYSLOT: %q, %v", out, err)
		}
		if n := owners[slot]; len(values[n]) < perNode {
			values[n] = append(values[n], v)
		}
	}
}

// countAllowed sends 2N requests for each value, concurrently (three callers
// per value), and returns how many each had allowed and the latencies.
func countAllowed(t *testing.T, s *server, values []string) (map[string]int, []time.Duration) {
	t.Helper()
	var mu sync.Mutex
	allowed := map[string]int{}
	var lat []time.Duration
	var wg sync.WaitGroup
	for _, v := range values {
		for c := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := c; i < 2*clusterN; i += 3 {
					start := time.Now()
					resp, err := s.shouldRateLimit(request("clu", desc("k", v)))
					d := time.Since(start)
					if err != nil {
						t.Errorf("ShouldRateLimit(k: %s): %v", v, err)
						return
					}
					mu.Lock()
					lat = append(lat, d)
					if resp.GetOverallCode() == codeOK {
						allowed[v]++
					}
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	return allowed, lat
}

// TestDistributedCluster: envoy-rls on a three-master Redis Cluster counts
// exactly on every node, one request's descriptors spread over the nodes
// included; when one master dies, only the keys it holds take the failure
// mode (deny here), promptly, and the other nodes keep counting exactly.
func TestDistributedCluster(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 3)
	s := startServer(t, writeConfig(t, clusterLimits), "-redis-cluster", strings.Join(c.Addrs(), ","), "-failure-mode", "deny", "-store-timeout", "1s")
	owners := slotOwners(t, c)
	// Per node: two values for the first phase, one for a request spread
	// over the nodes, two after the kill, one for a spread request then, one
	// to probe a live node right after calls to the dead one.
	values := clusterValues(t, c, owners, "v", 7)

	var before []string
	for _, vs := range values {
		before = append(before, vs[:2]...)
	}
	allowed, _ := countAllowed(t, s, before)
	for n, vs := range values {
		for _, v := range vs[:2] {
			if allowed[v] != clusterN {
				t.Errorf("k: %s (node %d): %d of %d allowed, want %d", v, n, allowed[v], 2*clusterN, clusterN)
			}
			// The count lives on the node that owns the slot; a refused
			// hit's charge is undone after its answer, within a round
			// trip, so the count settles at the limit.
			key := distCounter(distKey("clu", "k", v, clusterLimit), clusterLimit)
			var got string
			var err error
			if !poll(time.Second, func() bool {
				got, err = distCount(c.Nodes[n].Do("GET", key))
				return err == nil && got == strconv.Itoa(clusterN)
			}) {
				t.Errorf("GET %s on node %d: got %q, %v; want the count %d", key, n, got, err, clusterN)
			}
		}
	}

	// One request, one descriptor per node: one pipeline split over three
	// nodes; each descriptor is counted on its own.
	spread := request("clu", desc("k", values[0][2]), desc("k", values[1][2]), desc("k", values[2][2]))
	lim := limit("k", clusterN, unitYear)
	for i := range clusterN {
		w := want{codeOK, lim, uint32(clusterN - 1 - i)}
		checkResponse(t, s.decide(t, spread), codeOK, w, w, w)
	}
	over := want{codeOver, lim, 0}
	checkResponse(t, s.decide(t, spread), codeOver, over, over, over)

	// Node 1 dies.
	const dead = 1
	c.Nodes[dead].Stop()
	killed := time.Now()

	// A few calls in a row find only the dead node: that is not the whole
	// store being down, and the next call for a live node is counted by
	// Redis, not answered by the failure mode.
	var deadLat []time.Duration
	for i := range 4 {
		start := time.Now()
		resp := s.decide(t, request("clu", desc("k", values[dead][i%2])))
		deadLat = append(deadLat, time.Since(start))
		checkResponse(t, resp, codeOver, want{codeOver, lim, 0})
	}
	for _, n := range []int{0, 2} {
		checkResponse(t, s.decide(t, request("clu", desc("k", values[n][6]))), codeOK, want{codeOK, lim, clusterN - 1})
	}

	// Traffic for the dead node's keys runs alongside: each answers
	// OVER_LIMIT (deny) promptly, and does not stop the other nodes' keys
	// from being counted exactly.
	stopDead := make(chan struct{})
	var deadWG sync.WaitGroup
	var deadMu sync.Mutex
	deadWG.Add(1)
	go func() {
		defer deadWG.Done()
		for i := 0; ; i++ {
			select {
			case <-stopDead:
				return
			default:
			}
			v := values[dead][i%len(values[dead])]
			start := time.Now()
			resp, err := s.shouldRateLimit(request("clu", desc("k", v)))
			d := time.Since(start)
			if err != nil {
				t.Errorf("ShouldRateLimit(k: %s) on the dead node: %v", v, err)
				return
			}
			if resp.GetOverallCode() != codeOver {
				t.Errorf("k: %s on the dead node: got %v, want OVER_LIMIT (failure mode deny)", v, resp)
			}
			deadMu.Lock()
			deadLat = append(deadLat, d)
			deadMu.Unlock()
		}
	}()
	// Let a few calls find the node dead first.
	time.Sleep(100 * time.Millisecond)
	var live []string
	for n, vs := range values {
		if n != dead {
			live = append(live, vs[3:5]...)
		}
	}
	allowed, liveLat := countAllowed(t, s, live)
	for n, vs := range values {
		if n == dead {
			continue
		}
		for _, v := range vs[3:5] {
			if allowed[v] != clusterN {
				t.Errorf("with node %d dead: k: %s (node %d): %d of %d allowed, want %d", dead, v, n, allowed[v], 2*clusterN, clusterN)
			}
		}
	}
	// A request spread over the nodes: the live nodes' descriptors are
	// counted, the dead one's denied.
	fresh := request("clu", desc("k", values[0][5]), desc("k", values[dead][5]), desc("k", values[2][5]))
	checkResponse(t, s.decide(t, fresh), codeOver,
		want{codeOK, lim, clusterN - 1}, want{codeOver, lim, 0}, want{codeOK, lim, clusterN - 1})
	close(stopDead)
	deadWG.Wait()

	deadStats := latencies(distAnswersOf(deadLat))
	liveStats := latencies(distAnswersOf(liveLat))
	t.Logf("after killing node %d (%s ago): dead-node keys: %s; live-node keys: %s",
		dead, time.Since(killed).Round(time.Millisecond), deadStats, liveStats)
	if deadStats.n == 0 {
		t.Errorf("no answer for the dead node's keys")
	}
	// Connections to the dead node are refused at once: its keys need not
	// wait for anything (-store-timeout is 1 s here). Few answers: the
	// median tells a wait from a scheduling stall.
	if deadStats.p50 > medianBound || deadStats.max > hangBound {
		t.Errorf("dead-node keys: %s; want the median within %s, every answer within %s", deadStats, medianBound, hangBound)
	}
}

// distAnswersOf wraps bare latencies for latencies().
func distAnswersOf(ls []time.Duration) []distAnswer {
	as := make([]distAnswer, len(ls))
	for i, l := range ls {
		as[i].latency = l
	}
	return as
}
