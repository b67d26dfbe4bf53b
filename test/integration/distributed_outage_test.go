package integration

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// outageLimits: `load` is what the closed-loop load asks for, a limit it
// never reaches; `k` is a small one whose counts show who decided.
const outageLimits = `domain: out
descriptors:
  - key: load
    rate_limit: {name: load, algorithm: fixed_window, unit: year, requests_per_unit: 100000000}
  - key: k
    rate_limit: {name: k, algorithm: fixed_window, unit: year, requests_per_unit: 5}
`

const (
	outageLoadN = 100000000
	outageN     = 5
	// outageCallers is the number of closed-loop callers of the load.
	outageCallers = 4
	// Once Redis is gone the goal is a few milliseconds per answer (the
	// breaker fails fast; the store timeout is 50 ms). The test machine may
	// be shared and busy (a scheduling stall delays a few answers of
	// any service), so the bounds are on the distribution: a service that
	// waits on the dead Redis moves the median and the p99, a hang shows
	// in the maximum (the calls' deadline is 5 s).
	medianBound = 20 * time.Millisecond
	answerBound = 100 * time.Millisecond // p99
	hangBound   = time.Second            // every answer
	// recoveryBound is how soon after Redis is back its decisions must
	// apply again; the breaker's probes back off to one every 550 ms.
	recoveryBound = 2 * time.Second
)

var (
	outageLimitK   = limit("k", outageN, unitYear)
	outageKeyLimit = limits.Limit{Algorithm: limits.FixedWindow, Requests: outageN, Period: distYear}
	outageModes    = []string{"allow", "deny", "error", "local"}
)

// outageLoad sends the load descriptor, one value per caller.
func outageLoad(caller, _ int) *rlsv3.RateLimitRequest {
	return request("out", desc("load", fmt.Sprintf("caller%d", caller)))
}

// failureAnswer reports whether a load answer is the failure mode's.
func failureAnswer(mode string, a distAnswer) bool {
	switch mode {
	case "allow":
		// Fail open reports the whole quota.
		return a.err == nil && a.code == codeOK && a.remaining == outageLoadN
	case "deny":
		return a.err == nil && a.code == codeOver
	case "error":
		return status.Code(a.err) == codes.Unavailable
	case "local":
		// The embedded store counts this instance's calls alone, from 0.
		return a.err == nil && a.code == codeOK && a.remaining < outageLoadN
	}
	panic(mode)
}

