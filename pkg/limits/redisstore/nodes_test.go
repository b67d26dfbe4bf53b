package redisstore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/envoy-rls/envoy-rls/internal/redispipe"
	"github.com/envoy-rls/envoy-rls/internal/redistest"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// slowNode holds every pipeline whose first key lives on the master at
// addr for delay, and counts the pipelines of each master.
type slowNode struct {
	cluster *redis.ClusterClient
	addr    string
	delay   atomic.Int64 // ns
	mu      sync.Mutex
	count   map[string]int
}

func (*slowNode) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (*slowNode) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *slowNode) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if k, ok := testCmdKey(cmds[len(cmds)-1]); ok {
			if m, err := h.cluster.MasterForKey(ctx, k); err == nil {
				addr := m.Options().Addr
				h.mu.Lock()
				h.count[addr]++
				h.mu.Unlock()
				if addr == h.addr {
					time.Sleep(time.Duration(h.delay.Load()))
				}
			}
		}
		return next(ctx, cmds)
	}
}

// testCmdKey is the first key of a native command or a script call.
func testCmdKey(c redis.Cmder) (string, bool) {
	if args := c.Args(); len(args) >= 4 && (c.Name() == "eval" || c.Name() == "evalsha") {
		k, ok := args[3].(string)
		return k, ok
	}
	return redispipe.CmdKey(c)
}

// clockCluster starts a cluster of three masters and returns a client of
// it, the address of the master whose clock the store reads while it
// answers (the master of redispipe.ClockKey(0)) and the other two.
func clockCluster(t *testing.T) (*redis.ClusterClient, string, []string) {
	t.Helper()
	c, _, clockAddr, others := startClockCluster(t)
	return c, clockAddr, others
}

// startClockCluster is clockCluster, with the cluster.
func startClockCluster(t *testing.T) (*redis.ClusterClient, *redistest.Cluster, string, []string) {
	t.Helper()
	return startClockClusterTimeout(t, testTimeout)
}

// startClockClusterTimeout is startClockCluster with a client whose
// timeout is timeout.
func startClockClusterTimeout(t *testing.T, timeout time.Duration) (*redis.ClusterClient, *redistest.Cluster, string, []string) {
	t.Helper()
	cl := redistest.StartCluster(t, 3)
	c := newClient(t, ClientOptions{Cluster: cl.Addrs(), Timeout: timeout}).(*redis.ClusterClient)
	clockAddr := masterOf(t, c, redispipe.ClockKey(0))
	var others []string
	for _, a := range cl.Addrs() {
		if a != clockAddr {
			others = append(others, a)
		}
	}
	return c, cl, clockAddr, others
}

// masterOf is the address of the master that holds key.
func masterOf(t *testing.T, c *redis.ClusterClient, key string) string {
	t.Helper()
	m, err := c.MasterForKey(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return m.Options().Addr
}

// timeCount counts the TIME commands sent to the node client it hooks (the
// clock's samples on a cluster), and holds each for delay.
type timeCount struct {
	delay time.Duration
	n     atomic.Int64
}

func (*timeCount) DialHook(next redis.DialHook) redis.DialHook { return next }
func (*timeCount) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *timeCount) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "time" {
			h.n.Add(1)
			time.Sleep(h.delay)
		}
		return next(ctx, cmd)
	}
}

// countTime hooks a timeCount, holding each TIME for delay, on c's client
// of the master at addr.
func countTime(t *testing.T, c *redis.ClusterClient, addr string, delay time.Duration) *timeCount {
	t.Helper()
	h := &timeCount{delay: delay}
	m, err := c.MasterForKey(context.Background(), keysOn(t, c, addr, 1)[0])
	if err != nil {
		t.Fatal(err)
	}
	m.AddHook(h)
	return h
}

