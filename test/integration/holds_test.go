package integration

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// holdsConfig is an AI gateway's domain: a token budget per api key, a
// concurrency limit per key, both reserved when a request starts and
// settled when it ends, by the request's id.
const holdsConfig = `domain: llm
holds: {id: request_id, settle: settle, lease: 2s}
descriptors:
  - key: api_key
    value: budget
    rate_limit: {unit: hour, requests_per_unit: 1000, algorithm: fixed_window}
  - key: api_key
    value: slots
    rate_limit: {algorithm: concurrency, requests_per_unit: 10, lease: 1m}
  - key: api_key
    value: lapse
    rate_limit: {unit: hour, requests_per_unit: 100, algorithm: fixed_window}
`

// holdCall is one call of the domain: a reserve (settle false) or a
// settle of id, of cost hits, on api key key. An empty id sends no id: a
// plain hit, or a peek with hits 0.
func holdCall(key, id string, settle bool, hits uint64) *rlsv3.RateLimitRequest {
	entries := []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "api_key", Value: key}}
	if id != "" {
		entries = append(entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: "request_id", Value: id})
	}
	if settle {
		entries = append(entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: "settle", Value: "true"})
	}
	d := &ratelimitv3.RateLimitDescriptor{Entries: entries, HitsAddend: wrapperspb.UInt64(hits)}
	return &rlsv3.RateLimitRequest{Domain: "llm", Descriptors: []*ratelimitv3.RateLimitDescriptor{d}}
}

// holdServers starts the service for st: three instances on one Redis,
// one on the embedded store.
func holdServers(t *testing.T, st store) []*server {
	config := writeConfig(t, holdsConfig)
	n := 1
	flags := st.flags(t)
	if st.name == "redis" {
		n = 3
	}
	servers := make([]*server, n)
	for i := range servers {
		servers[i] = startServer(t, config, append(flags, "-store-timeout", "2s", "-failure-mode", "error")...)
	}
	return servers
}

// remaining is what a peek through s reads of key's limit.
func remaining(t *testing.T, s *server, key string) uint32 {
	t.Helper()
	resp := s.decide(t, holdCall(key, "", false, 0))
	return resp.GetStatuses()[0].GetLimitRemaining()
}

// TestHoldsBudget: callers on every instance reserve an estimate that is
// an upper bound of their actual cost and settle with the actual cost.
// The costs of the admitted requests never add up past the budget (the
// overshoot of a charge made after the response is N × the cost), and once
// every request has settled and the refused reserves' undos have landed,
// the budget is charged with exactly the sum of the actual costs.
func TestHoldsBudget(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store) {
		servers := holdServers(t, st)
		var next atomic.Uint64
		pick := func() *server { return servers[next.Add(1)%uint64(len(servers))] }
		const budget, estimate, callers = 1000, 40, 24
		var spent, inFlight, most atomic.Int64
		var ids atomic.Int64
		var wg sync.WaitGroup
		for c := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(c), 7))
				refused := 0
				for {
					id := fmt.Sprintf("r%d", ids.Add(1))
					resp, err := pick().shouldRateLimit(holdCall("budget", id, false, estimate))
					if err != nil {
						t.Errorf("reserve %s: %v", id, err)
						return
					}
					if resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
						// Refused while others hold their estimates: try
						// again a few times, then stop.
						if refused++; refused > 20 {
							return
						}
						time.Sleep(2 * time.Millisecond)
						continue
					}
					actual := int64(10 + rng.IntN(estimate-9))
					h := inFlight.Add(estimate) + spent.Load()
					for m := most.Load(); h > m && !most.CompareAndSwap(m, h); m = most.Load() {
					}
					time.Sleep(time.Millisecond)
					spent.Add(actual)
					inFlight.Add(-estimate)
					if _, err := pick().shouldRateLimit(holdCall("budget", id, true, uint64(actual))); err != nil {
						t.Errorf("settle %s: %v", id, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		t.Logf("spent %d of %d, at most %d spent or held at once", spent.Load(), budget, most.Load())
		if s := spent.Load(); s > budget {
			t.Fatalf("the admitted requests cost %d, past the budget of %d", s, budget)
		}
		if s := spent.Load(); s < budget/2 {
			t.Fatalf("the admitted requests cost %d of a budget of %d: reserves refused far from it", s, budget)
		}
		// The undos of the last refused reserves go after their answers
		// (docs/semantics.md, "The transient of charge-then-undo"): a peek
		// may still count one for a moment (on a loaded machine, for
		// longer), never read more than is left.
		want := budget - spent.Load()
		var got int64
		if !poll(10*time.Second, func() bool {
			if got = int64(remaining(t, servers[0], "budget")); got > want {
				t.Fatalf("remaining after every settle: %d, more than budget − actual costs = %d", got, want)
			}
			return got == want
		}) {
			t.Fatalf("remaining 10 s after every settle: %d, want budget − actual costs = %d", got, want)
		}
	})
}

