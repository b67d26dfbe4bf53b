package integration

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
)

const distConcurrencyConfig = `domain: conc
descriptors:
  - key: inflight
    rate_limit: {algorithm: concurrency, requests_per_unit: 5, lease: 1m}
  - key: leak
    rate_limit: {algorithm: concurrency, requests_per_unit: 3, lease: 2s}
`

// slotRequest is an acquire (release false) or a release of one slot of
// key, as Envoy sends them: a plain hit on the request, a negative hit
// (is_negative_hits) on stream done.
func slotRequest(key string, release bool) *rlsv3.RateLimitRequest {
	d := &ratelimitv3.RateLimitDescriptor{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: key, Value: "v"}}}
	if release {
		d.HitsAddend, d.IsNegativeHits = wrapperspb.UInt64(1), true
	}
	return &rlsv3.RateLimitRequest{Domain: "conc", Descriptors: []*ratelimitv3.RateLimitDescriptor{d}}
}

// TestDistributedConcurrency: three processes share one Redis and one
// concurrency limit of 5 slots. Many callers take a slot through one
// instance, hold it a moment and give it back through another: never more
// than 5 hold one at once, the slots given back are taken again, and none
// is left held. A limit whose slots are never given back frees them after
// its lease.
func TestDistributedConcurrency(t *testing.T) {
	t.Parallel()
	r := redistest.Start(t)
	config := writeConfig(t, distConcurrencyConfig)
	servers := make([]*server, 3)
	for i := range servers {
		servers[i] = startServer(t, config, "-redis-url", r.URL(), "-store-timeout", "2s", "-failure-mode", "error")
	}
	var rr atomic.Uint64
	pick := func() *server { return servers[rr.Add(1)%uint64(len(servers))] }
	ok := func(req *rlsv3.RateLimitRequest) bool {
		resp, err := pick().shouldRateLimit(req)
		if err != nil {
			t.Errorf("ShouldRateLimit: %v", err)
			return false
		}
		return resp.GetOverallCode() == rlsv3.RateLimitResponse_OK
	}

	const slots, callers, rounds = 5, 24, 8
	var holding, most, taken atomic.Int64
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				if !ok(slotRequest("inflight", false)) {
					time.Sleep(time.Millisecond)
					continue
				}
				taken.Add(1)
				h := holding.Add(1)
				for m := most.Load(); h > m && !most.CompareAndSwap(m, h); m = most.Load() {
				}
				time.Sleep(2 * time.Millisecond)
				holding.Add(-1)
				if !ok(slotRequest("inflight", true)) {
					t.Errorf("a release was refused")
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d acquires allowed, at most %d of %d slots held at once", taken.Load(), most.Load(), slots)
	if m := most.Load(); m > slots {
		t.Fatalf("%d callers held a slot at once, above the %d slots", m, slots)
	}
	if n := taken.Load(); n <= slots {
		t.Fatalf("%d acquires allowed: released slots were not taken again", n)
	}
	// Every slot was given back: all 5 are free, and a sixth is refused.
	for i := range slots {
		if !ok(slotRequest("inflight", false)) {
			t.Fatalf("acquire %d after every release: refused, want all %d slots free", i+1, slots)
		}
	}
	if ok(slotRequest("inflight", false)) {
		t.Fatalf("a sixth acquire: allowed, want refused")
	}

	// Leaked slots: taken, never given back, free after the 2 s lease.
	for i := range 3 {
		if !ok(slotRequest("leak", false)) {
			t.Fatalf("leak acquire %d: refused", i+1)
		}
	}
	start := time.Now()
	if ok(slotRequest("leak", false)) {
		t.Fatalf("a fourth leak acquire: allowed, want refused")
	}
	deadline := start.Add(10 * time.Second)
	for !ok(slotRequest("leak", false)) {
		if time.Now().After(deadline) {
			t.Fatalf("leaked slots still held %s after the 2 s lease", time.Since(start))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if waited := time.Since(start); waited < 1500*time.Millisecond {
		t.Fatalf("a leaked slot freed after %s, before its 2 s lease", waited)
	}
}
