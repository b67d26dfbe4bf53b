package metrics

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// envoyGatewayMapper is the built-in mapper as Envoy Gateway ships it (its
// statsd_conf.yaml): the same families, the response time left in
// milliseconds, and the deprecated timer_type its file uses, which a
// statsd_exporter library that refuses it would not load.
var envoyGatewayMapper = strings.Replace(strings.ReplaceAll(DefaultRatelimitMapper, "observer_type:", "timer_type:"), "    scale: 0.001\n", "", 1)

func enabled(t testing.TB, o RatelimitOptions) *Metrics {
	t.Helper()
	m := New()
	if err := m.EnableRatelimit(o); err != nil {
		t.Fatal(err)
	}
	return m
}

// walk matches entries in a small config, as the service does.
func walk(t testing.TB, entries ...descriptors.Entry) *RatelimitHit {
	t.Helper()
	d, err := config.Parse("limits.yaml", []byte(`domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: plan
    value: free
    descriptors:
      - key: api_key
        descriptors:
          - key: path
            rate_limit: {unit: second, requests_per_unit: 10}
          - key: method
            rate_limit: {unit: second, requests_per_unit: 10}
  - key: client
    detailed_metric: true
    rate_limit: {unit: second, requests_per_unit: 10}
`))
	if err != nil {
		t.Fatal(err)
	}
	ix := descriptors.NewIndex(&config.Config{Domains: map[string]*config.Domain{d.Name: d}})
	n, _, path := ix.Match("edge", entries, nil)
	if n == nil {
		t.Fatalf("%v matches nothing", entries)
	}
	return &RatelimitHit{Domain: "edge", Entries: entries, Path: path, Node: n}
}

func within(h *RatelimitHit, hits, before uint64) *RatelimitHit {
	h.Hits, h.Decided, h.Limit, h.Before, h.After = hits, true, 10, before, before+hits
	return h
}

// hit records a decision whose part in envoyproxy/ratelimit's stats is h.
func hit(m *Metrics, h *RatelimitHit) {
	m.Decided(&Decision{Domain: "edge", Rule: "r", Outcome: OutcomeOK, Stats: true, Hit: *h})
}

