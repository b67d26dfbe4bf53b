package integration

import (
	"context"
	endian "encoding/binary"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// Helpers of the TestDistributed* tests: several processes on one Redis, a
// Redis Cluster, outages under load, and resource counts of a process.

// distServer is a running service with its pprof address.
type distServer struct {
	*server
	debugAddr string
}

// startDistServer starts the service with the standard flags, pprof on a
// free port, and flags.
func startDistServer(t *testing.T, config string, flags ...string) *distServer {
	t.Helper()
	var debugAddr string
	s := startServerWith(t, func(grpcAddr, httpAddr string) ([]string, []string) {
		debugAddr = freeAddr(t)
		args := append(standardFlags(config, grpcAddr, httpAddr), "-debug-addr", debugAddr)
		return append(args, flags...), nil
	})
	return &distServer{server: s, debugAddr: debugAddr}
}

// distKey is the store key the service builds for a one-entry descriptor
// of domain under l.
func distKey(domain, key, value string, l limits.Limit) string {
	return descriptors.Key(descriptors.KeyInput{
		Domain:  domain,
		Entries: []descriptors.Entry{{Key: key, Value: value}},
		Limit:   l,
	})
}

// distCounter is the Redis key of the current window's counter of a
// window limit l's store key (a fixed or sliding window counts each window
// under a key of its own: the key, '#' and the window's index).
func distCounter(key string, l limits.Limit) string {
	w := time.Now().UnixMicro() / l.PeriodMicros()
	return key + "#" + strconv.FormatInt(w, 10)
}

// distCount reads a window counter as GET answered it (its 8 bytes, a
// BITFIELD u63 in their high bits) in decimal; anything else as it came.
func distCount(raw string, err error) (string, error) {
	if err != nil || len(raw) != 8 {
		return raw, err
	}
	return strconv.FormatUint(endian.BigEndian.Uint64([]byte(raw))>>1, 10), nil
}

// distYear is a unit of year as the limits file counts it.
const distYear = 365 * 24 * time.Hour

// distAnswer is one call of a load: when it started, how long it took and
// what came back.
type distAnswer struct {
	caller    int
	start     time.Time
	latency   time.Duration
	code      rlsv3.RateLimitResponse_Code // when err is nil
	remaining uint32                       // of the first status
	err       error
}

func (a distAnswer) String() string {
	if a.err != nil {
		return fmt.Sprintf("caller %d: error %v after %s", a.caller, a.err, a.latency)
	}
	return fmt.Sprintf("caller %d: %v, remaining %d, after %s", a.caller, a.code, a.remaining, a.latency)
}

// distLoad is a closed-loop load: callers goroutines, each sending a request
// as soon as the previous one is answered, until stop.
type distLoad struct {
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	answers []distAnswer
}

// startDistLoad starts callers closed-loop callers; call i of caller c sends
// next(c, i) to s with a deadline of callBound.
func startDistLoad(s *server, callers int, next func(caller, i int) *rlsv3.RateLimitRequest) *distLoad {
	ctx, cancel := context.WithCancel(context.Background())
	l := &distLoad{cancel: cancel}
	for c := range callers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				req := next(c, i)
				cctx, ccancel := context.WithTimeout(ctx, callBound)
				start := time.Now()
				resp, err := s.rls.ShouldRateLimit(cctx, req)
				lat := time.Since(start)
				ccancel()
				if ctx.Err() != nil && status.Code(err) == codes.Canceled {
					return // stopped mid-call
				}
				a := distAnswer{caller: c, start: start, latency: lat, err: err}
				if err == nil {
					a.code = resp.GetOverallCode()
					if sts := resp.GetStatuses(); len(sts) > 0 {
						a.remaining = sts[0].GetLimitRemaining()
					}
				}
				l.mu.Lock()
				l.answers = append(l.answers, a)
				l.mu.Unlock()
			}
		}()
	}
	return l
}

// stop stops the load, waits for its callers and returns every answer.
func (l *distLoad) stop() []distAnswer {
	l.cancel()
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.answers)
}

// count returns how many answers the load has had so far.
func (l *distLoad) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.answers)
}

// latencyStats are the figures of a set of latencies.
type latencyStats struct {
	n                  int
	p50, p99, max, sum time.Duration
}