// checkDown checks that limit k answers by the failure mode, for a value
// never used before: allow is OK with the whole quota, deny OVER_LIMIT,
// error gRPC UNAVAILABLE, local exact on this instance's embedded store (N
// allowed, then OVER_LIMIT).
func checkDown(t *testing.T, s *server, mode, value string) {
	t.Helper()
	req := request("out", desc("k", value))
	for i := range outageN + 1 {
		start := time.Now()
		resp, err := s.shouldRateLimit(req)
		if d := time.Since(start); d > hangBound {
			t.Errorf("%s: call %d with Redis down took %s, want at most %s", mode, i+1, d, hangBound)
		}
		if mode == "error" {
			if status.Code(err) != codes.Unavailable {
				t.Errorf("error: call %d with Redis down: got %v, %v; want gRPC UNAVAILABLE", i+1, resp, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: call %d with Redis down: %v", mode, i+1, err)
		}
		switch mode {
		case "allow":
			checkResponse(t, resp, codeOK, want{codeOK, outageLimitK, outageN})
		case "deny":
			checkResponse(t, resp, codeOver, want{codeOver, outageLimitK, 0})
		case "local":
			if i < outageN {
				checkResponse(t, resp, codeOK, want{codeOK, outageLimitK, uint32(outageN - 1 - i)})
			} else {
				checkResponse(t, resp, codeOver, want{codeOver, outageLimitK, 0})
			}
		}
	}
}

// checkUnreachableMetrics: /healthz answers 200 and says the store is
// unreachable; /metrics soon shows rls_store_up 0 (the store is pinged every
// 2 s).
func checkUnreachableMetrics(t *testing.T, s *server) {
	t.Helper()
	if code, body := s.get(t, "/healthz"); code != http.StatusOK || !strings.Contains(body, "store: unreachable") {
		t.Errorf("GET /healthz with Redis down: got %d %q, want 200 saying %q", code, body, "store: unreachable")
	}
	if !poll(3*time.Second, func() bool { v, ok := s.metric(t, "rls_store_up"); return ok && v == 0 }) {
		v, ok := s.metric(t, "rls_store_up")
		t.Errorf("rls_store_up with Redis down: got %v (present %t) after 3 s, want 0", v, ok)
	}
}

// TestDistributedOutage: Redis dies under a closed-loop load and comes back.
// Every answer keeps arriving promptly, by the failure mode while Redis is
// down; Redis decides again within 2 s of its return; nothing leaks. And a
// service whose Redis is absent from the start serves by its failure mode.
func TestDistributedOutage(t *testing.T) {
	t.Parallel()
	config := writeConfig(t, outageLimits)
	// One mode at a time: latencies measured under a load of their own.
	for _, mode := range outageModes {
		t.Run("killed/"+mode, func(t *testing.T) {
			testOutage(t, config, mode)
		})
	}
	for _, mode := range outageModes {
		t.Run("absent/"+mode, func(t *testing.T) {
			s := startServer(t, config, "-redis-url", "redis://"+freeAddr(t), "-failure-mode", mode)
			checkUnreachableMetrics(t, s)
			checkDown(t, s, mode, "absent")
			l := startDistLoad(s, outageCallers, outageLoad)
			time.Sleep(300 * time.Millisecond)
			answers := l.stop()
			for _, a := range answers {
				if !failureAnswer(mode, a) {
					t.Errorf("load answer with Redis absent: %s; want failure mode %s", a, mode)
					break
				}
			}
			st := latencies(answers)
			if st.n < outageCallers {
				t.Errorf("load with Redis absent: %s; want answers", st)
			}
			checkPrompt(t, "load with Redis absent", st)
			t.Logf("Redis absent, failure mode %s: load %s", mode, st)
		})
	}
}

func testOutage(t *testing.T, config, mode string) {
	r := redistest.Start(t)
	s := startDistServer(t, config, "-redis-url", r.URL(), "-failure-mode", mode)

	// Warm up: connections to Redis, to the HTTP and pprof endpoints.
	l := startDistLoad(s.server, outageCallers, outageLoad)
	time.Sleep(300 * time.Millisecond)
	l.stop()
	s.sample(t)
	before := s.sample(t)

	l = startDistLoad(s.server, outageCallers, outageLoad)
	time.Sleep(200 * time.Millisecond)
	killing := time.Now()
	r.Stop()
	killed := time.Now()

	// The breaker opens after three failed calls spanning a store
	// timeout: the load makes them within a few tens of milliseconds.
	var opened time.Time
	if poll(2*time.Second, func() bool {
		v, _ := s.metric(t, "rls_store_circuit_open")
		opened = time.Now()
		return v == 1
	}) {
		t.Logf("%s: rls_store_circuit_open 1 within %s of the kill", mode, opened.Sub(killed).Round(time.Millisecond))
	} else {
		t.Errorf("rls_store_circuit_open: not 1 within 2 s of the kill")
		opened = killed
	}
	checkDown(t, s.server, mode, "down")
	checkUnreachableMetrics(t, s.server)
	if time.Since(killed) < time.Second {
		time.Sleep(time.Second - time.Since(killed))
	}
	if v, _ := s.metric(t, "rls_store_circuit_open"); v != 1 {
		t.Errorf("rls_store_circuit_open while Redis is down: got %v, want 1", v)
	}

	// Redis is back (empty, as after a crash of a Redis without
	// persistence): Redis decides again, which a fresh value's count in
	// Redis shows.
	restarting := time.Now()
	r.Restart()
	restarted := time.Now()
	var recovered time.Time
	probes := 0
	if !poll(recoveryBound, func() bool {
		probes++
		v := fmt.Sprintf("back%d", probes)
		resp, err := s.shouldRateLimit(request("out", desc("k", v)))
		recovered = time.Now()
		if err != nil || resp.GetOverallCode() != codeOK || resp.GetStatuses()[0].GetLimitRemaining() != outageN-1 {
			return false // the failure mode's answer
		}
		got, err := distCount(r.Do("GET", distCounter(distKey("out", "k", v, outageKeyLimit), outageKeyLimit)))
		return err == nil && got == "1"
	}) {
		t.Fatalf("%s: Redis not deciding within %s of its restart (%d probes); stderr:\n%s", mode, recoveryBound, probes, s.stderr.String())
	}
	if !poll(time.Second, func() bool { v, _ := s.metric(t, "rls_store_circuit_open"); return v == 0 }) {
		t.Errorf("rls_store_circuit_open after recovery: not 0")
	}
	// A fresh value counts exactly, in Redis.
	for i := range outageN {
		checkResponse(t, s.decide(t, request("out", desc("k", "exact"))), codeOK, want{codeOK, outageLimitK, uint32(outageN - 1 - i)})
	}
	checkResponse(t, s.decide(t, request("out", desc("k", "exact"))), codeOver, want{codeOver, outageLimitK, 0})
	// The refused hit's charge is undone after its answer, within a round
	// trip: the count settles at the limit.
	var got string
	var err error
	if !poll(time.Second, func() bool {
		got, err = distCount(r.Do("GET", distCounter(distKey("out", "k", "exact", outageKeyLimit), outageKeyLimit)))
		return err == nil && got == strconv.Itoa(outageN)
	}) {
		t.Errorf("GET of the exact key in Redis: %q, %v; want the count %d", got, err, outageN)
	}
	time.Sleep(300 * time.Millisecond)
	answers := l.stop()

	var down, afterKill, afterOpen, afterRecovery []distAnswer
	var beforeFailed, afterFailed int
	perCaller := make([]int, outageCallers)
	for _, a := range answers {
		end := a.start.Add(a.latency)
		switch {
		case end.Before(killing):
			// Before the kill: Redis decided, or (on a machine too busy for
			// the 50 ms store timeout) the failure mode.
			if mode != "local" && failureAnswer(mode, a) {
				beforeFailed++
			}
			continue
		case a.start.Before(killed):
			continue // under way when Redis died: either is right
		}
		afterKill = append(afterKill, a)
		if !a.start.Before(opened) {
			afterOpen = append(afterOpen, a)
		}
		switch {
		case end.Before(restarting):
			down = append(down, a)
			perCaller[a.caller]++
			if !failureAnswer(mode, a) {
				t.Errorf("load answer with Redis down: %s; want failure mode %s", a, mode)
			}
		case a.start.After(recovered):
			afterRecovery = append(afterRecovery, a)
			if mode != "local" && failureAnswer(mode, a) {
				afterFailed++
			}
		}
	}
	for c, n := range perCaller {
		if n < 3 {
			t.Errorf("caller %d: %d answers while Redis was down, want them to keep arriving", c, n)
		}
	}
	// Redis decides the load again (a busy machine may still time out a
	// few calls).
	if len(afterRecovery) == 0 || afterFailed > len(afterRecovery)/10 {
		t.Errorf("%s: %d of %d load answers after recovery by the failure mode, want Redis to decide", mode, afterFailed, len(afterRecovery))
	}
	stAll, stOpen := latencies(afterKill), latencies(afterOpen)
	checkPrompt(t, mode+": load after the kill", stAll)
	if s.exited() {
		t.Fatalf("envoy-rls exited during the outage; stderr:\n%s", s.stderr.String())
	}

	time.Sleep(100 * time.Millisecond)
	after := s.sample(t)
	checkNoGrowth(t, mode, before, after, 5, 4)
	t.Logf("%s: load after the kill: %s", mode, stAll)
	t.Logf("%s: load once the breaker was open: %s", mode, stOpen)
	t.Logf("%s: %d answers while down, %d after recovery (%d of them by the failure mode; %d before the kill); Redis deciding %s after Restart returned (%s after it began; %d probes)",
		mode, len(down), len(afterRecovery), afterFailed, beforeFailed, recovered.Sub(restarted).Round(time.Millisecond), recovered.Sub(restarting).Round(time.Millisecond), probes)
	t.Logf("%s: before the outage: %s; after recovery: %s", mode, before, after)
}

// checkPrompt checks the latencies of answers given without Redis.
func checkPrompt(t *testing.T, what string, st latencyStats) {
	t.Helper()
	if st.p50 > medianBound || st.p99 > answerBound || st.max > hangBound {
		t.Errorf("%s: %s; want the median within %s, the p99 within %s, every answer within %s",
			what, st, medianBound, answerBound, hangBound)
	}
}
