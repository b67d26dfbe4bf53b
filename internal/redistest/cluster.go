package redistest

import (
	"fmt"
	"path/filepath"
	"slices"
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

// Cluster is a Redis Cluster, each node a Server of its own (so a test can
// Stop or Pause one node to take its slots down). Nodes are the masters;
// Replicas, if the cluster was started with them, replicate the master of
// the same index.
type Cluster struct {
	Nodes    []*Server
	Replicas []*Server
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
	return startCluster(t, masters, false, o)
}

// StartClusterReplicas is StartClusterWith with one replica for each
// master, in sync with it when it returns: a cluster that can fail over
// (Promote).
func StartClusterReplicas(t testing.TB, masters int, o Options) *Cluster {
	t.Helper()
	return startCluster(t, masters, true, o)
}

func startCluster(t testing.TB, masters int, replicas bool, o Options) *Cluster {
	t.Helper()
	if o.TLS {
		t.Fatalf("redistest: StartClusterWith: TLS is not supported")
	}
	if masters < 1 || masters > clusterSlots {
		t.Fatalf("redistest: StartCluster: masters = %d, want 1 to %d", masters, clusterSlots)
	}
	c := &Cluster{}
	var busPorts []string
	for i := range masters {
		s, bus := startNode(t, o)
		c.Nodes, busPorts = append(c.Nodes, s), append(busPorts, bus)
		lo := i * clusterSlots / masters
		hi := (i+1)*clusterSlots/masters - 1
		mustDo(t, s, "CLUSTER", "SET-CONFIG-EPOCH", strconv.Itoa(i+1))
		mustDo(t, s, "CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(lo), strconv.Itoa(hi))
	}
	if replicas {
		for range masters {
			s, bus := startNode(t, o)
			c.Replicas, busPorts = append(c.Replicas, s), append(busPorts, bus)
		}
	}
	for i, s := range c.all()[1:] {
		mustDo(t, c.Nodes[0], "CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(s.Port()), busPorts[i+1])
	}
	for i, r := range c.Replicas {
		c.replicate(t, r, c.Nodes[i])
	}
	c.waitOK(t)
	for i := range c.Replicas {
		c.WaitReplicated(t, i)
	}
	return c
}

// startNode starts one node in cluster mode, and returns it with its bus
// port.
func startNode(t testing.TB, o Options) (*Server, string) {
	t.Helper()
	var busPort string
	s := start(t, o, func(int) []string {
		bus, err := freePort()
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		busPort = strconv.Itoa(bus)
		var auth []string
		if o.Password != "" {
			auth = []string{"--masterauth", o.Password} // a replica's, to sync
		}
		return append(auth,
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			// Long enough that a loaded test machine never sees a node
			// as failing, nor a replica takes over by itself (Promote
			// makes it); a test that stops a node relies on
			// cluster-require-full-coverage no instead, which keeps the
			// other nodes answering for their own slots, as a rate
			// limiter's Redis should be configured anyway.
			"--cluster-node-timeout", "15000",
			"--cluster-require-full-coverage", "no",
			"--cluster-port", busPort,
			// A replica's first sync at once, not 5 s later.
			"--repl-diskless-sync-delay", "0",
		)
	})
	return s, busPort
}

// all are the masters, then the replicas.
func (c *Cluster) all() []*Server { return append(slices.Clip(c.Nodes), c.Replicas...) }

// replicate makes r a replica of m, once r has heard of m.
func (c *Cluster) replicate(t testing.TB, r, m *Server) {
	t.Helper()
	id := nodeID(t, m)
	waitFor(t, "a replica to hear of its master", func() (bool, string) {
		_, err := r.Do("CLUSTER", "REPLICATE", id)
		return err == nil, fmt.Sprint(err)
	})
}

// nodeID is the cluster node id of s.
func nodeID(t testing.TB, s *Server) string {
	t.Helper()
	id, err := s.Do("CLUSTER", "MYID")
	if err != nil {
		t.Fatalf("redistest: CLUSTER MYID on %s: %v", s.Addr(), err)
	}
	return id
}

// WaitReplicated waits until the replica of master i has every write the
// master had when it was called.
func (c *Cluster) WaitReplicated(t testing.TB, i int) {
	t.Helper()
	info, err := c.Nodes[i].Do("INFO", "replication")
	if err != nil {
		t.Fatalf("redistest: INFO replication on %s: %v", c.Nodes[i].Addr(), err)
	}
	want := infoInt(info, "master_repl_offset")
	waitFor(t, "a replica to catch up with its master", func() (bool, string) {
		info, err := c.Replicas[i].Do("INFO", "replication")
		return err == nil && strings.Contains(info, "master_link_status:up\r\n") &&
			infoInt(info, "slave_repl_offset") >= want, fmt.Sprintf("want offset %d: %s %v", want, info, err)
	})
}

// Promote fails master i over to its replica at once, whatever the master's
// state (CLUSTER FAILOVER TAKEOVER: no agreement asked of the other
// masters), and waits until the replica says it is a master and every
// other node but master i knows it holds the slots (the masters and
// replicas but master i must answer). It returns when the replica first
// said it was a master: the instant of the promotion. c.Nodes is left as
// it was.
func (c *Cluster) Promote(t testing.TB, i int) time.Time {
	t.Helper()
	r := c.Replicas[i]
	id := nodeID(t, r)
	mustDo(t, r, "CLUSTER", "FAILOVER", "TAKEOVER")
	var promoted time.Time
	waitFor(t, "the replica to take over", func() (bool, string) {
		role, err := r.Do("ROLE")
		if err != nil || !strings.HasPrefix(role, "master\n") {
			return false, fmt.Sprint(role, err)
		}
		if promoted.IsZero() {
			promoted = time.Now()
		}
		return true, ""
	})
	for _, s := range c.all() {
		if s == c.Nodes[i] || s == r {
			continue
		}
		waitFor(t, "every node to see the promoted replica", func() (bool, string) {
			nodes, err := s.Do("CLUSTER", "NODES")
			return err == nil && ownsSlots(nodes, id), fmt.Sprintf("%s sees %s %v", s.Addr(), nodes, err)
		})
	}
	return promoted
}

// ownsSlots reports whether the CLUSTER NODES reply nodes shows the node id
// as a master holding slots.
func ownsSlots(nodes, id string) bool {
	for _, line := range strings.Split(nodes, "\n") {
		f := strings.Fields(line)
		// id addr flags master ping pong epoch link slot...
		if len(f) > 8 && f[0] == id && strings.Contains(f[2], "master") {
			return true
		}
	}
	return false
}

// Addrs are the masters' host:port, the seeds of a -redis-cluster.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, s := range c.Nodes {
		addrs[i] = s.Addr()
	}
	return addrs
}

// Node is the node at addr (host:port, as Addrs names it, or a replica's),
// nil if none is.
func (c *Cluster) Node(addr string) *Server {
	for _, s := range c.all() {
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
		"cluster_known_nodes:" + strconv.Itoa(len(c.all())),
	}
	deadline := time.Now().Add(clusterTimeout)
	for {
		var last string
		ok := true
		for _, s := range c.all() {
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
			for _, s := range c.all() {
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
