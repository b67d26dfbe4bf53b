package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
)

// distN is the limit of every TestDistributedInstances case.
const distN = 30

// distConcurrency are the numbers of concurrent callers of each case.
var distConcurrency = []int{1, 16, 64}

// distAlgorithms are the limits of TestDistributedInstances, one per
// algorithm. Periods are long enough that nothing refills during a run:
// windows are a year (no boundary to cross), the log an hour, the token
// bucket a day (0.0003 tokens per second). The leaky bucket takes a turn a
// minute (N per 30 minutes) with a queue of N−1: the first request passes at
// once and the N−1 next wait their turn, 1 to 29 minutes, within the
// instances' -max-delay of an hour and the calls' deadline of an hour; the
// next one finds the queue full and is refused.
var distAlgorithms = []struct{ name, body string }{
	{"fixed_window", "algorithm: fixed_window, unit: year"},
	{"sliding_window", "algorithm: sliding_window, unit: year"},
	{"sliding_log", "algorithm: sliding_log, unit: hour"},
	{"token_bucket", "algorithm: token_bucket, unit: day"},
	{"leaky_bucket", fmt.Sprintf("algorithm: leaky_bucket, unit: minute, unit_multiplier: %d, burst: %d", distN, distN-1)},
}

// distInstancesConfig has a descriptor key and a named rule per (algorithm,
// concurrency) case, so that every case has its own counter in Redis and its
// own decision metrics, and a rate_limits pair per concurrency.
func distInstancesConfig() string {
	var b strings.Builder
	b.WriteString("domain: dist\ndescriptors:\n")
	for _, c := range distConcurrency {
		for _, a := range distAlgorithms {
			fmt.Fprintf(&b, "  - key: %s_%d\n    rate_limit: {name: %s-%d, %s, requests_per_unit: %d}\n", a.name, c, a.name, c, a.body, distN)
		}
		fmt.Fprintf(&b, "  - key: pair_%d\n    rate_limits:\n", c)
		fmt.Fprintf(&b, "      - {name: pair50-%d, unit: hour, requests_per_unit: 50}\n", c)
		fmt.Fprintf(&b, "      - {name: pair20-%d, unit: hour, requests_per_unit: 20}\n", c)
	}
	return b.String()
}

// TestDistributedInstances: three processes share one Redis and one limit.
// Concurrent callers send requests for one descriptor round-robin through
// the three; exactly the limit is allowed, for every algorithm and at every
// concurrency, because each charge is one atomic command on Redis, and
// every refused one is undone.
func TestDistributedInstances(t *testing.T) {
	t.Parallel()
	r := redistest.Start(t)
	config := writeConfig(t, distInstancesConfig())
	servers := make([]*server, 3)
	for i := range servers {
		// A store timeout far above any scheduling stall, and failure
		// mode error: a decision not made by Redis shows as an error, never
		// as an uncounted OK.
		servers[i] = startServer(t, config, "-redis-url", r.URL(), "-max-delay", "1h", "-store-timeout", "2s", "-failure-mode", "error")
	}
	var rr atomic.Uint64
	pick := func() *server { return servers[rr.Add(1)%uint64(len(servers))] }

	for _, c := range distConcurrency {
		// Each caller sends a few requests; together at least twice the
		// limit.
		perCaller := max(2, (2*distN+c-1)/c)
		for _, a := range distAlgorithms {
			name := fmt.Sprintf("%s-%d", a.name, c)
			key, value := fmt.Sprintf("%s_%d", a.name, c), "v-"+name
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				if a.name == "leaky_bucket" {
					runLeakyCase(t, servers, pick, name, key, value, c, perCaller)
					return
				}
				runExactCase(t, servers, pick, name, name, key, value, distN, c, perCaller)
			})
		}
		name := fmt.Sprintf("pair-%d", c)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// Allowed and refused requests alike report the 20/hour limit:
			// the one with the least remaining, or the one refusing.
			runExactCase(t, servers, pick, name, fmt.Sprintf("pair20-%d", c), fmt.Sprintf("pair_%d", c), "v-"+name, 20, c, perCaller)
		})
	}
}

