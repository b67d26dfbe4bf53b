package redisstore

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// A Redis far away, or slow to answer, behind a redistest.DelayProxy: the
// round trip is the proxy's delay twice (there and back). Every decision
// must be one round trip, the clock's TIME riding in it: no call waits for
// a TIME of its own, however long the round trip, as long as the store
// timeout allows one.

// farCase is a round trip and the store timeout the test gives calls at
// it: a second, a wide margin on a loaded machine over what a call may
// take besides its decision's round trip, which is what the test checks
// (the calls that wait for none). A call that queues behind a merged flush
// in flight waits for it (maxStall at most, or for a slot when every flush
// is out), a refused log's or concurrency hit's undo is a flush more (a
// wait and a round trip: its answer reads it; other undos go after the
// answer), and a connection the pool opens under load costs a round trip
// more before its first command (go-redis's HELLO), all within the
// deadline of the call that needed it. TestFarColdStart and TestFarCurve
// run at the default store timeout.
type farCase struct {
	rtt, timeout time.Duration
}

var farCases = []farCase{
	{10 * time.Millisecond, time.Second},
	{20 * time.Millisecond, time.Second},
	{40 * time.Millisecond, time.Second},
}

func (f farCase) String() string { return "rtt=" + f.rtt.String() }

// clockWaits counts the TIME commands a call waited for before its
// decision: a pipeline of nothing but TIME (a single Redis's clock asked
// for), or, on a cluster's node, a TIME sent under a call's context (the
// samples aside have a context of their own). It also counts every TIME.
type clockWaits struct {
	waits, times atomic.Int64
}

// callCtx marks the context of a test's Decide call.
type callCtx struct{}

func (*clockWaits) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *clockWaits) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "time" {
			h.times.Add(1)
			if ctx.Value(callCtx{}) != nil {
				h.waits.Add(1)
			}
		}
		return next(ctx, cmd)
	}
}
func (h *clockWaits) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		alone := true
		for _, c := range cmds {
			if c.Name() == "time" {
				h.times.Add(1)
			} else {
				alone = false
			}
		}
		if alone {
			h.waits.Add(1)
		}
		return next(ctx, cmds)
	}
}

// farStores are the stores of a test, each on a client of its own, and
// their hook.
type farStores struct {
	stores []*Store
	hook   *clockWaits
	// timeout is what each call is given, as -store-timeout gives it.
	timeout time.Duration
}

// newFarStores builds n stores, each on a client that newClient returns,
// hooked by one clockWaits (on a cluster's nodes, as they are made).
func newFarStores(t *testing.T, n int, timeout time.Duration, client func() redis.UniversalClient) *farStores {
	t.Helper()
	f := &farStores{hook: &clockWaits{}, timeout: timeout}
	for range n {
		c := client()
		if cc, ok := c.(*redis.ClusterClient); ok {
			cc.OnNewNode(func(node *redis.Client) { node.AddHook(f.hook) })
		} else {
			c.AddHook(f.hook)
		}
		s := New(c, Options{})
		t.Cleanup(s.Close)
		f.stores = append(f.stores, s)
	}
	return f
}

// decide is one call, with the store timeout for its deadline.
func (f *farStores) decide(s *Store, hits []limits.Hit, res []limits.Result) {
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), callCtx{}, true), f.timeout)
	defer cancel()
	s.Decide(ctx, hits, res)
}

// warm gives each store its first estimate of the clock: the one TIME a
// call waits for, at the start.
func (f *farStores) warm(t *testing.T) {
	t.Helper()
	for i, s := range f.stores {
		h := []limits.Hit{{Key: "{far}:warm:" + strconv.Itoa(i), Limit: allowing(limits.FixedWindow, 1000), Cost: 1}}
		res := make([]limits.Result, 1)
		var err error
		if !eventually(5*time.Second, func() bool { f.decide(s, h, res); err = res[0].Err; return err == nil }) {
			t.Fatalf("store %d cannot decide its first hit: %v", i, err)
		}
	}
	f.hook.waits.Store(0)
}

