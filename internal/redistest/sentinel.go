package redistest

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// SentinelMaster is the master name the Sentinel of StartSentinel watches.
const SentinelMaster = "rls-master"

// sentinelTimeout bounds the waits of StartSentinel and WaitFailover: a
// replica syncs and a failover completes within a second or two here.
const sentinelTimeout = 30 * time.Second

// Sentinel is a Redis master, one replica of it, and one Sentinel watching
// them with a quorum of one, each a Server of its own, so that a test can
// Stop the master and see the replica promoted.
type Sentinel struct {
	Master, Replica, Sentinel *Server
	// CA signed the three servers' certificates when they speak TLS.
	CA *CA
}

// SentinelOptions configure StartSentinelWith. The zero value is the
// password-less setup of StartSentinel.
type SentinelOptions struct {
	// Password is the master's and the replica's requirepass (and the
	// replica's masterauth, and the Sentinel's auth-pass for them).
	Password string
	// SentinelPassword is the Sentinel's own requirepass.
	SentinelPassword string
	// TLS makes all three speak TLS only, with certificates of one CA
	// (Sentinel.CA), replication and the Sentinel's connections included.
	TLS bool
}

// StartSentinel starts a master, a replica that has synced with it, and a
// Sentinel that declares the master down after 300 ms without an answer and
// fails over at once. Everything is stopped when the test ends.
func StartSentinel(t testing.TB) *Sentinel {
	t.Helper()
	return StartSentinelWith(t, SentinelOptions{})
}

// StartSentinelWith is StartSentinel with passwords.
func StartSentinelWith(t testing.TB, o SentinelOptions) *Sentinel {
	t.Helper()
	// The replica's first sync starts at once, not after the 5 s that a
	// master waits by default for more replicas to share a diskless sync.
	var ca *CA
	var tlsArgs []string
	if o.TLS {
		ca = NewCA(t)
		tlsArgs = []string{"--tls-replication", "yes"}
	}
	opts := Options{Password: o.Password, TLS: o.TLS, CA: ca}
	master := start(t, opts, func(int) []string { return append([]string{"--repl-diskless-sync-delay", "0"}, tlsArgs...) })
	replica := start(t, opts, func(int) []string {
		args := append([]string{"--replicaof", "127.0.0.1", strconv.Itoa(master.Port())}, tlsArgs...)
		if o.Password != "" {
			args = append(args, "--masterauth", o.Password)
		}
		return args
	})
	waitFor(t, "the replica to sync", func() (bool, string) {
		info, err := replica.Do("INFO", "replication")
		return err == nil && strings.Contains(info, "master_link_status:up\r\n"), fmt.Sprint(info, err)
	})
	conf := fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 1\n"+
		"sentinel down-after-milliseconds %[1]s 300\n"+
		"sentinel failover-timeout %[1]s 2000\n", SentinelMaster, master.Port())
	if o.Password != "" {
		conf += fmt.Sprintf("sentinel auth-pass %s %s\n", SentinelMaster, o.Password)
	}
	sentinel := startConf(t, Options{Password: o.SentinelPassword, TLS: o.TLS, CA: ca}, conf,
		func(int) []string { return append([]string{"--sentinel"}, tlsArgs...) })
	s := &Sentinel{Master: master, Replica: replica, Sentinel: sentinel, CA: ca}
	waitFor(t, "the Sentinel to see the master and its replica", func() (bool, string) {
		out, err := sentinel.Do("SENTINEL", "REPLICAS", SentinelMaster)
		return err == nil && strings.Contains(out, strconv.Itoa(replica.Port())), fmt.Sprint(out, err)
	})
	return s
}

// Addrs are the Sentinels' host:port.
func (s *Sentinel) Addrs() []string { return []string{s.Sentinel.Addr()} }

// MasterAddr is the master's host:port as the Sentinel reports it.
func (s *Sentinel) MasterAddr() (string, error) {
	out, err := s.Sentinel.Do("SENTINEL", "GET-MASTER-ADDR-BY-NAME", SentinelMaster)
	if err != nil {
		return "", err
	}
	host, port, ok := strings.Cut(out, "\n")
	if !ok {
		return "", fmt.Errorf("SENTINEL GET-MASTER-ADDR-BY-NAME: %q", out)
	}
	return host + ":" + port, nil
}

// WaitReplicated waits until the replica has every write the master had
// when it was called. (WAIT would only cover the writes of its own
// connection.)
func (s *Sentinel) WaitReplicated(t testing.TB) {
	t.Helper()
	info, err := s.Master.Do("INFO", "replication")
	if err != nil {
		t.Fatalf("redistest: INFO replication on the master: %v", err)
	}
	want := infoInt(info, "master_repl_offset")
	waitFor(t, "the replica to catch up with the master", func() (bool, string) {
		info, err := s.Replica.Do("INFO", "replication")
		return err == nil && infoInt(info, "slave_repl_offset") >= want, fmt.Sprintf("want offset %d: %s %v", want, info, err)
	})
}

// infoInt is the integer field name of an INFO reply, or -1.
func infoInt(info, name string) int64 {
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				return n
			}
		}
	}
	return -1
}

// WaitFailover waits until the Sentinel reports the replica as the master
// and the replica says it is one.
func (s *Sentinel) WaitFailover(t testing.TB) {
	t.Helper()
	waitFor(t, "the failover to the replica", func() (bool, string) {
		addr, err := s.MasterAddr()
		if err != nil || addr != s.Replica.Addr() {
			return false, fmt.Sprint(addr, err)
		}
		role, err := s.Replica.Do("ROLE")
		return err == nil && strings.HasPrefix(role, "master\n"), fmt.Sprint(role, err)
	})
}

// waitFor polls ok every 20 ms for sentinelTimeout, and fails the test with
// ok's last word on what it saw.
func waitFor(t testing.TB, what string, ok func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(sentinelTimeout)
	for {
		done, last := ok()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: waited %s for %s; last saw: %s", sentinelTimeout, what, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