func compare(t *testing.T, m *Metrics, want string, names ...string) {
	t.Helper()
	if err := testutil.GatherAndCompare(m.RatelimitGatherer(), strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
}

func TestRatelimitSplit(t *testing.T) {
	r, err := newRatelimitStats(RatelimitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name         string
		before, hits uint64
		over, shadow bool
		want         hitCounts
	}{
		{"far from the limit", 0, 1, false, false, hitCounts{within: 1}},
		{"at the threshold", 7, 1, false, false, hitCounts{within: 1}},
		{"past the threshold", 8, 1, false, false, hitCounts{within: 1, near: 1}},
		{"crossing the threshold", 6, 3, false, false, hitCounts{within: 3, near: 1}},
		{"up to the limit", 9, 1, false, false, hitCounts{within: 1, near: 1}},
		{"at the limit already", 10, 1, true, false, hitCounts{over: 1}},
		{"crossing the limit", 9, 3, true, false, hitCounts{over: 2, near: 1}},
		{"crossing both", 5, 10, true, false, hitCounts{over: 5, near: 2}},
		{"shadow counts the over part", 5, 10, true, true, hitCounts{over: 5, near: 2, shadow: 5}},
		{"shadow at the limit already", 12, 2, true, true, hitCounts{over: 2, shadow: 2}},
		{"a peek", 3, 0, false, false, hitCounts{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &RatelimitHit{Hits: tt.hits, Decided: true, Limit: 10, Before: tt.before, After: tt.before + tt.hits, Over: tt.over, Shadow: tt.shadow}
			if got := r.split(h); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
	// A refusal of the local over-limit cache: every hit over, none near.
	if got, want := r.split(&RatelimitHit{Hits: 2, Decided: true, Limit: 10, Before: 5, After: 7, Over: true, Local: true, Shadow: true}),
		(hitCounts{over: 2, shadow: 2, local: 2}); got != want {
		t.Errorf("a local refusal: got %+v, want %+v", got, want)
	}
	// float32, as envoyproxy/ratelimit multiplies: 0.7 of 10 is 7, not 6.
	r.nearRatio = 0.7
	if got := r.split(&RatelimitHit{Hits: 1, Decided: true, Limit: 10, Before: 7, After: 8}); got.near != 1 {
		t.Errorf("0.7 of 10: near %d, want 1", got.near)
	}
}

// TestRatelimitFamilies: the built-in mapper makes envoyproxy/ratelimit's
// families, labelled by domain and the first two levels of the stat key,
// and serves a counter only once it has counted something.
func TestRatelimitFamilies(t *testing.T) {
	m := enabled(t, RatelimitOptions{})
	hit(m, within(walk(t, descriptors.Entry{Key: "remote_address", Value: "10.0.0.1"}), 1, 0))
	hit(m, within(walk(t, descriptors.Entry{Key: "remote_address", Value: "10.0.0.2"}), 1, 8))
	// Two stat keys that differ past key2 are one series, as in the exporter.
	hit(m, within(walk(t, descriptors.Entry{Key: "plan", Value: "free"}, descriptors.Entry{Key: "api_key", Value: "k"},
		descriptors.Entry{Key: "path", Value: "/"}), 2, 0))
	hit(m, within(walk(t, descriptors.Entry{Key: "plan", Value: "free"}, descriptors.Entry{Key: "api_key", Value: "k"},
		descriptors.Entry{Key: "method", Value: "GET"}), 3, 0))
	over := walk(t, descriptors.Entry{Key: "client", Value: "10.1.2.3"})
	over.Hits, over.Decided, over.Limit, over.Before, over.After, over.Over, over.Shadow = 4, true, 10, 10, 14, true, true
	hit(m, over)
	// A failure mode's answer counts its hits and nothing else.
	failed := walk(t, descriptors.Entry{Key: "remote_address", Value: "x"})
	failed.Hits = 5
	hit(m, failed)

	compare(t, m, `
# HELP ratelimit_service_rate_limit_total_hits Metric autogenerated by statsd_exporter.
# TYPE ratelimit_service_rate_limit_total_hits counter
ratelimit_service_rate_limit_total_hits{domain="edge",key1="client_10_1_2_3"} 4
ratelimit_service_rate_limit_total_hits{domain="edge",key1="plan_free",key2="api_key"} 5
ratelimit_service_rate_limit_total_hits{domain="edge",key1="remote_address"} 7
# HELP ratelimit_service_rate_limit_within_limit Metric autogenerated by statsd_exporter.
# TYPE ratelimit_service_rate_limit_within_limit counter
ratelimit_service_rate_limit_within_limit{domain="edge",key1="plan_free",key2="api_key"} 5
ratelimit_service_rate_limit_within_limit{domain="edge",key1="remote_address"} 2
# HELP ratelimit_service_rate_limit_near_limit Metric autogenerated by statsd_exporter.
# TYPE ratelimit_service_rate_limit_near_limit counter
ratelimit_service_rate_limit_near_limit{domain="edge",key1="remote_address"} 1
# HELP ratelimit_service_rate_limit_over_limit Metric autogenerated by statsd_exporter.
# TYPE ratelimit_service_rate_limit_over_limit counter
ratelimit_service_rate_limit_over_limit{domain="edge",key1="client_10_1_2_3"} 4
# HELP ratelimit_service_rate_limit_shadow_mode Metric autogenerated by statsd_exporter.
# TYPE ratelimit_service_rate_limit_shadow_mode counter
ratelimit_service_rate_limit_shadow_mode{domain="edge",key1="client_10_1_2_3"} 4
`, "ratelimit_service_rate_limit_total_hits", "ratelimit_service_rate_limit_within_limit", "ratelimit_service_rate_limit_near_limit",
		"ratelimit_service_rate_limit_over_limit", "ratelimit_service_rate_limit_shadow_mode")
}

// TestRatelimitLocalCacheAndGlobalShadow: over_limit_with_local_cache and
// global_shadow_mode have no mapping in the built-in mapper (nor in
// envoyproxy/ratelimit's), so the exporter's rules name them: a family of
// the escaped stat name, without labels. For a stat key of two levels the
// over_limit regex, which the exporter does not anchor at the end, matches
// the local cache's name too and counts its hits into over_limit again, as
// envoyproxy/ratelimit's exporter does.
func TestRatelimitLocalCacheAndGlobalShadow(t *testing.T) {
	m := enabled(t, RatelimitOptions{})
	one := walk(t, descriptors.Entry{Key: "client", Value: "10.1.2.3"})
	one.Hits, one.Decided, one.Limit, one.Before, one.After, one.Over, one.Local = 1, true, 10, 10, 11, true, true
	hit(m, one)
	two := walk(t, descriptors.Entry{Key: "plan", Value: "free"}, descriptors.Entry{Key: "api_key", Value: "k"})
	two.Hits, two.Decided, two.Limit, two.Before, two.After, two.Over, two.Local = 3, true, 10, 10, 13, true, true
	hit(m, two)
	m.GlobalShadow()
	m.GlobalShadow()
	compare(t, m, `
# HELP ratelimit_service_global_shadow_mode Metric autogenerated by statsd_exporter.
# TYPE ratelimit_service_global_shadow_mode counter
ratelimit_service_global_shadow_mode 2
# HELP ratelimit_service_rate_limit_edge_client_10_1_2_3_over_limit_with_local_cache Metric autogenerated by statsd_exporter.
# TYPE ratelimit_service_rate_limit_edge_client_10_1_2_3_over_limit_with_local_cache counter
ratelimit_service_rate_limit_edge_client_10_1_2_3_over_limit_with_local_cache 1
# HELP ratelimit_service_rate_limit_over_limit Metric autogenerated by statsd_exporter.
# TYPE ratelimit_service_rate_limit_over_limit counter
ratelimit_service_rate_limit_over_limit{domain="edge",key1="client_10_1_2_3"} 1
ratelimit_service_rate_limit_over_limit{domain="edge",key1="plan_free",key2="api_key"} 6
`, "ratelimit_service_global_shadow_mode", "ratelimit_service_rate_limit_edge_client_10_1_2_3_over_limit_with_local_cache",
		"ratelimit_service_rate_limit_over_limit")
}

// TestRatelimitServiceFamilies: calls by method, their errors and
// durations, and config loads; the service's own families are served beside
// them.
func TestRatelimitServiceFamilies(t *testing.T) {
	m := enabled(t, RatelimitOptions{MapperYAML: envoyGatewayMapper})
	m.Reload(true, time.Now())
	m.Reload(false, time.Now())
	m.Reload(true, time.Now())
	const srl, check = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit", "/grpc.health.v1.Health/Check"
	m.RatelimitCall(srl, 3*time.Millisecond)
	m.RatelimitCall(srl, 1500*time.Microsecond)
	m.RatelimitCall(srl, 0)
	m.RatelimitCall(check, 0)
	m.Request("unavailable", 0, ErrRedis)
	m.Request("unavailable", 0, ErrService)
	m.Request("unavailable", 0, "other")
	compare(t, m, `
# HELP ratelimit_service_config_load_success Metric autogenerated by statsd_exporter.
# TYPE ratelimit_service_config_load_success counter
ratelimit_service_config_load_success 2
# HELP ratelimit_service_config_load_error Metric autogenerated by statsd_exporter.
# TYPE ratelimit_service_config_load_error counter
ratelimit_service_config_load_error 1
# HELP ratelimit_service_total_requests Metric autogenerated by statsd_exporter.
# TYPE ratelimit_service_total_requests counter
ratelimit_service_total_requests{grpc_method="Check"} 1
ratelimit_service_total_requests{grpc_method="ShouldRateLimit"} 3
# HELP ratelimit_service_should_rate_limit_error Metric autogenerated by statsd_exporter.
# TYPE ratelimit_service_should_rate_limit_error counter
ratelimit_service_should_rate_limit_error{err_type="redis_error"} 1
ratelimit_service_should_rate_limit_error{err_type="service_error"} 1
# HELP ratelimit_service_response_time_seconds Metric autogenerated by statsd_exporter.
# TYPE ratelimit_service_response_time_seconds histogram
ratelimit_service_response_time_seconds_bucket{grpc_method="Check",le="0.005"} 1
ratelimit_service_response_time_seconds_bucket{grpc_method="Check",le="0.01"} 1
ratelimit_service_response_time_seconds_bucket{grpc_method="Check",le="0.025"} 1
ratelimit_service_response_time_seconds_bucket{grpc_method="Check",le="0.05"} 1
ratelimit_service_response_time_seconds_bucket{grpc_method="Check",le="0.1"} 1
ratelimit_service_response_time_seconds_bucket{grpc_method="Check",le="0.25"} 1
ratelimit_service_response_time_seconds_bucket{grpc_method="Check",le="0.5"} 1
ratelimit_service_response_time_seconds_bucket{grpc_method="Check",le="1"} 1
ratelimit_service_response_time_seconds_bucket{grpc_method="Check",le="2.5"} 1
ratelimit_service_response_time_seconds_bucket{grpc_method="Check",le="5"} 1
ratelimit_service_response_time_seconds_bucket{grpc_method="Check",le="10"} 1
ratelimit_service_response_time_seconds_bucket{grpc_method="Check",le="+Inf"} 1
ratelimit_service_response_time_seconds_sum{grpc_method="Check"} 0
ratelimit_service_response_time_seconds_count{grpc_method="Check"} 1
ratelimit_service_response_time_seconds_bucket{grpc_method="ShouldRateLimit",le="0.005"} 1
ratelimit_service_response_time_seconds_bucket{grpc_method="ShouldRateLimit",le="0.01"} 1
ratelimit_service_response_time_seconds_bucket{grpc_method="ShouldRateLimit",le="0.025"} 1
ratelimit_service_response_time_seconds_bucket{grpc_method="ShouldRateLimit",le="0.05"} 1
ratelimit_service_response_time_seconds_bucket{grpc_method="ShouldRateLimit",le="0.1"} 1
ratelimit_service_response_time_seconds_bucket{grpc_method="ShouldRateLimit",le="0.25"} 1
ratelimit_service_response_time_seconds_bucket{grpc_method="ShouldRateLimit",le="0.5"} 1
ratelimit_service_response_time_seconds_bucket{grpc_method="ShouldRateLimit",le="1"} 2
ratelimit_service_response_time_seconds_bucket{grpc_method="ShouldRateLimit",le="2.5"} 2
ratelimit_service_response_time_seconds_bucket{grpc_method="ShouldRateLimit",le="5"} 3
ratelimit_service_response_time_seconds_bucket{grpc_method="ShouldRateLimit",le="10"} 3
ratelimit_service_response_time_seconds_bucket{grpc_method="ShouldRateLimit",le="+Inf"} 3
ratelimit_service_response_time_seconds_sum{grpc_method="ShouldRateLimit"} 4
ratelimit_service_response_time_seconds_count{grpc_method="ShouldRateLimit"} 3
`, "ratelimit_service_config_load_success", "ratelimit_service_config_load_error", "ratelimit_service_total_requests",
		"ratelimit_service_should_rate_limit_error", "ratelimit_service_response_time_seconds")
	// Envoy-rls's own, on the same gatherer.
	if n, err := testutil.GatherAndCount(m.RatelimitGatherer(), "rls_config_reloads_total"); err != nil || n != 2 {
		t.Errorf("rls_config_reloads_total: %d series, %v; want 2", n, err)
	}
}

// TestRatelimitResponseSeconds: the built-in mapper scales the
// milliseconds to seconds, as envoyproxy/ratelimit's default does.
func TestRatelimitResponseSeconds(t *testing.T) {
	m := enabled(t, RatelimitOptions{})
	m.RatelimitCall("/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit", 7*time.Millisecond)
	compare(t, m, `
# HELP ratelimit_service_response_time_seconds Metric autogenerated by statsd_exporter.
# TYPE ratelimit_service_response_time_seconds histogram
ratelimit_service_response_time_seconds_bucket{grpc_method="ShouldRateLimit",le="0.005"} 0
ratelimit_service_response_time_seconds_bucket{grpc_method="ShouldRateLimit",le="0.01"} 1
ratelimit_service_response_time_seconds_bucket{grpc_method="ShouldRateLimit",le="0.025"} 1
ratelimit_service_response_time_seconds_bucket{grpc_method="ShouldRateLimit",le="0.05"} 1
ratelimit_service_response_time_seconds_bucket{grpc_method="ShouldRateLimit",le="0.1"} 1
ratelimit_service_response_time_seconds_bucket{grpc_method="ShouldRateLimit",le="0.25"} 1
ratelimit_service_response_time_seconds_bucket{grpc_method="ShouldRateLimit",le="0.5"} 1
ratelimit_service_response_time_seconds_bucket{grpc_method="ShouldRateLimit",le="1"} 1
ratelimit_service_response_time_seconds_bucket{grpc_method="ShouldRateLimit",le="2.5"} 1
ratelimit_service_response_time_seconds_bucket{grpc_method="ShouldRateLimit",le="5"} 1
ratelimit_service_response_time_seconds_bucket{grpc_method="ShouldRateLimit",le="10"} 1
ratelimit_service_response_time_seconds_bucket{grpc_method="ShouldRateLimit",le="+Inf"} 1
ratelimit_service_response_time_seconds_sum{grpc_method="ShouldRateLimit"} 0.007
ratelimit_service_response_time_seconds_count{grpc_method="ShouldRateLimit"} 1
`, "ratelimit_service_response_time_seconds")
}

// TestRatelimitUserMapper: a user's mapper decides the names, labels,
// scales and drops; a stat it does not map is served under its escaped
// statsd name, as the exporter serves it.
func TestRatelimitUserMapper(t *testing.T) {
	m := enabled(t, RatelimitOptions{MapperYAML: `mappings:
  - match: "ratelimit.service.rate_limit.*.*.total_hits"
    name: "hits"
    help: "Hits by descriptor."
    scale: 2
    labels: {dom: "$1", key: "$2"}
  - match: "ratelimit.service.rate_limit.*.*.within_limit"
    name: "dropped"
    action: drop
  - match: "ratelimit_server.*.response_time"
    name: "latency_ms"
    observer_type: summary
    summary_options: {quantiles: [{quantile: 0.5, error: 0.05}]}
    labels: {method: "$1"}
`})
	hit(m, within(walk(t, descriptors.Entry{Key: "remote_address", Value: "a"}), 3, 0))
	m.RatelimitCall("/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit", 4*time.Millisecond)
	compare(t, m, `
# HELP hits Hits by descriptor.
# TYPE hits counter
hits{dom="edge",key="remote_address"} 6
# HELP ratelimit_server_ShouldRateLimit_total_requests Metric autogenerated by statsd_exporter.
# TYPE ratelimit_server_ShouldRateLimit_total_requests counter
ratelimit_server_ShouldRateLimit_total_requests 1
# HELP latency_ms Metric autogenerated by statsd_exporter.
# TYPE latency_ms summary
latency_ms{method="ShouldRateLimit",quantile="0.5"} 4
latency_ms_sum{method="ShouldRateLimit"} 4
latency_ms_count{method="ShouldRateLimit"} 1
`, "hits", "dropped", "ratelimit_server_ShouldRateLimit_total_requests", "latency_ms",
		"ratelimit_service_rate_limit_within_limit_edge_remote_address")
}

func TestRatelimitOptionsRefused(t *testing.T) {
	for _, o := range []RatelimitOptions{
		{MapperYAML: "mappings: [{match: 'a.*', name: ''}]"},
		{MapperYAML: "mappings: {"},
		{MapperYAML: "mappings: [{match: 'a.*', name: 'x', labels: {'bad-label': '$1'}}]"},
		{NearLimitRatio: 1.5},
		{NearLimitRatio: -0.1},
	} {
		if err := New().EnableRatelimit(o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}

// TestRatelimitStatKeysBounded: past the bound, new stat keys are not
// counted; the keys already counted still are.
// TestRatelimitStatKeysBounded: the stat keys of request values hold at
// most ValuesBytes; a new key past it takes the place of the key counted
// least recently, whose series leaves the scrape, and it is said once;
// the keys the config names are not counted against the bound.
func TestRatelimitStatKeysBounded(t *testing.T) {
	full := 0
	m := enabled(t, RatelimitOptions{ValuesBytes: 2 * (valueKeyFamilies + valueKeyPerByte*int64(len("edge.client_a"))), ValuesFull: func() { full++ }})
	for _, v := range []string{"a", "b", "a", "c", "a", "d"} {
		hit(m, within(walk(t, descriptors.Entry{Key: "client", Value: v}), 1, 0))
	}
	hit(m, within(walk(t, descriptors.Entry{Key: "remote_address", Value: "x"}), 1, 0))
	// a, b; a counted again, so c takes b's place; a counted again, so d
	// takes c's.
	compare(t, m, `
# HELP ratelimit_service_rate_limit_total_hits Metric autogenerated by statsd_exporter.
# TYPE ratelimit_service_rate_limit_total_hits counter
ratelimit_service_rate_limit_total_hits{domain="edge",key1="client_a"} 3
ratelimit_service_rate_limit_total_hits{domain="edge",key1="client_d"} 1
ratelimit_service_rate_limit_total_hits{domain="edge",key1="remote_address"} 1
`, "ratelimit_service_rate_limit_total_hits")
	if full != 1 {
		t.Errorf("ValuesFull called %d times, want once", full)
	}
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(`
# HELP rls_stat_values Stat keys of envoyproxy/ratelimit's stats that hold request values (detailed_metric, value_to_metric) kept.
# TYPE rls_stat_values gauge
rls_stat_values 2
# HELP rls_stat_values_evicted_total Stat keys of request values dropped, with their series and statsd counters, to make room within -stat-values-max-mib for new ones: the least recently counted.
# TYPE rls_stat_values_evicted_total counter
rls_stat_values_evicted_total 2
`), "rls_stat_values", "rls_stat_values_evicted_total"); err != nil {
		t.Error(err)
	}
}

// TestRatelimitEvictedStatsd: a key evicted takes its statsd counters
// with it, and what they counted since the last flush is counted as
// dropped; a key that comes back counts again from zero.
func TestRatelimitEvictedStatsd(t *testing.T) {
	m := enabled(t, RatelimitOptions{Statsd: true, NoFamilies: true, ValuesBytes: valueKeyStatsd + valueKeyPerByte*int64(len("edge.client_a"))})
	var sink recordingSink
	hit(m, within(walk(t, descriptors.Entry{Key: "client", Value: "a"}), 1, 0))
	hit(m, within(walk(t, descriptors.Entry{Key: "client", Value: "b"}), 2, 0)) // a's 1 is lost
	m.FlushStatsd(&sink)
	hit(m, within(walk(t, descriptors.Entry{Key: "client", Value: "a"}), 4, 0))
	m.FlushStatsd(&sink)
	m.FlushStatsd(&sink)
	want := []string{"client_b 2", "client_a 4"}
	if got := sink.totalHits(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("total_hits flushed: got %v, want %v", got, want)
	}
	if n := len(m.ratelimit.sd.counters); n != 5+6 {
		t.Errorf("%d statsd counters kept, want the 5 of the service and the 6 of client_a", n)
	}
	// a's total_hits and within_limit.
	if got := testutil.ToFloat64(m.statsdDropped); got != 2 {
		t.Errorf("rls_statsd_dropped_total: got %v, want 2", got)
	}
}

// recordingSink keeps the total_hits counters of a statsd flush.
type recordingSink struct{ lines []string }

func (s *recordingSink) Counter(name string, n uint64) {
	if k, ok := strings.CutSuffix(strings.TrimPrefix(name, "ratelimit.service.rate_limit.edge."), ".total_hits"); ok {
		s.lines = append(s.lines, k+" "+strconv.FormatUint(n, 10))
	}
}
func (s *recordingSink) Gauge(string, uint64) {}
func (s *recordingSink) Timer(string, uint64) {}
func (s *recordingSink) totalHits() []string  { return s.lines }

// TestRatelimitOff: without EnableRatelimit nothing counts and nothing is
// served; a nil Metrics is as good.
func TestRatelimitOff(t *testing.T) {
	m := New()
	hit(m, within(walk(t, descriptors.Entry{Key: "remote_address", Value: "a"}), 1, 0))
	m.RatelimitCall("/a.B/C", time.Millisecond)
	m.Request("unavailable", 0, ErrRedis)
	if m.RatelimitOn() || m.RatelimitGatherer() != nil {
		t.Error("on without EnableRatelimit")
	}
	var nilM *Metrics
	nilM.Decided(&Decision{Stats: true})
	nilM.RatelimitCall("/a.B/C", 0)
	nilM.Request("unavailable", 0, ErrRedis)
	if nilM.EnableRatelimit(RatelimitOptions{}) == nil {
		t.Error("a nil Metrics enabled")
	}
}

// BenchmarkRatelimitHit is the stats' part of a decision on a node whose
// stat key does not vary, and on one with detailed_metric.
func BenchmarkRatelimitHit(b *testing.B) {
	m := enabled(b, RatelimitOptions{})
	for _, bc := range []struct {
		name string
		h    *RatelimitHit
	}{
		{"static", within(walk(b, descriptors.Entry{Key: "remote_address", Value: "10.0.0.1"}), 1, 8)},
		{"detailed", within(walk(b, descriptors.Entry{Key: "client", Value: "10.0.0.1"}), 1, 8)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				m.ratelimit.hit(bc.h)
			}
		})
	}
}

// TestRatelimitMethodsShareASeries: two methods a mapper maps onto one
// series count into it, as in the exporter.
func TestRatelimitMethodsShareASeries(t *testing.T) {
	m := enabled(t, RatelimitOptions{MapperYAML: `mappings:
  - match: "ratelimit_server.*.response_time"
    name: "latency"
    observer_type: histogram
    histogram_options: {buckets: [1]}
  - match: "ratelimit_server.*.total_requests"
    name: "calls"
`})
	m.RatelimitCall("/a.B/One", 0)
	m.RatelimitCall("/a.B/Two", 2*time.Millisecond)
	compare(t, m, `
# HELP calls Metric autogenerated by statsd_exporter.
# TYPE calls counter
calls 2
# HELP latency Metric autogenerated by statsd_exporter.
# TYPE latency histogram
latency_bucket{le="1"} 1
latency_bucket{le="+Inf"} 2
latency_sum 2
latency_count 2
`, "calls", "latency")
}

// BenchmarkRatelimitCall is the stats' part of one gRPC call.
func BenchmarkRatelimitCall(b *testing.B) {
	m := enabled(b, RatelimitOptions{})
	b.ReportAllocs()
	for b.Loop() {
		m.RatelimitCall("/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit", 700*time.Microsecond)
	}
}

// TestRatelimitFamilyHelp: mappings that put different help on one family
// do not make the scrape fail; the first mapping's help is the family's.
func TestRatelimitFamilyHelp(t *testing.T) {
	m := enabled(t, RatelimitOptions{MapperYAML: `mappings:
  - match: "ratelimit.service.rate_limit.*.*.total_hits"
    name: "counted"
    help: "First."
  - match: "ratelimit.service.rate_limit.*.*.within_limit"
    name: "counted"
    help: "Second."
    labels: {kind: "within"}
`})
	hit(m, within(walk(t, descriptors.Entry{Key: "remote_address", Value: "a"}), 2, 0))
	compare(t, m, `
# HELP counted First.
# TYPE counted counter
counted 2
counted{kind="within"} 2
`, "counted")
}

// TestRatelimitEvictionConcurrent: decisions on new and old values from
// several goroutines, with scrapes and statsd flushes beside them, keep
// the keys within the bound, and the race detector quiet.
func TestRatelimitEvictionConcurrent(t *testing.T) {
	m := enabled(t, RatelimitOptions{Statsd: true, ValuesBytes: 64 << 10})
	static := within(walk(t, descriptors.Entry{Key: "remote_address", Value: "x"}), 1, 0)
	client := within(walk(t, descriptors.Entry{Key: "client", Value: "x"}), 1, 0)
	done := make(chan struct{})
	for g := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			h := *client
			for i := range 500 {
				h.Entries = []descriptors.Entry{{Key: "client", Value: strconv.Itoa(g*1000 + i%300)}}
				hit(m, &h)
				hit(m, static)
			}
		}()
	}
	go func() {
		defer func() { done <- struct{}{} }()
		for range 50 {
			m.FlushStatsd(&recordingSink{})
			if _, err := m.RatelimitGatherer().Gather(); err != nil {
				t.Error(err)
			}
		}
	}()
	for range 5 {
		<-done
	}
	r := m.ratelimit
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.values.bytes > r.values.max || r.values.n <= 0 {
		t.Errorf("%d keys holding %d bytes, want some, within %d", r.values.n, r.values.bytes, r.values.max)
	}
	if got := len(r.byKey); got != r.values.n+1 {
		t.Errorf("%d stat keys, want the %d of values and the static one", got, r.values.n)
	}
	if got, want := len(r.sd.counters), len(r.sd.byName); got != want {
		t.Errorf("%d statsd counters listed, %d by name", got, want)
	}
}
