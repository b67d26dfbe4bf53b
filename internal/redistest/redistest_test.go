package redistest

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestStartStopRestart(t *testing.T) {
	s := Start(t)
	if got, err := s.Do("PING"); err != nil || got != "PONG" {
		t.Fatalf("PING: got %q, %v; want PONG", got, err)
	}
	if !strings.HasPrefix(s.URL(), "redis://127.0.0.1:") {
		t.Errorf("URL() = %q, want redis://127.0.0.1:port", s.URL())
	}
	if _, err := s.Do("SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Do("GET", "k"); err != nil || got != "v" {
		t.Fatalf("GET k: got %q, %v; want v", got, err)
	}

	addr := s.Addr()
	s.Stop()
	if s.Running() {
		t.Error("Running() after Stop = true")
	}
	if _, err := s.Do("PING"); err == nil {
		t.Fatal("PING after Stop succeeded")
	}
	s.Stop() // idempotent

	s.Restart()
	if s.Addr() != addr {
		t.Errorf("Restart moved the server: %s, want %s", s.Addr(), addr)
	}
	if got, err := s.Do("GET", "k"); err != nil || got != "(nil)" {
		t.Errorf("GET k after Restart: got %q, %v; want (nil): data must not survive", got, err)
	}
}

func TestErrorReply(t *testing.T) {
	s := Start(t)
	if _, err := s.Do("NOSUCHCOMMAND"); err == nil || !strings.Contains(err.Error(), "unknown command") {
		t.Errorf("got %v, want an unknown command error", err)
	}
}

func TestManyServers(t *testing.T) {
	var wg sync.WaitGroup
	addrs := make([]string, 8)
	for i := range addrs {
		wg.Go(func() {
			addrs[i] = Start(t).Addr()
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, a := range addrs {
		if seen[a] {
			t.Errorf("two servers on %s", a)
		}
		seen[a] = true
	}
}

// fatalTB records Fatalf instead of failing the real test.
type fatalTB struct {
	*testing.T
	msg string
}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestMissingBinaryFails(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	f := &fatalTB{T: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Start(f)
	}()
	<-done
	if !strings.Contains(f.msg, "redis-server is not on PATH") || !strings.Contains(f.msg, "make test") {
		t.Errorf("Fatalf message = %q, want it to name redis-server and make test", f.msg)
	}
}

func TestCluster(t *testing.T) {
	for _, masters := range []int{1, 3} {
		t.Run(fmt.Sprint(masters), func(t *testing.T) {
			c := StartCluster(t, masters)
			if len(c.Addrs()) != masters {
				t.Fatalf("Addrs() = %v, want %d", c.Addrs(), masters)
			}
			// A key lives on exactly one node; the others redirect.
			var owners int
			for _, n := range c.Nodes {
				_, err := n.Do("SET", "{tag}k", "v")
				switch {
				case err == nil:
					owners++
				case !strings.HasPrefix(err.Error(), "MOVED"):
					t.Errorf("SET on %s: %v, want OK or MOVED", n.Addr(), err)
				}
			}
			if owners != 1 {
				t.Errorf("%d nodes took the key, want 1", owners)
			}
		})
	}
}

// TestClusterReplicas: each master has a replica in sync; Promote hands a
// stopped master's slots to its replica, which then takes writes with the
// master's data.
func TestClusterReplicas(t *testing.T) {
	c := StartClusterReplicas(t, 2, Options{Password: "p"})
	if len(c.Replicas) != 2 || len(c.Addrs()) != 2 {
		t.Fatalf("%d replicas, %d seeds; want 2 of each", len(c.Replicas), len(c.Addrs()))
	}
	var owner int
	for i, n := range c.Nodes {
		if _, err := n.Do("SET", "{tag}k", "v"); err == nil {
			owner = i
		}
	}
	c.WaitReplicated(t, owner)
	c.Nodes[owner].Stop()
	if promoted := c.Promote(t, owner); promoted.IsZero() || promoted.After(time.Now()) {
		t.Errorf("Promote returned %v as the instant of the promotion", promoted)
	}
	r := c.Replicas[owner]
	if got := c.Node(r.Addr()); got != r {
		t.Errorf("Node(%s) = %v, want the replica", r.Addr(), got)
	}
	if got, err := r.Do("GET", "{tag}k"); err != nil || got != "v" {
		t.Errorf("GET on the promoted replica: %q, %v; want v", got, err)
	}
	if _, err := r.Do("SET", "{tag}k", "w"); err != nil {
		t.Errorf("SET on the promoted replica: %v", err)
	}
	other := c.Nodes[1-owner]
	if _, err := other.Do("SET", "{tag}k", "x"); err == nil || !strings.Contains(err.Error(), "MOVED") || !strings.Contains(err.Error(), r.Addr()) {
		t.Errorf("SET on the other master: %v, want MOVED to %s", err, r.Addr())
	}
}

func TestSentinel(t *testing.T) {
	s := StartSentinel(t)
	if addr, err := s.MasterAddr(); err != nil || addr != s.Master.Addr() {
		t.Fatalf("master before the failover: %q, %v; want %s", addr, err, s.Master.Addr())
	}
	if _, err := s.Master.Do("SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	s.WaitReplicated(t)
	s.Master.Stop()
	s.WaitFailover(t)
	if v, err := s.Replica.Do("GET", "k"); err != nil || v != "v" {
		t.Errorf("GET k on the new master: %q, %v; want the value written before the failover", v, err)
	}
}

// TestClusterWith: a cluster whose nodes require a password forms, and
// every node refuses a client without it; Node finds a node by address.
func TestClusterWith(t *testing.T) {
	c := StartClusterWith(t, 2, Options{Password: "p"})
	anon := client{}
	for _, n := range c.Nodes {
		if _, err := anon.do(n.Addr(), time.Second, "PING"); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
			t.Errorf("PING on %s without AUTH: %v, want NOAUTH", n.Addr(), err)
		}
		if got := c.Node(n.Addr()); got != n {
			t.Errorf("Node(%s) = %v, want the node", n.Addr(), got)
		}
	}
	if got := c.Node("127.0.0.1:1"); got != nil {
		t.Errorf("Node of no node's address = %v, want nil", got)
	}
}

// TestPauseResume: a paused server accepts a connection and answers
// nothing; resumed, it answers again.
func TestPauseResume(t *testing.T) {
	s := Start(t)
	s.Pause()
	if _, err := s.client.do(s.Addr(), 200*time.Millisecond, "PING"); err == nil {
		t.Error("a paused server answered PING")
	}
	if !s.Running() {
		t.Error("a paused server is not running")
	}
	s.Resume()
	if out, err := s.Do("PING"); err != nil || out != "PONG" {
		t.Errorf("PING after Resume: %q, %v; want PONG", out, err)
	}
}