// farExact runs callers on the stores, each callsEach hits of l on key, and
// requires every hit decided, at least n allowed and no more than n plus
// extra (a bucket's refill meanwhile), and no call waiting for a TIME.
func (f *farStores) farExact(t *testing.T, key string, l limits.Limit, extra int64) {
	t.Helper()
	const callers, callsEach = 12, 10
	n := l.Requests
	var allowed, failed atomic.Int64
	var lastErr atomic.Value
	var wg sync.WaitGroup
	for g := range callers {
		s := f.stores[g%len(f.stores)]
		wg.Go(func() {
			hit := []limits.Hit{{Key: key, Limit: l, Cost: 1, MaxDelay: time.Hour}}
			res := make([]limits.Result, 1)
			for range callsEach {
				f.decide(s, hit, res)
				switch {
				case res[0].Err != nil:
					failed.Add(1)
					lastErr.Store(res[0].Err.Error())
				case res[0].Allowed:
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if got := failed.Load(); got > 0 {
		t.Errorf("%s: %d of %d hits failed (the failure mode would answer them), the last: %v", l, got, callers*callsEach, lastErr.Load())
	}
	if got := allowed.Load(); got < n-failed.Load() || got > n+extra {
		t.Errorf("%s: %d allowed of %d hits, want %d", l, got, callers*callsEach, n)
	}
	if w := f.hook.waits.Swap(0); w > 0 {
		t.Errorf("%s: calls waited for %d TIME of their own (a second round trip each); want none once the clock has an estimate", l, w)
	}
}

// refill is what a bucket of l may let through more than its tokens in a
// test's few seconds.
func refill(l limits.Limit) int64 {
	if l.Algorithm == limits.TokenBucket || l.Algorithm == limits.LeakyBucket {
		return 1
	}
	return 0
}

// TestFarRedis: behind a proxy that adds a round trip of 10, 20 and 40 ms,
// three stores with four callers each on one key: every hit is decided,
// exactly (no overshoot), and no call waits for a TIME of its own once the
// clock has its first estimate, for every algorithm.
func TestFarRedis(t *testing.T) {
	srv := redistest.Start(t)
	direct := newClient(t, ClientOptions{URL: srv.URL(), Timeout: testTimeout})
	waitPastBoundary(t, direct, time.Hour)
	for _, fc := range farCases {
		t.Run(fc.String(), func(t *testing.T) {
			p := redistest.StartDelayProxyJitter(t, srv.Addr(), fc.rtt/2, time.Millisecond)
			f := newFarStores(t, 3, fc.timeout, func() redis.UniversalClient {
				return newClient(t, ClientOptions{URL: "redis://" + p.Addr(), Timeout: fc.timeout})
			})
			f.warm(t)
			for _, alg := range implemented {
				l := allowing(alg, 60)
				f.farExact(t, fmt.Sprintf("far:%s:%s", fc.rtt, alg), l, refill(l))
			}
			t.Logf("%d TIME sent, each in a decision's pipeline", f.hook.times.Load())
		})
	}
}

// TestFarColdStart: a store that starts 20 ms from its Redis, with the
// default store timeout and no warm-up, decides from its first calls on:
// the connection it opens, and the first TIME, fit in a call's deadline.
// (go-redis's CLIENT SETINFO and CLIENT MAINT_NOTIFICATIONS, two round
// trips more, did not, and a timed-out handshake closes the connection: no
// call was ever decided.)
func TestFarColdStart(t *testing.T) {
	srv := redistest.Start(t)
	p := redistest.StartDelayProxy(t, srv.Addr(), 10*time.Millisecond)
	f := newFarStores(t, 1, DefaultTimeout, func() redis.UniversalClient {
		return newClient(t, ClientOptions{URL: "redis://" + p.Addr()}) // the default timeout
	})
	hit := []limits.Hit{{Key: "{far}:cold", Limit: allowing(limits.FixedWindow, 1000), Cost: 1}}
	res := make([]limits.Result, 1)
	const calls, first = 20, 3 // the first few may wait for the clock and a connection
	failed := 0
	var lastErr error
	for i := range calls {
		f.decide(f.stores[0], hit, res)
		if res[0].Err != nil && i >= first {
			failed++
			lastErr = res[0].Err
		}
	}
	if failed > 0 {
		t.Errorf("%d of the %d calls after the first %d failed, the last: %v", failed, calls-first, first, lastErr)
	}
}

// TestFarSentinel: the master that a Sentinel names is 20 ms away (the
// Sentinel watches it through the proxy): decisions are one round trip.
func TestFarSentinel(t *testing.T) {
	sen := redistest.StartSentinel(t)
	fc := farCases[1]
	p := redistest.StartDelayProxy(t, sen.Master.Addr(), fc.rtt/2)
	// The Sentinel names the master by the proxy's address.
	for _, cmd := range [][]string{
		{"SENTINEL", "REMOVE", redistest.SentinelMaster},
		{"SENTINEL", "MONITOR", redistest.SentinelMaster, "127.0.0.1", strconv.Itoa(proxyPort(t, p)), "1"},
	} {
		if _, err := sen.Sentinel.Do(cmd...); err != nil {
			t.Fatalf("%s: %v", strings.Join(cmd, " "), err)
		}
	}
	f := newFarStores(t, 2, fc.timeout, func() redis.UniversalClient {
		return newClient(t, ClientOptions{Sentinel: sen.Addrs(), SentinelMaster: redistest.SentinelMaster, Timeout: fc.timeout})
	})
	f.warm(t)
	l := allowing(limits.SlidingLog, 60)
	f.farExact(t, "{far}:sentinel", l, 0)
}

// TestFarCluster: every master of a cluster is 20 ms away (each announces
// its proxy's port in the slot map): decisions are one round trip, the
// clock sampled aside.
func TestFarCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	fc := farCases[1]
	var seeds []string
	for _, node := range cl.Nodes {
		p := redistest.StartDelayProxy(t, node.Addr(), fc.rtt/2)
		if _, err := node.Do("CONFIG", "SET", "cluster-announce-port", strconv.Itoa(proxyPort(t, p))); err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, p.Addr())
	}
	// Every node's slot map names the proxies, once the nodes have told
	// each other.
	if !eventually(20*time.Second, func() bool { return slotsOn(cl, seeds) }) {
		t.Fatal("the nodes' slot maps do not name the proxies after 20 s")
	}
	f := newFarStores(t, 3, fc.timeout, func() redis.UniversalClient {
		return newClient(t, ClientOptions{Cluster: seeds, Timeout: fc.timeout})
	})
	f.warm(t)
	f.farExact(t, "{far}:cluster", allowing(limits.FixedWindow, 60), 0)
	if f.hook.times.Load() == 0 {
		t.Error("no TIME seen on the cluster's nodes: the hook is not where the clock's samples go")
	}
}

// TestFarCallers: 16 callers, each on its own key, on one store 20 ms
// from its Redis: the median decision takes well under two round trips. A
// call that arrives while a merged pipeline is out waits for it no longer
// than maxStall before one of its own may start, instead of the rest of
// its round trip and then the next one's.
func TestFarCallers(t *testing.T) {
	srv := redistest.Start(t)
	fc := farCases[1]
	p := redistest.StartDelayProxy(t, srv.Addr(), fc.rtt/2)
	f := newFarStores(t, 1, fc.timeout, func() redis.UniversalClient {
		return newClient(t, ClientOptions{URL: "redis://" + p.Addr(), Timeout: fc.timeout})
	})
	r := f.curve(16, 3*time.Second)
	t.Logf("%s, 16 callers: %.0f decisions/s, p50 %.1f ms, p99 %.1f ms, %.2f %% failed", fc, r.rate, r.p50, r.p99, r.failed)
	if r.failed > 0 {
		t.Errorf("%.2f %% of the decisions failed", r.failed)
	}
	if bound := 1.6 * float64(fc.rtt) / 1e6; r.p50 >= bound {
		t.Errorf("the median decision took %.1f ms, want under %.1f ms (1.6 round trips): calls wait for the pipeline in flight", r.p50, bound)
	}
}

// proxyPort is the port of p's address.
func proxyPort(t *testing.T, p *redistest.DelayProxy) int {
	t.Helper()
	_, port, _ := strings.Cut(p.Addr(), ":")
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// slotsOn reports whether every node's CLUSTER SLOTS names addrs alone.
func slotsOn(cl *redistest.Cluster, addrs []string) bool {
	for _, node := range cl.Nodes {
		out, err := node.Do("CLUSTER", "SLOTS")
		if err != nil {
			return false
		}
		for _, a := range cl.Nodes {
			if strings.Contains(out, "\n"+strconv.Itoa(a.Port())+"\n") {
				return false
			}
		}
		for _, a := range addrs {
			_, port, _ := strings.Cut(a, ":")
			if !strings.Contains(out, "\n"+port+"\n") {
				return false
			}
		}
	}
	return true
}

// TestFarCurve measures decisions a second and their latency behind the
// proxy, for one store with callers each deciding its own key:
//
//	RLS_FAR_CURVE=10ms,20ms,40ms RLS_FAR_CALLERS=1,16 go test -run TestFarCurve -v ./pkg/limits/redisstore/
//
// each round trip for RLS_FAR_SECONDS (default 5), each call given the
// store timeout (the default, 50 ms, up to a 20 ms round trip; 150 ms
// above), after a warm-up with a generous deadline (connections opened).
func TestFarCurve(t *testing.T) {
	spec := os.Getenv("RLS_FAR_CURVE")
	if spec == "" {
		t.Skip("a measurement: set RLS_FAR_CURVE, e.g. 10ms,20ms,40ms")
	}
	secs := 5
	if v := os.Getenv("RLS_FAR_SECONDS"); v != "" {
		secs, _ = strconv.Atoi(v)
	}
	callers := []int{1, 16}
	if v := os.Getenv("RLS_FAR_CALLERS"); v != "" {
		callers = nil
		for _, c := range strings.Split(v, ",") {
			n, _ := strconv.Atoi(c)
			callers = append(callers, n)
		}
	}
	srv := redistest.Start(t)
	var out strings.Builder
	fmt.Fprintln(&out, "| round trip | store timeout | callers | decisions/s | p50 | p99 | failed |")
	fmt.Fprintln(&out, "|---|---|---|---|---|---|---|")
	for _, s := range strings.Split(spec, ",") {
		rtt, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil {
			t.Fatal(err)
		}
		fc := farCase{rtt, DefaultTimeout}
		if rtt > 20*time.Millisecond {
			fc.timeout = 150 * time.Millisecond // a round trip near the default leaves no room
		}
		for _, n := range callers {
			p := redistest.StartDelayProxy(t, srv.Addr(), rtt/2)
			f := newFarStores(t, 1, fc.timeout, func() redis.UniversalClient {
				return newClient(t, ClientOptions{URL: "redis://" + p.Addr(), Timeout: fc.timeout})
			})
			r := f.curve(n, time.Duration(secs)*time.Second)
			fmt.Fprintf(&out, "| %v | %v | %d | %.0f | %.1f ms | %.1f ms | %.2f %% |\n", rtt, fc.timeout, n, r.rate, r.p50, r.p99, r.failed)
			p.Close()
		}
	}
	t.Log("\n" + out.String())
}

type curvePoint struct{ rate, p50, p99, failed float64 }

// curve runs n callers on f's store for d, after a warm-up of as many
// concurrent calls with a generous deadline.
func (f *farStores) curve(n int, d time.Duration) curvePoint {
	s := f.stores[0]
	l := allowing(limits.FixedWindow, limits.MaxRequests)
	var wg sync.WaitGroup
	for g := range n {
		wg.Go(func() {
			res := make([]limits.Result, 1)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			s.Decide(ctx, []limits.Hit{{Key: "{curve}:" + strconv.Itoa(g), Limit: l, Cost: 1}}, res)
		})
	}
	wg.Wait()
	lat := make([][]time.Duration, n)
	fails := make([]int, n)
	end := time.Now().Add(d)
	for g := range n {
		wg.Go(func() {
			hit := []limits.Hit{{Key: "{curve}:" + strconv.Itoa(g), Limit: l, Cost: 1}}
			res := make([]limits.Result, 1)
			for time.Now().Before(end) {
				start := time.Now()
				f.decide(s, hit, res)
				lat[g] = append(lat[g], time.Since(start))
				if res[0].Err != nil {
					fails[g]++
				}
			}
		})
	}
	wg.Wait()
	var all []time.Duration
	failed := 0
	for g := range n {
		all = append(all, lat[g]...)
		failed += fails[g]
	}
	slices.Sort(all)
	msOf := func(q float64) float64 { return float64(all[int(q*float64(len(all)-1))]) / 1e6 }
	return curvePoint{rate: float64(len(all)) / d.Seconds(), p50: msOf(0.5), p99: msOf(0.99), failed: 100 * float64(failed) / float64(len(all))}
}
