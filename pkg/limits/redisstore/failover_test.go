package redisstore

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/envoy-rls/envoy-rls/internal/redispipe"
	"github.com/envoy-rls/envoy-rls/internal/redistest"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// failoverBound is how long after a replica's promotion the keys of its
// slots may still fail: a wide margin over reloadEvery and a reload's round
// trips (go-redis alone waits for its next reload, up to a minute).
// RLS_FAILOVER_BOUND sets another, to measure the code without the
// reloads.
func failoverBound(t *testing.T) time.Duration {
	if v := os.Getenv("RLS_FAILOVER_BOUND"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("RLS_FAILOVER_BOUND: %v", err)
		}
		return d
	}
	return 10 * time.Second
}

// failoverTimeout is the store timeout of the failover tests: a hung
// master costs each call that much.
const failoverTimeout = 250 * time.Millisecond

// A master of a cluster fails, killed or hung, and its replica is
// promoted: the keys of its slots are decided again within seconds of the
// promotion, not when go-redis next reloads its map on its own, and none is
// allowed beyond its limit across the failover (the replica had every
// charge: the test waits for it to catch up before the master fails). While
// the master is down, Ping names it and Masters reports it; once its
// replica holds its slots, both say every master answers.
func TestClusterFailover(t *testing.T) {
	for _, c := range []struct {
		name string
		fail func(*redistest.Server)
	}{
		{"killed", (*redistest.Server).Stop},
		{"hung", (*redistest.Server).Pause},
	} {
		t.Run(c.name, func(t *testing.T) { testFailover(t, c.fail) })
	}
}

func testFailover(t *testing.T, fail func(*redistest.Server)) {
	cl := redistest.StartClusterReplicas(t, 3, redistest.Options{})
	c := newClient(t, ClientOptions{Cluster: cl.Addrs(), Timeout: failoverTimeout}).(*redis.ClusterClient)
	// Not the master whose clock the store reads: losing that one is the
	// clock's business (clusterclock.go).
	clockAddr := masterOf(t, c, redispipe.ClockKey(0))
	victim := 0
	for victim < len(cl.Nodes) && cl.Nodes[victim].Addr() == clockAddr {
		victim++
	}
	addr := cl.Nodes[victim].Addr()
	s := New(c, Options{})
	defer s.Close()
	const limit, before = 20, 10
	hit := limits.Hit{Key: keysOn(t, c, addr, 1)[0], Limit: allowing(limits.TokenBucket, limit), Cost: 1}
	decide := func() limits.Result {
		res := make([]limits.Result, 1)
		ctx, cancel := context.WithTimeout(context.Background(), failoverTimeout)
		defer cancel()
		s.Decide(ctx, []limits.Hit{hit}, res)
		return res[0]
	}
	allowed := 0
	for range before {
		if r := decide(); r.Err != nil || !r.Allowed {
			t.Fatalf("before the failover: %+v", r)
		}
		allowed++
	}
	if err := s.Ping(context.Background()); err != nil {
		t.Fatalf("Ping before the failover: %v", err)
	}
	cl.WaitReplicated(t, victim)

	fail(cl.Nodes[victim])
	if r := decide(); r.Err == nil {
		t.Fatalf("a hit on the failed master's keys was decided: %+v", r)
	}
	checkDown(t, s, addr)
	// A hung master's gate shuts (failfast.go): the promotion must bring
	// its keys back all the same.
	untilFast(t, decide)

	promoted := cl.Promote(t, victim)
	healed := time.Duration(-1)
	for time.Since(promoted) < failoverBound(t) {
		r := decide()
		if r.Err == nil {
			healed = time.Since(promoted)
			if r.Allowed {
				allowed++
			}
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if healed < 0 {
		t.Fatalf("the failed master's keys still fail %v after its replica's promotion", failoverBound(t))
	}
	t.Logf("the failed master's keys decided again %v after the promotion", healed)
	for range limit {
		if r := decide(); r.Err != nil {
			t.Fatalf("after the failover: %+v", r)
		} else if r.Allowed {
			allowed++
		}
	}
	if allowed != limit {
		t.Errorf("%d hits allowed across the failover, want the limit, %d", allowed, limit)
	}
	if err := s.Ping(context.Background()); err != nil {
		t.Errorf("Ping once the replica holds the slots: %v", err)
	}
	if m := s.Masters(); len(m) != 3 || downs(m) != 0 {
		t.Errorf("Masters once the replica holds the slots: %v, want 3 that answer", m)
	}
}

// checkDown checks that Ping names the master at addr, down, and that
// Masters reports it, within a wide bound: Ping may answer what a check
// found up to reloadEvery before.
func checkDown(t *testing.T, s *Store, addr string) {
	t.Helper()
	var err error
	for start := time.Now(); time.Since(start) < 5*time.Second; time.Sleep(20 * time.Millisecond) {
		if err = s.Ping(context.Background()); err != nil {
			break
		}
	}
	var ue *UnreachableError
	if !errors.As(err, &ue) || !ue.Degraded() || len(ue.Down) != 1 || ue.Down[0].Addr != addr ||
		!strings.Contains(err.Error(), "1 of 3 masters unreachable: "+addr) {
		t.Errorf("Ping with master %s down: %v, want an *UnreachableError naming it, degraded", addr, err)
	}
	m := s.Masters()
	if len(m) != 3 || downs(m) != 1 {
		t.Errorf("Masters with master %s down: %v, want it alone among 3 unreachable", addr, m)
	}
}

// downs counts the masters that did not answer.
func downs(masters []MasterState) int {
	n := 0
	for _, m := range masters {
		if m.Err != nil {
			n++
		}
	}
	return n
}
