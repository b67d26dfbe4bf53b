package redistest

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	// clusterSlots is the number of hash slots of a Redis Cluster.
	clusterSlots = 16384
	// clusterTimeout is how long the nodes may take to agree; a master
	// alone waits 2 s before it reports ok.
	clusterTimeout = 30 * time.Second
)

// Cluster is a Redis Cluster of masters only, each a Server of its own (so a
// test can Stop one node to take its slots down).
type Cluster struct {
	Nodes []*Server
}

// StartCluster starts masters redis-server processes in cluster mode, splits
// the hash slots evenly between them, joins them, and waits until every node
// reports the cluster ok. It works for any number of masters from 1, unlike
// redis-cli --cluster create (3 at least). Nodes are stopped when the test
// ends.
func StartCluster(t testing.TB, masters int) *Cluster {
	t.Helper()
	return StartClusterWith(t, masters, Options{})
}

// StartClusterWith is StartCluster with credentials on every node (the
// cluster bus needs none). TLS is not supported: the nodes would announce
// themselves on their plaintext ports.
func StartClusterWith(t testing.TB, masters int, o Options) *Cluster {
	t.Helper()
	if o.TLS {
		t.Fatalf("redistest: StartClusterWith: TLS is not supported")
	}
	if masters < 1 || masters > clusterSlots {
		t.Fatalf("redistest: StartCluster: masters = %d, want 1 to %d", masters, clusterSlots)
	}
	c := &Cluster{}
	busPorts := make([]string, masters)
	for i := range masters {
		s := start(t, o, func(int) []string {
			bus, err := freePort()
			if err != nil {
				t.Fatalf("redistest: %v", err)
			}
			busPorts[i] = strconv.Itoa(bus)
			return []string{
				"--cluster-enabled", "yes",
				"--cluster-config-file", "nodes.conf",
				// Long enough that a loaded test machine never sees a node
				// as failing; a test that stops a node relies on
				// cluster-require-full-coverage no instead, which keeps the
				// other nodes answering for their own slots, as a rate
				// limiter's Redis should be configured anyway.
				"--cluster-node-timeout", "15000",
				"--cluster-require-full-coverage", "no",
				"--cluster-port", busPorts[i],
			}
		})
		c.Nodes = append(c.Nodes, s)
	}
	for i, s := range c.Nodes {
		lo := i * clusterSlots / masters
		hi := (i+1)*clusterSlots/masters - 1
		mustDo(t, s, "CLUSTER", "SET-CONFIG-EPOCH", strconv.Itoa(i+1))
		mustDo(t, s, "CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(lo), strconv.Itoa(hi))
	}
	for i, s := range c.Nodes[1:] {
		mustDo(t, c.Nodes[0], "CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(s.Port()), busPorts[i+1])
	}
	c.waitOK(t)
	return c
}

// Addrs are the nodes' host:port, the seeds of a -redis-cluster.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, s := range c.Nodes {
		addrs[i] = s.Addr()
	}
	return addrs
}

// Node is the node at addr (host:port, as Addrs names it), nil if none is.
func (c *Cluster) Node(addr string) *Server {
	for _, s := range c.Nodes {
		if s.Addr() == addr {
			return s
		}
	}
	return nil
}

// waitOK waits until every node knows every other node and all slots.
func (c *Cluster) waitOK(t testing.TB) {
	t.Helper()
	want := []string{
		"cluster_state:ok",
		"cluster_slots_ok:" + strconv.Itoa(clusterSlots),
		"cluster_known_nodes:" + strconv.Itoa(len(c.Nodes)),
	}
	deadline := time.Now().Add(clusterTimeout)
	for {
		var last string
		ok := true
		for _, s := range c.Nodes {
			info, err := s.Do("CLUSTER", "INFO")
			if err != nil {
				last, ok = err.Error(), false
				break
			}
			for _, w := range want {
				if !strings.Contains(info, w+"\r\n") {
					last, ok = fmt.Sprintf("node %s: no %q in\n%s", s.Addr(), w, info), false
					break
				}
			}
			if !ok {
				break
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			var nodes strings.Builder
			for _, s := range c.Nodes {
				out, err := s.Do("CLUSTER", "NODES")
				fmt.Fprintf(&nodes, "\n%s sees (%v):\n%s\nlog: %s", s.Addr(), err, out, tail(filepath.Join(s.dir, "redis.log")))
			}
			t.Fatalf("redistest: cluster not ok after %s: %s%s", clusterTimeout, last, nodes.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func mustDo(t testing.TB, s *Server, args ...string) {
	t.Helper()
	if _, err := s.Do(args...); err != nil {
		t.Fatalf("redistest: %s on %s: %v", strings.Join(args, " "), s.Addr(), err)
	}
}
