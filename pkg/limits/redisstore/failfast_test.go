package redisstore

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// hungTimeout is the store timeout of TestClusterHungMasterFailsFast, and
// fastBound what a call refused at once may take: a wide margin under it.
const (
	hungTimeout = 200 * time.Millisecond
	fastBound   = 25 * time.Millisecond
)

// A master of a cluster hangs (SIGSTOP), and no replica is promoted: once
// calls on its keys have timed out for a store timeout, later ones fail at
// once, unavailable, instead of each waiting out the timeout; the keys of
// the other masters are decided throughout; and once the master answers
// again its keys are decided again within seconds.
func TestClusterHungMasterFailsFast(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	c := newClient(t, ClientOptions{Cluster: cl.Addrs(), Timeout: hungTimeout}).(*redis.ClusterClient)
	// Neither master is the clock's: losing that one is the clock's
	// business (clusterclock.go).
	clockAddr := masterOf(t, c, clockKey(0))
	var others []string
	for _, a := range cl.Addrs() {
		if a != clockAddr {
			others = append(others, a)
		}
	}
	hungAddr, liveAddr := others[0], others[1]
	s := New(c, Options{})
	defer s.Close()
	hungKey, liveKey := keysOn(t, c, hungAddr, 1)[0], keysOn(t, c, liveAddr, 1)[0]
	l := allowing(limits.FixedWindow, 1_000_000)
	decide := func(key string) (limits.Result, time.Duration) {
		res := make([]limits.Result, 1)
		ctx, cancel := context.WithTimeout(context.Background(), hungTimeout)
		defer cancel()
		start := time.Now()
		s.Decide(ctx, []limits.Hit{{Key: key, Limit: l, Cost: 1}}, res)
		return res[0], time.Since(start)
	}
	for _, k := range []string{hungKey, liveKey} {
		if r, _ := decide(k); r.Err != nil || !r.Allowed {
			t.Fatalf("before the hang, %s: %+v", k, r)
		}
	}

	cl.Node(hungAddr).Pause()
	resumed := false
	defer func() {
		if !resumed {
			cl.Node(hungAddr).Resume()
		}
	}()
	// The first calls wait out the store timeout; a wide bound on how many
	// before the gate shuts (two, a store timeout apart).
	var before []time.Duration
	for start := time.Now(); time.Since(start) < 5*time.Second; {
		r, took := decide(hungKey)
		if r.Err == nil {
			t.Fatalf("a hit on the hung master's keys was decided: %+v", r)
		}
		if took < fastBound {
			break
		}
		before = append(before, took)
	}
	var fast []time.Duration
	for range 20 {
		r, took := decide(hungKey)
		if !errors.Is(r.Err, limits.ErrUnavailable) {
			t.Fatalf("a hit on the hung master's keys: %+v, want unavailable", r)
		}
		fast = append(fast, took)
		if r, _ := decide(liveKey); r.Err != nil || !r.Allowed {
			t.Fatalf("the live master's key with the other hung: %+v", r)
		}
	}
	t.Logf("calls on the hung master's keys: %v before the gate shut, then median %v of %d",
		before, median(fast), len(fast))
	if m := median(fast); m >= fastBound {
		t.Fatalf("after %d calls timed out on the hung master, its keys' median call takes %v, want under %v",
			len(before), m, fastBound)
	}

	cl.Node(hungAddr).Resume()
	resumed = true
	back := time.Now()
	for {
		r, _ := decide(hungKey)
		if r.Err == nil && r.Allowed {
			break
		}
		if time.Since(back) > 5*time.Second {
			t.Fatalf("the master's keys still fail 5s after it answers again: %+v", r)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("the master's keys decided again %v after it was resumed", time.Since(back))
}

// median is the middle of ds.
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
