package integration

import (
	"strconv"
	"testing"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
)

// TestOverLimitCacheMetrics: refusals after the first one Redis gave are
// answered by the over-limit cache, and /metrics counts them; with the
// cache off the series are absent.
func TestOverLimitCacheMetrics(t *testing.T) {
	t.Parallel()
	r := redistest.Start(t)
	for _, on := range []bool{true, false} {
		s := startServer(t, writeConfig(t, smallLimits), "-redis-url", r.URL(),
			"-redis-key-prefix", "cache-"+strconv.FormatBool(on)+":",
			"-over-limit-cache="+strconv.FormatBool(on))
		for i := range 6 {
			want := codeOK
			if i >= 2 {
				want = codeOver
			}
			if got := s.decide(t, request("small", desc("user", "hot"))).GetOverallCode(); got != want {
				t.Fatalf("cache %v, call %d: got %v, want %v", on, i, got, want)
			}
		}
		local, okLocal := s.metric(t, "rls_over_limit_cache_answers_total")
		keys, okKeys := s.metric(t, "rls_over_limit_cache_keys")
		switch {
		case on && (local != 3 || keys != 1):
			// Call 2 is Redis's refusal, which the cache remembers; 3–5 are local.
			t.Errorf("cache on: answers_total %v (%v), keys %v (%v); want 3 and 1", local, okLocal, keys, okKeys)
		case !on && (okLocal || okKeys):
			t.Errorf("cache off: the cache's series are served (answers_total %v, keys %v)", local, keys)
		}
	}
}
