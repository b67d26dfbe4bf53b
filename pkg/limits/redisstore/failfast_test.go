package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
	// Neither master is the clock's: losing that one is the clock's
	// business (clusterclock.go).
	c, cl, _, others := startClockClusterTimeout(t, hungTimeout)
	hungAddr, liveAddr := others[0], others[1]
	var gateMu sync.Mutex
	var gates []string
	s := New(c, Options{OnGate: func(addr string, shut bool) {
		gateMu.Lock()
		defer gateMu.Unlock()
		gates = append(gates, fmt.Sprintf("%s shut=%v", addr, shut))
	}})
	defer s.Close()
	told := func() []string {
		gateMu.Lock()
		defer gateMu.Unlock()
		return slices.Clone(gates)
	}
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
	before := untilFast(t, func() limits.Result {
		r, _ := decide(hungKey)
		return r
	})
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
	if got, want := told(), []string{hungAddr + " shut=true"}; !slices.Equal(got, want) {
		t.Errorf("OnGate was told %q while the master hung, want %q", got, want)
	}
	if n := s.MastersFailingFast(); n != 1 {
		t.Errorf("MastersFailingFast = %d while one master hung, want 1", n)
	}
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
	if got, want := told(), []string{hungAddr + " shut=true", hungAddr + " shut=false"}; !slices.Equal(got, want) {
		t.Errorf("OnGate was told %q once the master answered again, want %q", got, want)
	}
	if n := s.MastersFailingFast(); n != 0 {
		t.Errorf("MastersFailingFast = %d once the master answered again, want 0", n)
	}
}

// A stall shorter than two store timeouts does not shut a master's gate:
// the calls in flight when it started all time out together, which is one
// store timeout's evidence, and the first call once it is over is decided.
func TestClusterShortStallKeepsGateOpen(t *testing.T) {
	c, cl, _, others := startClockClusterTimeout(t, hungTimeout)
	s := New(c, Options{})
	defer s.Close()
	keys := keysOn(t, c, others[0], 8)
	l := allowing(limits.FixedWindow, 1_000_000)
	decide := func(key string) limits.Result {
		res := make([]limits.Result, 1)
		ctx, cancel := context.WithTimeout(context.Background(), hungTimeout)
		defer cancel()
		s.Decide(ctx, []limits.Hit{{Key: key, Limit: l, Cost: 1}}, res)
		return res[0]
	}
	if r := decide(keys[0]); r.Err != nil {
		t.Fatal(r.Err)
	}
	cl.Node(others[0]).Pause()
	var wg sync.WaitGroup
	var failed atomic.Int64
	for _, k := range keys {
		wg.Go(func() {
			if decide(k).Err != nil {
				failed.Add(1)
			}
		})
	}
	wg.Wait()
	cl.Node(others[0]).Resume()
	if failed.Load() == 0 {
		t.Fatal("no call failed during the stall")
	}
	if r := decide(keys[0]); r.Err != nil || !r.Allowed {
		t.Errorf("the first call after a stall of one store timeout: %+v, want it decided", r)
	}
}

// untilFast calls decide, on the keys of a master that is down, until a
// call fails under fastBound, and returns how long each slower one took:
// the first calls on a hung master wait out the store timeout, until its
// gate shuts (after two, a store timeout apart; a wide bound here). It
// fails the test if a call is decided, or if none is fast within 5 s.
func untilFast(t *testing.T, decide func() limits.Result) []time.Duration {
	t.Helper()
	var slow []time.Duration
	for start := time.Now(); time.Since(start) < 5*time.Second; {
		begun := time.Now()
		r := decide()
		took := time.Since(begun)
		if r.Err == nil {
			t.Fatalf("a hit on the keys of a master that is down was decided: %+v", r)
		}
		if took < fastBound {
			return slow
		}
		slow = append(slow, took)
	}
	t.Fatalf("calls on the keys of a master that is down still wait after 5 s: %v", slow)
	return nil
}

// median is the middle of ds.
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