// keysOn returns n keys, each its own hash tag, that live on the master at
// addr.
func keysOn(t *testing.T, c *redis.ClusterClient, addr string, n int) []string {
	t.Helper()
	var keys []string
	for i := 0; len(keys) < n; i++ {
		k := fmt.Sprintf("{n%d}", i)
		m, err := c.MasterForKey(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		if m.Options().Addr == addr {
			keys = append(keys, k)
		}
	}
	return keys
}

// On a cluster, by default, the calls whose keys live on one master share
// that master's pipelines, and a master whose round trips stall holds up
// only the calls for its own keys: the others' answers do not wait for it.
// A call whose keys span masters is split between them and decided in full.
func TestClusterMergesPerMaster(t *testing.T) {
	// The slow master is not the one whose clock the store reads: that
	// one holds up the calls that need a first sample, which
	// TestFirstClockSampleShared is about.
	c, _, others := clockCluster(t)
	slowAddr, fastAddr := others[0], others[1]
	hook := &slowNode{cluster: c, addr: slowAddr, count: map[string]int{}}
	c.AddHook(hook)
	s := New(c, Options{})
	defer s.Close()
	l := allowing(limits.FixedWindow, 1000)
	decide := func(keys ...string) ([]limits.Result, time.Duration) {
		hits := make([]limits.Hit, len(keys))
		for i, k := range keys {
			hits[i] = limits.Hit{Key: k, Limit: l, Cost: 1}
		}
		res := make([]limits.Result, len(hits))
		start := time.Now()
		s.Decide(context.Background(), hits, res)
		return res, time.Since(start)
	}

	const goroutines, calls = 16, 5
	slowKeys, fastKeys := keysOn(t, c, slowAddr, goroutines), keysOn(t, c, fastAddr, goroutines)
	if res, _ := decide("{warm}"); res[0].Err != nil { // a first clock sample
		t.Fatal(res[0].Err)
	}
	hook.delay.Store(int64(300 * time.Millisecond))
	var wg sync.WaitGroup
	var fastWorst atomic.Int64
	for g := range goroutines {
		wg.Go(func() { // the slow master's calls, held 300 ms a round trip
			for range 2 {
				if res, _ := decide(slowKeys[g]); res[0].Err != nil || !res[0].Allowed {
					t.Errorf("slow master, key %s: %+v", slowKeys[g], res[0])
				}
			}
		})
	}
	time.Sleep(50 * time.Millisecond) // the slow master's first flush is out
	for g := range goroutines {
		wg.Go(func() {
			for range calls {
				res, took := decide(fastKeys[g])
				if res[0].Err != nil || !res[0].Allowed {
					t.Errorf("fast master, key %s: %+v", fastKeys[g], res[0])
				}
				for {
					worst := fastWorst.Load()
					if int64(took) <= worst || fastWorst.CompareAndSwap(worst, int64(took)) {
						break
					}
				}
			}
		})
	}
	wg.Wait()
	// A wide margin: the fast master's calls take a millisecond or so; one
	// that waited behind the slow master would take 300 ms at least.
	if worst := time.Duration(fastWorst.Load()); worst >= 200*time.Millisecond {
		t.Errorf("a call for the fast master took %v: it waited for the slow one", worst)
	}
	hook.delay.Store(0)
	hook.mu.Lock()
	slowPipes, fastPipes := hook.count[slowAddr], hook.count[fastAddr]
	hook.mu.Unlock()
	// 32 calls for the slow master in two waves of about 300 ms: merged,
	// they take a handful of pipelines.
	if slowPipes >= goroutines {
		t.Errorf("%d pipelines for the slow master's %d calls: want them merged", slowPipes, goroutines*2)
	}
	t.Logf("pipelines: slow master %d for %d calls, fast master %d for %d calls", slowPipes, goroutines*2, fastPipes, goroutines*calls)

	// One call over both masters: split between their flushes, decided in
	// full.
	res, _ := decide(fastKeys[0], slowKeys[0])
	for i, want := range []int64{1000 - calls - 1, 1000 - 2 - 1} {
		if r := res[i]; r.Err != nil || !r.Allowed || r.Remaining != want {
			t.Errorf("spanning call, hit %d: got %+v, want allowed with %d remaining", i, r, want)
		}
	}
}

// Calls that find no estimate of Redis's clock share one TIME: on a
// cluster whose clock master answers slowly, 16 first calls send one
// sample there between them, not 16.
func TestFirstClockSampleShared(t *testing.T) {
	c, clockAddr, others := clockCluster(t)
	hook := countTime(t, c, clockAddr, 100*time.Millisecond)
	s := New(c, Options{})
	defer s.Close()
	keys := keysOn(t, c, others[0], 16)
	l := allowing(limits.FixedWindow, 10)
	var wg sync.WaitGroup
	for _, k := range keys {
		wg.Go(func() {
			res := make([]limits.Result, 1)
			s.Decide(context.Background(), []limits.Hit{{Key: k, Limit: l, Cost: 1}}, res)
			if res[0].Err != nil || !res[0].Allowed {
				t.Errorf("%s: %+v", k, res[0])
			}
		})
	}
	wg.Wait()
	if probes := hook.n.Load(); probes < 1 || probes > 2 { // the first, and at most one sample aside since
		t.Errorf("%d clock samples for 16 first calls, want one", probes)
	}
}
