package redisstore

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// pipelineCounter counts pipelines, and holds each for delay. If started is
// set, each pipeline also sends on it as it arrives, when there is room.
type pipelineCounter struct {
	n       atomic.Int64
	delay   atomic.Int64 // ns
	started chan struct{}
}

func (*pipelineCounter) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (*pipelineCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (p *pipelineCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		p.n.Add(1)
		select {
		case p.started <- struct{}{}:
		default:
		}
		time.Sleep(time.Duration(p.delay.Load()))
		return next(ctx, cmds)
	}
}

// flushers counts the running flusher goroutines.
func flushers() int {
	buf := make([]byte, 1<<20)
	return strings.Count(string(buf[:runtime.Stack(buf, true)]), "(*batcher).flusher")
}

// waitNoFlushers fails t unless the flushers are gone within a second.
func waitNoFlushers(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(time.Second); flushers() != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("%d flushers still running", flushers())
		}
		time.Sleep(time.Millisecond)
	}
}

// TestBatchMerges decides from many goroutines: the calls share pipelines
// (far fewer than calls), every limit is exact, and no flusher outlives its
// work or Close.
func TestBatchMerges(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, ClientOptions{URL: srv.URL(), Timeout: testTimeout})
	var pc pipelineCounter
	c.AddHook(&pc)
	s := New(c, Options{Clock: fixedClock(1_767_225_600_000_000).Clock, Flushes: 2})
	defer s.Close()
	pc.delay.Store(int64(2 * time.Millisecond)) // let the queue fill

	for _, alg := range implemented {
		pc.n.Store(0)
		hit := limits.Hit{Key: "merge:" + alg.String(), Limit: allowing(alg, 100), Cost: 1, MaxDelay: time.Hour}
		if got := hammer(t, s, []limits.Hit{hit}); got != 100 {
			t.Errorf("%s: allowed %d, want exactly 100", alg, got)
		}
		if n := pc.n.Load(); n >= 32*20/2 {
			t.Errorf("%s: %d pipelines for %d calls, want them merged", alg, n, 32*20)
		}
	}
	waitNoFlushers(t)
	s.Close()
	if r := decideOne(t, s, limits.Hit{Key: "after-close", Limit: hourly(limits.FixedWindow, 1), Cost: 1}); r.Err != nil || !r.Allowed {
		t.Errorf("after Close: got %+v, want allowed", r)
	}
	if n := flushers(); n != 0 {
		t.Errorf("%d flushers after Close", n)
	}
}

// TestBatchDeadline holds the pipelines: a call whose context ends while it
// waits returns at once with the context's error, and the others are decided.
func TestBatchDeadline(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, ClientOptions{URL: srv.URL(), Timeout: testTimeout})
	pc := pipelineCounter{started: make(chan struct{}, 1)}
	c.AddHook(&pc)
	s := New(c, Options{Flushes: 1})
	defer s.Close()
	s.pipes.WaitAside() // the warm-up's TIME is not the slow call's pipeline
	// Nor does its round trip, slow on a loaded machine, count as a far
	// Redis's, which would let flushes start beside the held one.
	s.pipes.ForgetRoundTrips()
	select {
	case <-pc.started:
	default:
	}
	pc.delay.Store(int64(300 * time.Millisecond))

	var wg sync.WaitGroup
	slow := make([]limits.Result, 1)
	wg.Go(func() {
		s.Decide(context.Background(), []limits.Hit{{Key: "slow", Limit: hourly(limits.FixedWindow, 5), Cost: 1}}, slow)
	})
	<-pc.started // the slow call's pipeline is in flight, holding the only flusher
	hits := []limits.Hit{
		{Key: "{q}1", Limit: hourly(limits.TokenBucket, 5), Cost: 1},
		{Key: "{q}2", Limit: hourly(limits.SlidingLog, 5), Cost: 1, Joint: true},
		{Key: "{q}3", Limit: hourly(limits.FixedWindow, 5), Cost: 1},
	}
	res := make([]limits.Result, len(hits))
	for _, tc := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 20*time.Millisecond)
		}, context.DeadlineExceeded},
		{"cancel", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(20*time.Millisecond, cancel)
			return ctx, cancel
		}, context.Canceled},
	} {
		ctx, cancel := tc.ctx()
		start := time.Now()
		s.Decide(ctx, hits, res)
		elapsed := time.Since(start)
		cancel()
		if elapsed > 150*time.Millisecond {
			t.Errorf("%s: Decide took %s behind a held pipeline, want about 20ms", tc.name, elapsed)
		}
		for i, r := range res {
			if !errors.Is(r.Err, tc.want) || !errors.Is(r.Err, limits.ErrUnavailable) {
				t.Errorf("%s: hit %d: got %+v, want %v (unavailable)", tc.name, i, r, tc.want)
			}
		}
	}
	wg.Wait()
	if slow[0].Err != nil || !slow[0].Allowed {
		t.Errorf("the held call: got %+v, want allowed", slow[0])
	}
	pc.delay.Store(0)
	waitNoFlushers(t)
}