// TestHoldsRetryAndPlainSettle: a reserve Envoy sends again is answered
// as the first and charges nothing more; a settle that finds no hold is a
// plain charge of its cost, as today's charge after the response.
func TestHoldsRetryAndPlainSettle(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store) {
		servers := holdServers(t, st)
		s0, s1 := servers[0], servers[len(servers)-1]
		for _, s := range []*server{s0, s1} {
			if code := s.decide(t, holdCall("lapse", "same", false, 30)).GetOverallCode(); code != rlsv3.RateLimitResponse_OK {
				t.Fatalf("reserve of id same: %v, want OK (a repeat answers as the first)", code)
			}
		}
		if got := remaining(t, s0, "lapse"); got != 70 {
			t.Fatalf("remaining after a reserve sent twice: %d, want 70", got)
		}
		s1.decide(t, holdCall("lapse", "never-reserved", true, 5))
		if got := remaining(t, s0, "lapse"); got != 65 {
			t.Fatalf("remaining after a settle with no hold: %d, want 65 (a plain charge)", got)
		}
		// The hold of id same lapses after its 2 s lease: its 30 come back.
		deadline := time.Now().Add(10 * time.Second)
		for remaining(t, s1, "lapse") != 95 {
			if time.Now().After(deadline) {
				t.Fatalf("remaining %d 10 s after a 2 s lease, want 95", remaining(t, s1, "lapse"))
			}
			time.Sleep(100 * time.Millisecond)
		}
		// A settle after the lapse is a plain charge of the actual cost.
		s0.decide(t, holdCall("lapse", "same", true, 20))
		if got := remaining(t, s1, "lapse"); got != 75 {
			t.Fatalf("remaining after a settle of a lapsed hold: %d, want 75", got)
		}
	})
}

// TestHoldsConcurrencyByID is the regression of the release that named no
// slot: the releases Envoy sends for refused requests freed slots that
// running requests held. With holds, a settle frees exactly its own id's
// slots, and a refused reserve holds none to free.
func TestHoldsConcurrencyByID(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store) {
		servers := holdServers(t, st)
		at := func(i int) *server { return servers[i%len(servers)] }
		code := func(i int, req *rlsv3.RateLimitRequest) rlsv3.RateLimitResponse_Code {
			return at(i).decide(t, req).GetOverallCode()
		}
		for i := range 10 {
			if c := code(i, holdCall("slots", fmt.Sprintf("run%d", i), false, 1)); c != rlsv3.RateLimitResponse_OK {
				t.Fatalf("reserve %d of 10 slots: %v", i, c)
			}
		}
		for i := range 30 {
			if c := code(i, holdCall("slots", fmt.Sprintf("burst%d", i), false, 1)); c != rlsv3.RateLimitResponse_OVER_LIMIT {
				t.Fatalf("reserve %d of the burst past 10 slots: %v, want OVER_LIMIT", i, c)
			}
		}
		for i := range 30 {
			code(i+1, holdCall("slots", fmt.Sprintf("burst%d", i), true, 1))
		}
		if c := code(0, holdCall("slots", "late", false, 1)); c != rlsv3.RateLimitResponse_OVER_LIMIT {
			t.Fatalf("a reserve after the refused requests' settles: %v, want OVER_LIMIT (10 still run)", c)
		}
		code(2, holdCall("slots", "run3", true, 1))
		if c := code(1, holdCall("slots", "late", false, 1)); c != rlsv3.RateLimitResponse_OK {
			t.Fatalf("a reserve after run3 settled: %v, want OK", c)
		}
		if c := code(2, holdCall("slots", "later", false, 1)); c != rlsv3.RateLimitResponse_OVER_LIMIT {
			t.Fatalf("a second reserve after one settle: %v, want OVER_LIMIT", c)
		}
	})
}

// TestHoldsBadInput: an id past the bound is a bad request, answered
// InvalidArgument by every instance, and charges nothing.
func TestHoldsBadInput(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store) {
		servers := holdServers(t, st)
		long := make([]byte, 300)
		for i := range long {
			long[i] = 'x'
		}
		_, err := servers[0].shouldRateLimit(holdCall("lapse", string(long), false, 10))
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("a 300-byte id: %v, want InvalidArgument", err)
		}
		if got := remaining(t, servers[0], "lapse"); got != 100 {
			t.Fatalf("remaining after a refused bad request: %d, want 100", got)
		}
	})
}