// runExactCase sends callers × perCaller requests for key: value, closed
// loop, through the servers in turn, and checks that exactly n are allowed:
// in the answers, in the remaining they report (each of n−1 … 0 once: no
// two allowed requests saw the same count) and in the decision metrics of
// rule summed over the servers.
func runExactCase(t *testing.T, servers []*server, pick func() *server, name, rule, key, value string, n, callers, perCaller int) {
	var (
		mu        sync.Mutex
		allowed   int
		refused   int
		remaining []int
	)
	start := time.Now()
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range perCaller {
				resp, err := pick().shouldRateLimit(request("dist", desc(key, value)))
				if err != nil {
					t.Errorf("ShouldRateLimit: %v", err)
					return
				}
				st := resp.GetStatuses()[0]
				mu.Lock()
				switch resp.GetOverallCode() {
				case codeOK:
					allowed++
					remaining = append(remaining, int(st.GetLimitRemaining()))
				case codeOver:
					refused++
				default:
					t.Errorf("overall_code %v", resp.GetOverallCode())
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	total := callers * perCaller
	if allowed != n || refused != total-n {
		t.Errorf("%d callers × %d requests through 3 instances: allowed %d, refused %d; want exactly %d allowed, %d refused",
			callers, perCaller, allowed, refused, n, total-n)
	}
	slices.Sort(remaining)
	want := make([]int, n)
	for i := range want {
		want[i] = i
	}
	if !slices.Equal(remaining, want) {
		t.Errorf("limit_remaining of the allowed requests, sorted: got %v, want each of 0…%d once", remaining, n-1)
	}
	if ok, over := decisions(t, servers, "dist", rule, "ok"), decisions(t, servers, "dist", rule, "over_limit"); ok != n || over != total-n {
		t.Errorf("rls_decisions_total of rule %s over the 3 instances: ok %d, over_limit %d; want %d and %d", rule, ok, over, n, total-n)
	}
	checkEveryInstance(t, servers, rule)
	t.Logf("%s: %d callers × %d requests in %s: %d allowed, %d refused", name, callers, perCaller, took.Round(time.Millisecond), allowed, refused)
}

// leakyCall is one leaky bucket call: its answer arrives on done.
type leakyCall struct {
	cancel context.CancelFunc
	done   chan leakyAnswer
}

type leakyAnswer struct {
	resp *rlsv3.RateLimitResponse
	err  error
}

// runLeakyCase: a leaky bucket delays the answers of the requests it
// admits, 1 to 29 minutes here, and refuses the others at once. Each caller
// sends its requests in turn; a call without an answer after a short grace
// is left waiting its turn and the caller goes on. Exactly N must be
// admitted: counted in the decision metrics over the three instances, and
// seen as one immediate OK, N−1 calls still waiting and every other request
// refused.
func runLeakyCase(t *testing.T, servers []*server, pick func() *server, rule, key, value string, callers, perCaller int) {
	const grace = 20 * time.Millisecond
	var (
		mu      sync.Mutex
		calls   []*leakyCall
		wg      sync.WaitGroup
		started = time.Now()
		answers = map[*leakyCall]leakyAnswer{}
	)
	defer func() {
		// The waiting calls are admitted; free the servers of them.
		for _, c := range calls {
			c.cancel()
			if _, seen := answers[c]; !seen {
				<-c.done
			}
		}
	}()
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range perCaller {
				s := pick()
				ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
				c := &leakyCall{cancel: cancel, done: make(chan leakyAnswer, 1)}
				mu.Lock()
				calls = append(calls, c)
				mu.Unlock()
				go func() {
					resp, err := s.rls.ShouldRateLimit(ctx, request("dist", desc(key, value)))
					c.done <- leakyAnswer{resp, err}
				}()
				select {
				case a := <-c.done:
					c.done <- a // keep it for the count
				case <-time.After(grace):
				}
			}
		}()
	}
	wg.Wait()
	total := callers * perCaller
	n := distN

	// Every request is decided (and counted) before any wait.
	var ok, over int
	if !poll(10*time.Second, func() bool {
		ok, over = decisions(t, servers, "dist", rule, "ok"), decisions(t, servers, "dist", rule, "over_limit")
		return ok+over >= total
	}) {
		t.Fatalf("rls_decisions_total of rule %s: %d ok and %d over_limit after 10 s, want %d decisions", rule, ok, over, total)
	}
	if ok != n || over != total-n {
		t.Errorf("rls_decisions_total of rule %s over the 3 instances: ok %d, over_limit %d; want exactly %d admitted, %d refused", rule, ok, over, n, total-n)
	}

	checkEveryInstance(t, servers, rule)

	// The refusals and the first admission answer at once; the other
	// admissions wait a minute or more.
	collect := func() {
		for _, c := range calls {
			if _, seen := answers[c]; seen {
				continue
			}
			select {
			case a := <-c.done:
				answers[c] = a
			default:
			}
		}
	}
	poll(5*time.Second, func() bool {
		collect()
		return len(answers) >= total-(n-1)
	})
	time.Sleep(50 * time.Millisecond)
	collect()
	var gotOK, gotOver int
	for _, a := range answers {
		switch {
		case a.err != nil:
			t.Errorf("ShouldRateLimit: %v", a.err)
		case a.resp.GetOverallCode() == codeOK:
			gotOK++
		case a.resp.GetOverallCode() == codeOver:
			gotOver++
		}
	}
	waiting := total - len(answers)
	if gotOK != 1 || waiting != n-1 || gotOver != total-n {
		t.Errorf("answers: %d OK at once, %d waiting their turn, %d OVER_LIMIT; want 1, %d and %d", gotOK, waiting, gotOver, n-1, total-n)
	}
	// The queue is full: a peek through any instance is refused.
	resp := servers[0].decide(t, request("dist", withHits(desc(key, value), 0)))
	if resp.GetOverallCode() != codeOver {
		t.Errorf("peek after the run: got %v, want OVER_LIMIT (queue full)", resp)
	}
	t.Logf("%s: %d callers × %d requests in %s: %d admitted (1 at once, %d waiting), %d refused",
		rule, callers, perCaller, time.Since(started).Round(time.Millisecond), ok, waiting, over)
}

// checkEveryInstance checks that each server decided some of rule's
// requests: the traffic went through all three.
func checkEveryInstance(t *testing.T, servers []*server, rule string) {
	t.Helper()
	for i, s := range servers {
		one := []*server{s}
		if decisions(t, one, "dist", rule, "ok")+decisions(t, one, "dist", rule, "over_limit") == 0 {
			t.Errorf("instance %d decided none of rule %s's requests", i, rule)
		}
	}
}
