//go:build unix

package breaker_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/breaker"
	"github.com/envoy-rls/envoy-rls/pkg/limits/redisstore"
)

// These tests stall a real redis-server (SIGSTOP, then SIGCONT) under a
// steady load through the Redis store and the breaker, as the service
// stacks them, and look at the answers: how many took the failure mode,
// and how long after the stall ended the last of them came.

// stallTimeout is the store timeout of these tests: -store-timeout's
// default.
const stallTimeout = 50 * time.Millisecond

// stallRedis is a redis-server the test can pause.
type stallRedis struct {
	*redistest.Server
	pid int
}

func startStallRedis(t *testing.T) *stallRedis {
	t.Helper()
	srv := redistest.Start(t)
	info, err := srv.Do("INFO", "server")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(info, "process_id:")
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(rest, "\n", 2)[0]))
	if !ok || err != nil {
		t.Fatalf("no process_id in INFO server: %v", err)
	}
	r := &stallRedis{Server: srv, pid: pid}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) }) // before the server's Stop
	return r
}

// stall pauses the server for d and returns when it was let go.
func (r *stallRedis) stall(t *testing.T, d time.Duration) time.Time {
	t.Helper()
	if err := syscall.Kill(r.pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(d) // the stall itself, not a wait for something to happen
	if err := syscall.Kill(r.pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	return time.Now()
}

// episode is what the load saw around one stall.
type episode struct {
	stall    time.Duration // how long the server was paused
	calls    int
	failures int // answers by the failure mode (the store's error or ErrOpen)
	// span is from the first failure answer to the last; recovery from the
	// stall's end to the last, zero if none came after it.
	span, recovery time.Duration
	// openRecovery is from the stall's end to the breaker's last ErrOpen
	// answer: how long the breaker outlasted the stall. The store's own
	// timeouts after the stall are the machine's (a call in flight that
	// waits for a CPU), not the breaker's.
	openRecovery time.Duration
	opened       bool // the breaker opened
	closed       bool // and was closed at the end
}

// shape is a load's: rate calls a second (open), or callers (closed).
type shape struct{ rate, callers int }

func (s shape) String() string {
	if s.callers > 0 {
		return fmt.Sprintf("%d callers", s.callers)
	}
	return fmt.Sprintf("%d calls/s", s.rate)
}

// load is a source of calls, in one of two shapes. With rate set, it is
// open: rate calls a second, each on a goroutine of its own as gRPC serves
// them, so that calls held up by a stall do not hold back the ones due
// after them. With callers set, it is closed: that many callers, each
// making its next call as soon as the last is answered, as rls-bench does;
// then an open breaker's fast answers come as fast as the callers can take
// them (far faster than over gRPC: count the span of the failure answers
// rather than their number), and no call is in flight when the stall ends.
type load struct {
	shape
	store limits.Store
	stop  chan struct{}
	wg    sync.WaitGroup

	mu       sync.Mutex
	calls    int
	failures []time.Time // when each failure answer came
	opens    []time.Time // when each ErrOpen answer came
}

func (l *load) start() {
	l.stop = make(chan struct{})
	for c := range l.callers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				l.call(c)
				// A caller over gRPC blocks on its connection between
				// calls; one here yields instead. Goroutines that never
				// block would keep the one reading a probe's reply off
				// the CPU for hundreds of milliseconds (Go's scheduler
				// preempts them every 10 ms and serves woken goroutines
				// behind them), a delay no server sees.
				runtime.Gosched()
			}
		}()
	}
	if l.rate == 0 {
		return
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		begin := time.Now()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		sent := 0
		for {
			select {
			case <-l.stop:
				return
			case now := <-tick.C:
				due := int(now.Sub(begin) * time.Duration(l.rate) / time.Second)
				for ; sent < due; sent++ {
					l.wg.Add(1)
					go func(n int) {
						defer l.wg.Done()
						l.call(n)
					}(sent)
				}
			}
		}
	}()
}

func (l *load) call(n int) {
	hits := []limits.Hit{{Key: fmt.Sprintf("stall:%d", n%64), Cost: 1,
		Limit: limits.Limit{Algorithm: limits.TokenBucket, Requests: 1 << 30, Period: time.Second}}}
	res := make([]limits.Result, 1)
	ctx, cancel := context.WithTimeout(context.Background(), stallTimeout)
	l.store.Decide(ctx, hits, res)
	cancel()
	at := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	if res[0].Err != nil {
		l.failures = append(l.failures, at)
	}
	if errors.Is(res[0].Err, breaker.ErrOpen) {
		l.opens = append(l.opens, at)
	}
}

func (l *load) end() {
	close(l.stop)
	l.wg.Wait()
}

