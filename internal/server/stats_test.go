package server

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/envoy-rls/envoy-rls/internal/metrics"
	"github.com/envoy-rls/envoy-rls/internal/redistest"
)

// statsLimits has a limit matched by a key and value, one by a key alone,
// a nested one, one in shadow mode and one with detailed_metric.
const statsLimits = `domain: rl
descriptors:
  - key: api_key
    value: gold
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: source_cluster
    value: proxy
    descriptors:
      - key: destination_cluster
        value: bar
        rate_limit: {unit: minute, requests_per_unit: 10}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: client
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 2}
`

// statsSteps are the requests of the stats tests, in order.
func statsSteps() []*rlsv3.RateLimitRequest {
	one := func(hits uint64, kv ...string) *rlsv3.RateLimitRequest {
		d := &ratelimitv3.RateLimitDescriptor{}
		for i := 0; i+1 < len(kv); i += 2 {
			d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
		}
		if hits > 0 {
			d.HitsAddend = wrapperspb.UInt64(hits)
		}
		return &rlsv3.RateLimitRequest{Domain: "rl", Descriptors: []*ratelimitv3.RateLimitDescriptor{d}}
	}
	var s []*rlsv3.RateLimitRequest
	add := func(n int, r *rlsv3.RateLimitRequest) {
		for range n {
			s = append(s, r)
		}
	}
	add(4, one(0, "api_key", "gold"))            // 3 within, the third near, 1 over
	add(5, one(0, "remote_address", "10.0.0.1")) // 5 within, the fifth near
	add(1, one(9, "source_cluster", "proxy", "destination_cluster", "bar"))
	add(2, one(1, "source_cluster", "proxy", "destination_cluster", "bar")) // near, then over
	add(2, one(0, "shadow", "x"))                                           // near, then over in shadow mode
	add(1, one(0, "client", "10.0.0.1"))                                    // detailed_metric: the value, its dots made _
	add(3, one(0, "client", "b"))                                           // within, near, over
	add(1, one(0, "nothing", "x"))                                          // no limit: no stats
	return s
}

// statsWant is what statsSteps make of envoyproxy/ratelimit's rate-limit
// families, sorted.
var statsWant = []string{
	`ratelimit_service_rate_limit_near_limit{domain="rl",key1="api_key_gold"} 1`,
	`ratelimit_service_rate_limit_near_limit{domain="rl",key1="client_b"} 1`,
	`ratelimit_service_rate_limit_near_limit{domain="rl",key1="remote_address"} 1`,
	`ratelimit_service_rate_limit_near_limit{domain="rl",key1="shadow"} 1`,
	`ratelimit_service_rate_limit_near_limit{domain="rl",key1="source_cluster_proxy",key2="destination_cluster_bar"} 2`,
	`ratelimit_service_rate_limit_over_limit{domain="rl",key1="api_key_gold"} 1`,
	`ratelimit_service_rate_limit_over_limit{domain="rl",key1="client_b"} 1`,
	`ratelimit_service_rate_limit_over_limit{domain="rl",key1="shadow"} 1`,
	`ratelimit_service_rate_limit_over_limit{domain="rl",key1="source_cluster_proxy",key2="destination_cluster_bar"} 1`,
	`ratelimit_service_rate_limit_shadow_mode{domain="rl",key1="shadow"} 1`,
	`ratelimit_service_rate_limit_total_hits{domain="rl",key1="api_key_gold"} 4`,
	`ratelimit_service_rate_limit_total_hits{domain="rl",key1="client_10_0_0_1"} 1`,
	`ratelimit_service_rate_limit_total_hits{domain="rl",key1="client_b"} 3`,
	`ratelimit_service_rate_limit_total_hits{domain="rl",key1="remote_address"} 5`,
	`ratelimit_service_rate_limit_total_hits{domain="rl",key1="shadow"} 2`,
	`ratelimit_service_rate_limit_total_hits{domain="rl",key1="source_cluster_proxy",key2="destination_cluster_bar"} 11`,
	`ratelimit_service_rate_limit_within_limit{domain="rl",key1="api_key_gold"} 3`,
	`ratelimit_service_rate_limit_within_limit{domain="rl",key1="client_10_0_0_1"} 1`,
	`ratelimit_service_rate_limit_within_limit{domain="rl",key1="client_b"} 2`,
	`ratelimit_service_rate_limit_within_limit{domain="rl",key1="remote_address"} 5`,
	`ratelimit_service_rate_limit_within_limit{domain="rl",key1="shadow"} 1`,
	`ratelimit_service_rate_limit_within_limit{domain="rl",key1="source_cluster_proxy",key2="destination_cluster_bar"} 10`,
}

