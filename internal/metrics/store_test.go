package metrics_test

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/envoy-rls/envoy-rls/internal/metrics"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/memory"
)

// scrape returns m's metrics in the text format, as /metrics serves them.
func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{ErrorHandling: promhttp.PanicOnError}).
		ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Result().Body)
	return string(b)
}

// wantLines checks that every line of want is a line of text.
func wantLines(t *testing.T, text string, want ...string) {
	t.Helper()
	lines := make(map[string]bool)
	for _, l := range strings.Split(text, "\n") {
		lines[l] = true
	}
	for _, w := range want {
		if !lines[w] {
			t.Errorf("scrape has no line %q", w)
		}
	}
}

func TestMemoryStoreCollector(t *testing.T) {
	var keys int
	var evictions, expired uint64
	m := metrics.New()
	// Registered beside the service's collectors: no name clashes.
	m.Registry.MustRegister(metrics.NewMemoryStoreCollector(func() (int, uint64, uint64) { return keys, evictions, expired }))

	for _, c := range []struct {
		keys               int
		evictions, expired uint64
	}{{0, 0, 0}, {3, 1, 2}, {100_000, 900_000, 12}} {
		keys, evictions, expired = c.keys, c.evictions, c.expired
		wantLines(t, scrape(t, m),
			"# TYPE rls_memory_store_keys gauge",
			fmt.Sprint("rls_memory_store_keys ", c.keys),
			"# TYPE rls_memory_store_evictions_total counter",
			fmt.Sprint("rls_memory_store_evictions_total ", c.evictions),
			"# TYPE rls_memory_store_expired_total counter",
			fmt.Sprint("rls_memory_store_expired_total ", c.expired),
		)
	}
}

// Over a real store, the collector reports its Stats.
func TestMemoryStoreCollectorOfAStore(t *testing.T) {
	now := int64(1_700_000_000_000_000)
	s := memory.New(memory.Options{MaxKeys: 4, SweepInterval: -1, Now: func() int64 { return now }})
	defer s.Close()
	m := metrics.New()
	m.Registry.MustRegister(metrics.NewMemoryStoreCollector(func() (int, uint64, uint64) {
		st := s.Stats()
		return st.Keys, st.Evictions, st.Expired
	}))
	second := limits.Limit{Algorithm: limits.FixedWindow, Requests: 1, Period: time.Second}
	hour := limits.Limit{Algorithm: limits.FixedWindow, Requests: 1, Period: time.Hour}
	decide := func(key string, l limits.Limit) {
		r := make([]limits.Result, 1)
		s.Decide(context.Background(), []limits.Hit{{Key: key, Limit: l, Cost: 1}}, r)
	}
	decide("short", second)
	for i := range 3 {
		decide(fmt.Sprint("a", i), hour)
	}
	now += time.Second.Microseconds()
	for i := range 3 { // the first takes the expired key's place, the others evict
		decide(fmt.Sprint("b", i), hour)
	}
	wantLines(t, scrape(t, m),
		"rls_memory_store_keys 4",
		"rls_memory_store_evictions_total 2",
		"rls_memory_store_expired_total 1",
	)
}

func TestOverLimitCacheCollector(t *testing.T) {
	var keys int
	var local uint64
	m := metrics.New()
	m.Registry.MustRegister(metrics.NewOverLimitCacheCollector(func() (int, uint64) { return keys, local }))
	for _, c := range []struct {
		keys  int
		local uint64
	}{{0, 0}, {7, 12_345}} {
		keys, local = c.keys, c.local
		wantLines(t, scrape(t, m),
			"# TYPE rls_over_limit_cache_keys gauge",
			fmt.Sprint("rls_over_limit_cache_keys ", c.keys),
			"# TYPE rls_over_limit_cache_answers_total counter",
			fmt.Sprint("rls_over_limit_cache_answers_total ", c.local),
		)
	}
}

func TestClusterMastersCollector(t *testing.T) {
	var total, down, fast int
	m := metrics.New()
	m.Registry.MustRegister(metrics.NewClusterMastersCollector(func() (int, int, int) { return total, down, fast }))
	for _, c := range [][3]int{{0, 0, 0}, {3, 1, 1}, {3, 0, 1}, {3, 0, 0}} {
		total, down, fast = c[0], c[1], c[2]
		wantLines(t, scrape(t, m),
			"# TYPE rls_store_masters gauge",
			fmt.Sprint("rls_store_masters ", total),
			"# TYPE rls_store_masters_unreachable gauge",
			fmt.Sprint("rls_store_masters_unreachable ", down),
			"# TYPE rls_store_masters_failing_fast gauge",
			fmt.Sprint("rls_store_masters_failing_fast ", fast),
		)
	}
}

func TestRedisPipelineRuns(t *testing.T) {
	m := metrics.New()
	for _, n := range []int{1, 3, 40} {
		m.RedisPipeline(n)
	}
	wantLines(t, scrape(t, m),
		"# TYPE rls_redis_pipeline_runs histogram",
		`rls_redis_pipeline_runs_bucket{le="1"} 1`,
		`rls_redis_pipeline_runs_bucket{le="4"} 2`,
		`rls_redis_pipeline_runs_bucket{le="64"} 3`,
		"rls_redis_pipeline_runs_sum 44",
		"rls_redis_pipeline_runs_count 3",
	)
}