func (s latencyStats) String() string {
	if s.n == 0 {
		return "no answers"
	}
	return fmt.Sprintf("%d answers, mean %s, p50 %s, p99 %s, max %s", s.n,
		(s.sum / time.Duration(s.n)).Round(time.Microsecond), s.p50.Round(time.Microsecond),
		s.p99.Round(time.Microsecond), s.max.Round(time.Microsecond))
}

func latencies(answers []distAnswer) latencyStats {
	ls := make([]time.Duration, len(answers))
	var st latencyStats
	for i, a := range answers {
		ls[i] = a.latency
		st.sum += a.latency
	}
	if len(ls) == 0 {
		return st
	}
	slices.Sort(ls)
	st.n = len(ls)
	st.p50 = ls[len(ls)/2]
	st.p99 = ls[min(len(ls)-1, len(ls)*99/100)]
	st.max = ls[len(ls)-1]
	return st
}

// resources are what a leak would make grow.
type resources struct {
	goroutines int
	fds        int     // open file descriptors (/proc/PID/fd); -1 off Linux
	heapInuse  float64 // go_memstats_heap_inuse_bytes, after a GC
}

func (r resources) String() string {
	return fmt.Sprintf("goroutines %d, open fds %d, heap in use %.1f MiB", r.goroutines, r.fds, r.heapInuse/(1<<20))
}

// distGet fetches a URL and returns the status and body.
func distGet(t testing.TB, url string) (int, string) {
	t.Helper()
	resp, err := httpClient.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return readResponse(t, resp)
}

// sample measures the process's resources: a GC first (pprof's heap
// profile with gc=1), then goroutines from pprof, heap from /metrics and fds
// from /proc.
func (s *distServer) sample(t testing.TB) resources {
	t.Helper()
	if code, body := distGet(t, "http://"+s.debugAddr+"/debug/pprof/heap?gc=1"); code != http.StatusOK {
		t.Fatalf("GET /debug/pprof/heap: %d %.200s", code, body)
	}
	var r resources
	code, body := distGet(t, "http://"+s.debugAddr+"/debug/pprof/goroutine?debug=1")
	first, _, _ := strings.Cut(body, "\n")
	n, ok := strings.CutPrefix(first, "goroutine profile: total ")
	g, err := strconv.Atoi(strings.TrimSpace(n))
	if code != http.StatusOK || !ok || err != nil {
		t.Fatalf("GET /debug/pprof/goroutine?debug=1: %d, first line %q", code, first)
	}
	r.goroutines = g
	_, metrics := s.get(t, "/metrics")
	r.heapInuse, ok = metricValue(metrics, "go_memstats_heap_inuse_bytes")
	if !ok {
		t.Fatalf("/metrics has no go_memstats_heap_inuse_bytes")
	}
	r.fds = -1
	if runtime.GOOS == "linux" {
		fds, err := os.ReadDir("/proc/" + strconv.Itoa(s.cmd.Process.Pid) + "/fd")
		if err != nil {
			t.Fatalf("open fds of envoy-rls: %v", err)
		}
		r.fds = len(fds)
	}
	return r
}

// checkNoGrowth fails the test if after has more goroutines or fds than
// before beyond the margins.
func checkNoGrowth(t testing.TB, what string, before, after resources, goroutineMargin, fdMargin int) {
	t.Helper()
	if after.goroutines > before.goroutines+goroutineMargin {
		t.Errorf("%s: goroutines grew from %d to %d (margin %d)", what, before.goroutines, after.goroutines, goroutineMargin)
	}
	if before.fds >= 0 && after.fds > before.fds+fdMargin {
		t.Errorf("%s: open fds grew from %d to %d (margin %d)", what, before.fds, after.fds, fdMargin)
	}
}

// metricsOf returns the /metrics body of s.
func metricsOf(t testing.TB, s *server) string {
	t.Helper()
	code, body := s.get(t, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d", code)
	}
	return body
}

// decisions is rls_decisions_total of a rule and outcome, summed over
// servers.
func decisions(t testing.TB, servers []*server, domain, rule, outcome string) int {
	t.Helper()
	series := fmt.Sprintf(`rls_decisions_total{domain=%q,outcome=%q,rule=%q}`, domain, outcome, rule)
	total := 0
	for _, s := range servers {
		v, _ := metricValue(metricsOf(t, s), series)
		total += int(v)
	}
	return total
}