// TestBatchCluster merges the calls of many goroutines on a cluster, keys of
// every node in each.
func TestBatchCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	c := newClient(t, ClientOptions{Cluster: cl.Addrs(), Timeout: testTimeout})
	var pc pipelineCounter
	c.AddHook(&pc)
	s := New(c, Options{Clock: fixedClock(1_767_225_600_000_000).Clock, Batching: BatchOn, Flushes: 2})
	defer s.Close()
	pc.delay.Store(int64(2 * time.Millisecond))
	const goroutines, calls = 16, 10
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			hits := []limits.Hit{
				{Key: fmt.Sprintf("{g%d}:a", g), Limit: allowing(implemented[g%len(implemented)], 100), Cost: 1, Joint: true},
				{Key: fmt.Sprintf("{g%d}:b", g), Limit: allowing(implemented[(g+1)%len(implemented)], 100), Cost: 1},
				{Key: fmt.Sprintf("{h%d}", g), Limit: allowing(implemented[(g+2)%len(implemented)], 100), Cost: 1},
			}
			res := make([]limits.Result, len(hits))
			for i := range calls {
				s.Decide(context.Background(), hits, res)
				for k, r := range res {
					if r.Err != nil || !r.Allowed || r.Remaining != int64(99-i) {
						t.Errorf("goroutine %d call %d hit %s: got %+v, want allowed with remaining %d", g, i, hits[k].Key, r, 99-i)
					}
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d pipelines for %d calls", pc.n.Load(), goroutines*calls)
	s.Close()
	if n := flushers(); n != 0 {
		t.Errorf("%d flushers after Close", n)
	}
}

// TestOnPipeline: the store reports how many runs each pipeline carried,
// with and without merging. The clock is fixed: a store that asks Redis's
// clock decides its first call at a provisional instant, and goes again
// (a second pipeline) when the TIME beside it belies that instant, which
// a loaded machine can make happen.
func TestOnPipeline(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, ClientOptions{URL: srv.URL(), Timeout: testTimeout})
	for _, b := range []Batching{BatchAuto, BatchOff} {
		var mu sync.Mutex
		var got []int
		s := New(c, Options{Clock: fixedClock(1_767_225_600_000_000).Clock, Batching: b, OnPipeline: func(n int) { mu.Lock(); got = append(got, n); mu.Unlock() }})
		l := allowing(limits.FixedWindow, 10)
		hits := []limits.Hit{
			{Key: "{p}:a", Limit: l, Cost: 1},
			{Key: "{p}:b", Limit: l, Cost: 1, Joint: true}, {Key: "{p}:c", Limit: l, Cost: 1},
			{Key: "{p}:d", Limit: l, Cost: 1},
		}
		res := make([]limits.Result, len(hits))
		s.Decide(context.Background(), hits, res)
		s.Close()
		for i, r := range res {
			if r.Err != nil {
				t.Fatalf("batching %v: hit %d: %v", b, i, r.Err)
			}
		}
		// Three runs: a hit, a joint run of two, a hit.
		if len(got) != 1 || got[0] != 3 {
			t.Errorf("batching %v: OnPipeline got %v, want [3]", b, got)
		}
	}
}

// TestBatchBurst starts a burst of calls on an idle store with one
// processor, the way the replies of one pipeline bring their callers back
// together: the first call yields once before it sends, and takes the
// calls that queued meanwhile with it, so the burst goes in one pipeline
// (without the yield, the first goes alone and the rest follow in a
// second). The scheduler may run the first call again early, so the test
// wants one attempt of five in a single pipeline.
func TestBatchBurst(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, ClientOptions{URL: srv.URL(), Timeout: testTimeout})
	var pc pipelineCounter
	c.AddHook(&pc)
	s := New(c, fixedClock(1_767_225_600_000_000))
	defer s.Close()
	decideOne(t, s, limits.Hit{Key: "burst:warm", Limit: hourly(limits.FixedWindow, 10), Cost: 1}) // dial the connection
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))

	const calls = 8
	best := int64(calls)
	for attempt := range 5 {
		pc.n.Store(0)
		var wg sync.WaitGroup
		res := make([]limits.Result, calls)
		for i := range calls {
			wg.Go(func() {
				hit := limits.Hit{Key: fmt.Sprintf("burst:%d:%d", attempt, i), Limit: hourly(limits.FixedWindow, 10), Cost: 1}
				s.Decide(context.Background(), []limits.Hit{hit}, res[i:i+1])
			})
		}
		wg.Wait()
		for i, r := range res {
			if r.Err != nil || !r.Allowed {
				t.Fatalf("attempt %d, call %d: got %+v, want allowed", attempt, i, r)
			}
		}
		best = min(best, pc.n.Load())
		if best == 1 {
			return
		}
	}
	t.Errorf("a burst of %d calls on an idle store went in %d pipelines at best, want 1", calls, best)
}

// holdFirst holds the first pipeline until release is closed.
type holdFirst struct {
	n       atomic.Int64
	held    chan struct{}
	release chan struct{}
}

func (*holdFirst) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (*holdFirst) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *holdFirst) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.n.Add(1) == 1 {
			close(h.held)
			<-h.release
		}
		return next(ctx, cmds)
	}
}

// TestBatchStall: one flush is in flight at a time, but a call queued
// behind one that stalls goes out in a second flush once the first has been
// out too long, without another call arriving to start it.
func TestBatchStall(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, ClientOptions{URL: srv.URL(), Timeout: testTimeout})
	h := &holdFirst{held: make(chan struct{}), release: make(chan struct{})}
	c.AddHook(h)
	s := New(c, Options{Clock: fixedClock(1_767_225_600_000_000).Clock, Flushes: 2})
	defer s.Close()
	l := hourly(limits.FixedWindow, 5)
	var wg sync.WaitGroup
	wg.Go(func() { decideOne(t, s, limits.Hit{Key: "stalled", Limit: l, Cost: 1}) })
	<-h.held
	start := time.Now()
	if r := decideOne(t, s, limits.Hit{Key: "behind", Limit: l, Cost: 1}); r.Err != nil || !r.Allowed {
		t.Errorf("the call behind the stalled flush: got %+v, want allowed", r)
	}
	if d := time.Since(start); d > 200*time.Millisecond {
		t.Errorf("the call behind the stalled flush took %s", d)
	}
	close(h.release)
	wg.Wait()
}
