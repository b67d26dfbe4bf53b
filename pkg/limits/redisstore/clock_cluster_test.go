package redisstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/envoy-rls/envoy-rls/internal/redispipe"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// TestClusterClockSurvivesMasterLoss: on a cluster of three masters without
// replicas, the master whose clock the store reads dies. The calls for the
// other masters' keys are still decided, by a store that had an estimate of
// the clock as by one that starts without; the calls for the dead master's
// keys fail as a store unavailable (the failure mode's cue). Every store
// reads the clock of the same next master: the first of the clock's order
// that answers.
func TestClusterClockSurvivesMasterLoss(t *testing.T) {
	c, cl, clockAddr, others := startClockCluster(t)
	next := ""
	for i := 1; next == "" && i < 1000; i++ {
		if a := masterOf(t, c, redispipe.ClockKey(i)); a != clockAddr {
			next = a
		}
	}
	if next == "" {
		t.Fatalf("every clock key is on %s", clockAddr)
	}
	l := allowing(limits.FixedWindow, 1000)
	hit := func(addr string) limits.Hit { return limits.Hit{Key: keysOn(t, c, addr, 1)[0], Limit: l, Cost: 1} }
	dead := hit(clockAddr)
	live := []limits.Hit{hit(others[0]), hit(others[1])}
	decideLive := func(what string, s *Store) {
		t.Helper()
		for _, h := range live {
			if r := decideOne(t, s, h); r.Err != nil || !r.Allowed {
				t.Errorf("%s: hit on %s: %+v, want allowed", what, h.Key, r)
			}
		}
	}
	s := New(c, Options{})
	defer s.Close()
	decideLive("before the loss", s)
	if r := decideOne(t, s, dead); r.Err != nil || !r.Allowed {
		t.Fatalf("before the loss: hit on the clock's master: %+v, want allowed", r)
	}

	cl.Node(clockAddr).Stop()
	lost := redispipe.LocalMicros()
	// A store without an estimate asks the clock first: the dead master,
	// then the next, which answers.
	fc := newClient(t, ClientOptions{Cluster: cl.Addrs(), Timeout: testTimeout}).(*redis.ClusterClient)
	samples := map[string]*timeCount{}
	for _, a := range others {
		samples[a] = countTime(t, fc, a, 0)
	}
	fresh := New(fc, Options{})
	defer fresh.Close()
	for _, st := range []struct {
		name string
		s    *Store
	}{{"a store that had an estimate", s}, {"a store started after the loss", fresh}} {
		decideLive(st.name, st.s)
		if r := decideOne(t, st.s, dead); r.Err == nil || !errors.Is(r.Err, limits.ErrUnavailable) {
			t.Errorf("%s: hit on the dead master: %+v, want an error of a store unavailable", st.name, r)
		}
	}
	for a, h := range samples {
		if got := h.n.Load(); (a == next) != (got > 0) {
			t.Errorf("the fresh store sent %d TIME to master %s; want them all to %s, the next of the clock's order", got, a, next)
		}
	}
	// The store that had an estimate samples a live master from then on
	// (a wide bound: it samples ten times a second while calls come).
	if !eventually(10*time.Second, func() bool { decideLive("after the loss", s); return s.pipes.Clock().SampledSince(lost) }) {
		t.Error("10 s after the clock's master died, the store has sampled no other master's clock")
	}
	if _, u, ok := s.pipes.Clock().Now(); !ok || u > redispipe.MaxClockGrowth {
		t.Errorf("estimate after the loss: uncertainty %d µs, ok %v; want one within %d µs", u, ok, redispipe.MaxClockGrowth)
	}
}

// TestClusterClockSurvivesMasterHang: the master whose clock the store
// reads hangs (its port accepts connections, nothing answers them), as a
// host that is gone does. A store started then decides the other masters'
// keys once it has found the hung master out: its first calls, whose
// deadlines end while they wait on it, fail, a walk aside waits the
// client's timeout for it and passes it by, and the walks after it ask it
// last.
func TestClusterClockSurvivesMasterHang(t *testing.T) {
	_, cl, clockAddr, others := startClockCluster(t)
	cl.Node(clockAddr).Pause()
	c := newClient(t, ClientOptions{Cluster: cl.Addrs(), Timeout: testTimeout}).(*redis.ClusterClient)
	s := New(c, Options{})
	defer s.Close()
	l := allowing(limits.FixedWindow, 1000)
	decide := func(key string) limits.Result {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout/4)
		defer cancel()
		res := make([]limits.Result, 1)
		s.Decide(ctx, []limits.Hit{{Key: key, Limit: l, Cost: 1}}, res)
		return res[0]
	}
	live := []string{keysOn(t, c, others[0], 1)[0], keysOn(t, c, others[1], 1)[0]}
	var r limits.Result
	if !eventually(30*time.Second, func() bool { r = decide(live[0]); return r.Err == nil }) {
		t.Fatalf("30 s after the clock's master hung, a call for another master's key still fails: %+v", r)
	}
	for range 3 {
		for _, k := range live {
			if r := decide(k); r.Err != nil || !r.Allowed {
				t.Errorf("hit on %s, with the clock's master hung: %+v, want allowed", k, r)
			}
		}
	}
	if r := decide(keysOn(t, c, clockAddr, 1)[0]); r.Err == nil || !errors.Is(r.Err, limits.ErrUnavailable) {
		t.Errorf("hit on the hung master: %+v, want an error of a store unavailable", r)
	}
}
