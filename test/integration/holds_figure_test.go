package integration

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
)

// holdsFigureConfig has one budget per way of charging it: after the
// response (count_refused, as a charge on stream done must be), and
// reserved then settled, by the request's id.
const holdsFigureConfig = `domain: llm
holds: {id: request_id, settle: settle, lease: 10m}
descriptors:
  - key: api_key
    value: after
    rate_limit: {unit: hour, requests_per_unit: 100000, algorithm: fixed_window, count_refused: true}
  - key: api_key
    value: honest
    rate_limit: {unit: hour, requests_per_unit: 100000, algorithm: fixed_window}
  - key: api_key
    value: half
    rate_limit: {unit: hour, requests_per_unit: 100000, algorithm: fixed_window}
  - key: api_key
    value: memory
    rate_limit: {unit: hour, requests_per_unit: 1000000000, algorithm: fixed_window}
`

// TestHoldsFigure is the run behind BENCHMARKS.md's "Holds: a budget under
// 1,000 concurrent requests" (the default suite skips it: set
// RLS_HOLDS_FIGURE=1). Three instances on one redis-server, a budget of
// 100,000 tokens; 1,000 callers each send requests of an actual cost
// drawn from 50–150 tokens that take 20 ms, until the budget refuses them
// five times in a row. After the response: the request path peeks and the
// actual cost is charged at stream done. Honest: the request path
// reserves 150 (an upper bound), the stream done settles. Half: it
// reserves half the actual cost. Then the Redis memory of 100,000 open
// holds.
func TestHoldsFigure(t *testing.T) {
	if os.Getenv("RLS_HOLDS_FIGURE") == "" {
		t.Skip("set RLS_HOLDS_FIGURE=1")
	}
	r := redistest.Start(t)
	config := writeConfig(t, holdsFigureConfig)
	servers := make([]*server, 3)
	for i := range servers {
		servers[i] = startServer(t, config, "-redis-url", r.URL(), "-store-timeout", "2s", "-failure-mode", "error")
	}
	const budget = 100000
	t.Logf("| charge | admitted | actual cost admitted | overshoot |")
	t.Logf("|---|---:|---:|---:|")
	for _, mode := range []string{"after", "honest", "half"} {
		admitted, spent := holdsLoad(t, servers, mode)
		over := max(0, spent-budget)
		t.Logf("| %s | %d | %d | %d (%.1f %%) |", mode, admitted, spent, over, 100*float64(over)/budget)
		if mode == "honest" && spent > budget {
			t.Errorf("honest estimates: the admitted requests cost %d, past the budget of %d", spent, budget)
		}
	}
	before := r.InfoInt(t, "memory", "used_memory")
	const holds = 100000
	var wg sync.WaitGroup
	var next atomic.Int64
	for c := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= holds; i = next.Add(1) {
				id := fmt.Sprintf("%08x-5d1c-4a7e-9f3b-%012x", i, i*7919)
				servers[c%3].decide(t, holdCall("memory", id, false, 100))
			}
		}()
	}
	wg.Wait()
	per := float64(r.InfoInt(t, "memory", "used_memory")-before) / holds
	t.Logf("Redis memory per open hold (36-byte id, 100,000 holds): %.0f bytes, %.1f M holds per GiB", per, (1<<30)/per/1e6)
}

// holdsLoad runs the figure's load on mode's budget and returns how many
// requests were admitted and their actual cost.
func holdsLoad(t *testing.T, servers []*server, mode string) (admitted, spent int64) {
	var wg sync.WaitGroup
	var ids, n, cost atomic.Int64
	for c := range 1000 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 11))
			s := servers[c%len(servers)]
			for refused := 0; refused < 5; {
				id := mode + strconv.FormatInt(ids.Add(1), 10)
				actual := int64(50 + rng.IntN(101))
				var req *rlsv3.RateLimitRequest
				switch mode {
				case "after":
					req = holdCall(mode, "", false, 0)
				case "honest":
					req = holdCall(mode, id, false, 150)
				default:
					req = holdCall(mode, id, false, uint64(actual/2))
				}
				if s.decide(t, req).GetOverallCode() != rlsv3.RateLimitResponse_OK {
					refused++
					time.Sleep(5 * time.Millisecond)
					continue
				}
				refused = 0
				n.Add(1)
				cost.Add(actual)
				time.Sleep(20 * time.Millisecond)
				settleID := id
				if mode == "after" {
					settleID = ""
				}
				s.decide(t, holdCall(mode, settleID, mode != "after", uint64(actual)))
			}
		}()
	}
	wg.Wait()
	return n.Load(), cost.Load()
}
