package integration

import (
	"fmt"
	"os"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
)

// soakLimits: every algorithm and a rate_limits pair, with short periods so
// that keys keep being refused, refilled and expired.
const soakLimits = `domain: soak
descriptors:
  - key: fw
    rate_limit: {name: fw, algorithm: fixed_window, unit: second, requests_per_unit: 20}
  - key: sw
    rate_limit: {name: sw, algorithm: sliding_window, unit: second, unit_multiplier: 10, requests_per_unit: 50}
  - key: sl
    rate_limit: {name: sl, algorithm: sliding_log, unit: second, requests_per_unit: 10}
  - key: tb
    rate_limit: {name: tb, algorithm: token_bucket, unit: second, requests_per_unit: 10, burst: 20}
  - key: lb
    rate_limit: {name: lb, algorithm: leaky_bucket, unit: second, requests_per_unit: 100}
  - key: pair
    rate_limits:
      - {name: pair-s, algorithm: token_bucket, unit: second, requests_per_unit: 5}
      - {name: pair-m, unit: minute, requests_per_unit: 100}
`

var soakKeys = []string{"fw", "sw", "sl", "tb", "lb", "pair"}

// The distinct descriptor values: a few hot ones that meet their limits,
// and a bounded set of cold ones whose keys come and go. The service's
// state must not grow with the number of requests.
const (
	soakHot  = 10
	soakCold = 500
)

// TestDistributedSoak runs a closed-loop load through the binary on Redis
// for $RLS_SOAK (scripts/soak.sh sets it; the default suite skips it) and
// fails if the process's heap, goroutines or open fds grew from the start
// of the run (after a warm-up) to its end beyond a margin.
func TestDistributedSoak(t *testing.T) {
	env := os.Getenv("RLS_SOAK")
	if env == "" {
		t.Skip("set RLS_SOAK (e.g. 60s), or run scripts/soak.sh")
	}
	d, err := time.ParseDuration(env)
	if err != nil || d <= 0 {
		t.Fatalf("RLS_SOAK=%q: want a positive duration such as 60s", env)
	}
	const callers = 8
	r := redistest.Start(t)
	s := startDistServer(t, writeConfig(t, soakLimits), "-redis-url", r.URL())
	next := func(c, i int) *rlsv3.RateLimitRequest {
		k := soakKeys[(c+i)%len(soakKeys)]
		if i%4 == 0 {
			return request("soak", desc(k, fmt.Sprintf("cold%d", (c*7919+i*31)%soakCold)))
		}
		return request("soak", desc(k, fmt.Sprintf("hot%d", (c+i)%soakHot)))
	}

	warm := min(10*time.Second, max(2*time.Second, d/10))
	// Both ends are measured with the load paused, so that calls in flight
	// do not count.
	l := startDistLoad(s.server, callers, next)
	time.Sleep(warm)
	l.stop()
	time.Sleep(500 * time.Millisecond)
	start := s.sample(t)
	t.Logf("after %s of warm-up: %s", warm, start)
	l = startDistLoad(s.server, callers, next)
	began, answered := time.Now(), 0
	every := max(5*time.Second, d/6)
	for elapsed := time.Duration(0); elapsed < d; {
		step := min(every, d-elapsed)
		time.Sleep(step)
		elapsed += step
		if elapsed < d {
			t.Logf("at %s: %s; %d answers", elapsed.Round(time.Second), s.sample(t), l.count()-answered)
		}
	}
	answers := l.stop()
	took := time.Since(began)
	time.Sleep(500 * time.Millisecond)
	end := s.sample(t)

	var ok, over, failed int
	for _, a := range answers[answered:] {
		switch {
		case a.err != nil:
			failed++
		case a.code == codeOK:
			ok++
		default:
			over++
		}
	}
	n := len(answers) - answered
	t.Logf("%d callers for %s: %d answers (%.0f/s): %d OK, %d OVER_LIMIT, %d errors; latency %s",
		callers, took.Round(time.Second), n, float64(n)/took.Seconds(), ok, over, failed, latencies(answers[answered:]))
	t.Logf("start: %s", start)
	t.Logf("end:   %s", end)
	t.Logf("growth: goroutines %+d, open fds %+d, heap in use %+.2f MiB",
		end.goroutines-start.goroutines, end.fds-start.fds, (end.heapInuse-start.heapInuse)/(1<<20))

	if failed > 0 {
		t.Errorf("%d calls failed", failed)
	}
	if ok == 0 || over == 0 {
		t.Errorf("%d OK and %d OVER_LIMIT: the load should meet its limits", ok, over)
	}
	checkNoGrowth(t, "soak", start, end, 10, 10)
	// The heap after a GC: the live state of a bounded set of descriptors,
	// plus noise.
	if limit := start.heapInuse*1.5 + 8<<20; end.heapInuse > limit {
		t.Errorf("heap in use grew from %.1f MiB to %.1f MiB (limit %.1f MiB)", start.heapInuse/(1<<20), end.heapInuse/(1<<20), limit/(1<<20))
	}
	if s.exited() {
		t.Fatalf("envoy-rls exited; stderr:\n%s", s.stderr.String())
	}
}