// seriesOf returns the series lines of body whose family starts with
// prefix, sorted.
func seriesOf(body, prefix string) []string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return out
}

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestStatsServed: with -prometheus-addr, decisions over gRPC show in
// envoyproxy/ratelimit's families on that address (and path), beside the
// service's own, and so do the gRPC calls, by method; -http-addr's
// /metrics keeps the service's own alone.
func TestStatsServed(t *testing.T) {
	s := startInProcess(t, "-config", writeFile(t, "limits.yaml", statsLimits),
		"-default-algorithm", "fixed_window", "-count-refused",
		"-prometheus-addr", "127.0.0.1:0", "-prometheus-path", "/stats")
	if s.statsAddr == "" {
		t.Fatal("no stats listener")
	}
	decideSteps(t, s.grpcAddr) // and a health check, a call too, as envoyproxy/ratelimit counts them
	// /json is not: it does not go through gRPC.
	httpDo(t, "POST", "http://"+s.httpAddr+"/json", `{"domain":"rl","descriptors":[{"entries":[{"key":"nothing","value":"x"}]}]}`)
	code, body := httpDo(t, "GET", "http://"+s.statsAddr+"/stats", "")
	if code != 200 {
		t.Fatalf("GET /stats: %d %s", code, body)
	}
	if got := seriesOf(body, "ratelimit_service_rate_limit_"); !slices.Equal(got, statsWant) {
		t.Errorf("rate-limit families:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(statsWant, "\n"))
	}
	for _, want := range []string{
		`ratelimit_service_config_load_success 1`,
		`ratelimit_service_total_requests{grpc_method="ShouldRateLimit"} 19`,
		`ratelimit_service_total_requests{grpc_method="Check"} 1`,
		`ratelimit_service_response_time_seconds_count{grpc_method="ShouldRateLimit"} 19`,
	} {
		if !strings.Contains(body, "\n"+want+"\n") {
			t.Errorf("no %q in the stats", want)
		}
	}
	if !strings.Contains(body, "\nrls_decisions_total{") {
		t.Error("the service's own families are not beside them")
	}
	if code, _ := httpDo(t, "GET", "http://"+s.statsAddr+"/metrics", ""); code != 404 {
		t.Errorf("GET /metrics on -prometheus-addr with -prometheus-path /stats: %d, want 404", code)
	}
	if _, own := httpDo(t, "GET", "http://"+s.httpAddr+"/metrics", ""); strings.Contains(own, "ratelimit_service_") {
		t.Error("-http-addr's /metrics serves envoyproxy/ratelimit's families")
	}
}

// TestStatsLocalCacheAndGlobalShadow: on Redis with the over-limit cache, a
// count_refused fixed window's refusals after the first come from the cache
// (over_limit_with_local_cache); under -shadow-mode in envoyproxy/ratelimit's
// form, each request its limits refuse is answered OK and counted in
// global_shadow_mode.
func TestStatsLocalCacheAndGlobalShadow(t *testing.T) {
	r := redistest.Start(t)
	s := startInProcess(t, "-config", writeFile(t, "limits.yaml", statsLimits), "-redis-url", r.URL(),
		"-default-algorithm", "fixed_window", "-count-refused", "-ratelimit-compat", "-shadow-mode",
		"-over-limit-cache", "-prometheus-addr", "127.0.0.1:0")
	c := rlsv3.NewRateLimitServiceClient(grpcDial(t, s.grpcAddr, insecure.NewCredentials()))
	gold := &rlsv3.RateLimitRequest{Domain: "rl", Descriptors: []*ratelimitv3.RateLimitDescriptor{
		{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "api_key", Value: "gold"}}}}}
	for i := range 6 { // a limit of 3: three allowed, one refused by Redis, two by the cache
		ctx, cancel := context.WithTimeout(context.Background(), callBound)
		resp, err := c.ShouldRateLimit(ctx, gold)
		cancel()
		if err != nil || resp.OverallCode != rlsv3.RateLimitResponse_OK {
			t.Fatalf("request %d: %v %v, want OK (shadow mode)", i, resp, err)
		}
		if want := rlsv3.RateLimitResponse_OK; i >= 3 {
			want = rlsv3.RateLimitResponse_OVER_LIMIT
			if got := resp.Statuses[0].Code; got != want {
				t.Fatalf("request %d: status %v, want %v", i, got, want)
			}
		}
	}
	_, body := httpDo(t, "GET", "http://"+s.statsAddr+"/metrics", "")
	for _, want := range []string{
		`ratelimit_service_global_shadow_mode 3`,
		`ratelimit_service_rate_limit_rl_api_key_gold_over_limit_with_local_cache 2`,
		`ratelimit_service_rate_limit_over_limit{domain="rl",key1="api_key_gold"} 3`,
		`ratelimit_service_rate_limit_within_limit{domain="rl",key1="api_key_gold"} 3`,
	} {
		if !strings.Contains(body, "\n"+want+"\n") {
			t.Errorf("no %q in the stats:\n%s", want, strings.Join(seriesOf(body, "ratelimit_service_"), "\n"))
		}
	}
}