// runStall stalls r for d under a load of the given shape,
// through a fresh client, Redis store and breaker, and reports what the
// callers saw up to tail after the stall's end.
func runStall(t *testing.T, r *stallRedis, d time.Duration, shape shape, tail time.Duration) episode {
	t.Helper()
	client, err := redisstore.NewClient(redisstore.ClientOptions{URL: r.URL(), Timeout: stallTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	store := redisstore.New(client, redisstore.Options{})
	defer store.Close()
	var opened atomic.Bool
	b := newStallBreaker(store, func(open bool) {
		if open {
			opened.Store(true)
		}
	})
	l := &load{shape: shape, store: b}
	l.start()
	time.Sleep(200 * time.Millisecond) // the stimulus's lead-in: the pool's connections open
	begin := time.Now()
	end := r.stall(t, d)
	time.Sleep(tail) // the window of observation
	l.end()
	ep := episode{stall: end.Sub(begin), calls: l.calls, failures: len(l.failures), opened: opened.Load(), closed: !b.Open()}
	if len(l.failures) > 0 {
		first, last := slices.MinFunc(l.failures, time.Time.Compare), slices.MaxFunc(l.failures, time.Time.Compare)
		ep.span, ep.recovery = last.Sub(first), max(last.Sub(end), 0)
	}
	if len(l.opens) > 0 {
		ep.openRecovery = max(slices.MaxFunc(l.opens, time.Time.Compare).Sub(end), 0)
	}
	return ep
}

// newStallBreaker is the breaker as internal/server builds it.
func newStallBreaker(s limits.Store, onChange func(bool)) *breaker.Breaker {
	return breaker.New(s, breaker.Options{Timeout: stallTimeout, OnChange: onChange})
}

// stallTail is how long after a stall the tests watch the answers.
const stallTail = 2500 * time.Millisecond

// recoveryBound is how soon after a stall the breaker's open answers must
// have ended. The breaker probes within 550 ms; the rest is margin for a
// loaded machine (CI runs test packages side by side on two cores). The
// store's own timeouts are not held to it: on a starved machine a call in
// flight can wait for a CPU well past the stall, which says nothing of the
// breaker.
const recoveryBound = 2 * time.Second

// A stall shorter than the store timeout opens nothing; after a longer one
// the breaker answers by the store again within recoveryBound, under
// an open load (calls in flight at the stall's end may close the breaker)
// and a closed one (only a probe can).
func TestStall(t *testing.T) {
	r := startStallRedis(t)
	for _, shape := range []shape{{rate: 2000}, {callers: 8}} {
		for _, c := range []struct {
			stall   time.Duration
			mayOpen bool
		}{
			{stallTimeout / 2, false},
			{100 * time.Millisecond, true},
			{300 * time.Millisecond, true},
		} {
			ep := runStall(t, r, c.stall, shape, stallTail)
			what := fmt.Sprintf("%s, a stall of %v", shape.String(), ep.stall.Round(time.Millisecond))
			t.Logf("%s: %d calls, %d failure answers, the last %v after it (the last open answer %v), opened %v",
				what, ep.calls, ep.failures, ep.recovery.Round(time.Millisecond), ep.openRecovery.Round(time.Millisecond), ep.opened)
			if ep.opened && !c.mayOpen {
				t.Errorf("%s, shorter than the store timeout (%v), opened the breaker", what, stallTimeout)
			}
			if ep.openRecovery > recoveryBound {
				t.Errorf("%s: the breaker answered open %v after it ended, want at most %v", what, ep.openRecovery, recoveryBound)
			}
			if !ep.closed {
				t.Errorf("%s: the breaker was still open %v after it ended", what, stallTail)
			}
		}
	}
}

// TestStallCurve measures the stall-to-recovery curve that BENCHMARKS.md
// and README show:
//
//	RLS_STALL_CURVE=35ms,86ms,200ms,500ms,2s go test -run TestStallCurve -v ./pkg/limits/breaker/
//
// under an open load (RLS_STALL_RATE calls a second, default 5000) and a
// closed one (RLS_STALL_CALLERS callers, default 64); RLS_STALL_REPEAT runs
// per point (default 3): the table shows the median, and the range.
func TestStallCurve(t *testing.T) {
	spec := os.Getenv("RLS_STALL_CURVE")
	if spec == "" {
		t.Skip("a measurement: set RLS_STALL_CURVE, e.g. 35ms,86ms,200ms,500ms,2s")
	}
	shapes := []shape{{rate: envInt(t, "RLS_STALL_RATE", 5000)}, {callers: envInt(t, "RLS_STALL_CALLERS", 64)}}
	repeat := envInt(t, "RLS_STALL_REPEAT", 3)
	r := startStallRedis(t)
	var out strings.Builder
	fmt.Fprintf(&out, "store timeout %v, median of %d (range)\n\n", stallTimeout, repeat)
	fmt.Fprintln(&out, "| load | stall | failure answers | over | the last after the stall's end | breaker opened |")
	fmt.Fprintln(&out, "|---|---|---|---|---|---|")
	for _, shape := range shapes {
		for _, s := range strings.Split(spec, ",") {
			d, err := time.ParseDuration(strings.TrimSpace(s))
			if err != nil {
				t.Fatal(err)
			}
			var fails []int
			var spans, recs []time.Duration
			opened := 0
			for range repeat {
				ep := runStall(t, r, d, shape, stallTail)
				fails, spans, recs = append(fails, ep.failures), append(spans, ep.span), append(recs, ep.recovery)
				if ep.opened {
					opened++
				}
			}
			fmt.Fprintf(&out, "| %s | %v | %s | %s | %s | %d of %d |\n", shape.String(), d,
				medianRange(fails, strconv.Itoa), medianRange(spans, ms), medianRange(recs, ms), opened, repeat)
		}
	}
	t.Log("\n" + out.String())
}

// medianRange formats the median of v and its range.
func medianRange[T int | time.Duration](v []T, format func(T) string) string {
	slices.Sort(v)
	return fmt.Sprintf("%s (%s–%s)", format(v[len(v)/2]), format(v[0]), format(v[len(v)-1]))
}

func ms(d time.Duration) string { return fmt.Sprintf("%d ms", d.Milliseconds()) }

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}