// TestStatsMapperFile: a mapper file given by flag decides the names; one
// that does not load stops the start.
func TestStatsMapperFile(t *testing.T) {
	mapper := writeFile(t, "mapper.yaml", `mappings:
  - match: "ratelimit.service.rate_limit.*.*.total_hits"
    name: "hits"
    labels: {domain: "$1", descriptor: "$2"}
`)
	s := startInProcess(t, "-config", writeFile(t, "limits.yaml", statsLimits),
		"-prometheus-addr", "127.0.0.1:0", "-prometheus-mapper-yaml", mapper)
	if _, err := rlsv3.NewRateLimitServiceClient(grpcDial(t, s.grpcAddr, insecure.NewCredentials())).ShouldRateLimit(
		context.Background(), statsSteps()[0]); err != nil {
		t.Fatal(err)
	}
	_, body := httpDo(t, "GET", "http://"+s.statsAddr+"/metrics", "")
	if got, want := seriesOf(body, "hits"), []string{`hits{descriptor="api_key_gold",domain="rl"} 1`}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}

	o, err := parseFlags([]string{"-prometheus-addr", "127.0.0.1:0", "-prometheus-mapper-yaml", writeFile(t, "bad.yaml", "mappings: [{match: 'a.*'}]")}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := enableStats(o, metrics.New(), zap.NewNop()); err == nil || !strings.Contains(err.Error(), "-prometheus-mapper-yaml") {
		t.Errorf("a mapper without a name: %v", err)
	}
	// A missing file is no mapping, as envoyproxy/ratelimit's sink takes
	// it: served, and said once.
	o.stats.mapperFile = filepath.Join(t.TempDir(), "missing.yaml")
	core, logs := observer.New(zapcore.WarnLevel)
	m := metrics.New()
	if err := enableStats(o, m, zap.New(core)); err != nil {
		t.Errorf("a missing mapper file: %v, want it served without a mapper", err)
	}
	if w := logs.All(); len(w) != 1 || !strings.HasPrefix(w[0].Message, "-prometheus-mapper-yaml names "+o.stats.mapperFile+", which does not exist") {
		t.Errorf("a missing mapper file: got warnings %v, want one naming -prometheus-mapper-yaml", w)
	}
}

// TestStatsReloadCounted: a reload that succeeds and one that is refused
// count as envoyproxy/ratelimit counts config loads.
func TestStatsReloadCounted(t *testing.T) {
	cfg := writeFile(t, "limits.yaml", statsLimits)
	s := startInProcess(t, "-config", cfg, "-prometheus-addr", "127.0.0.1:0")
	waitFor := func(want string) {
		t.Helper()
		deadline := time.Now().Add(reloadBound)
		for {
			_, body := httpDo(t, "GET", "http://"+s.statsAddr+"/metrics", "")
			if strings.Contains(body, "\n"+want+"\n") {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %q within %v:\n%s", want, reloadBound, strings.Join(seriesOf(body, "ratelimit_service_config"), "\n"))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor("ratelimit_service_config_load_success 1")
	if err := os.WriteFile(cfg, []byte("domain: rl\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor("ratelimit_service_config_load_error 1")
	if err := os.WriteFile(cfg, []byte(statsLimits+"  - key: new\n    rate_limit: {unit: hour, requests_per_unit: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor("ratelimit_service_config_load_success 2")
}

func TestStatsFlags(t *testing.T) {
	o, err := parseFlags(nil, env(map[string]string{"RLS_PROMETHEUS_ADDR": ":9090", "RLS_NEAR_LIMIT_RATIO": "0.5", "RLS_DISABLE_STATS": "true"}))
	if err != nil {
		t.Fatal(err)
	}
	if o.stats.addr != ":9090" || o.stats.nearLimitRatio != 0.5 || !o.stats.disable || o.stats.path != "/metrics" || o.stats.on() {
		t.Errorf("from the environment: %+v", o.stats)
	}
	if l, err := listenStats(o, zap.NewNop()); l != nil || err != nil {
		t.Errorf("-disable-stats: listener %v, %v", l, err)
	}
	for _, args := range [][]string{
		{"-near-limit-ratio", "1.5"}, {"-near-limit-ratio", "-1"}, {"-near-limit-ratio", "x"},
		{"-prometheus-path", "metrics"},
	} {
		if _, err := parseFlags(args, env(nil)); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}
