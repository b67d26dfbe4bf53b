//go:build differential

package differential

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/envoy-rls/envoy-rls/internal/metrics"
	"github.com/envoy-rls/envoy-rls/internal/redistest"
)

// statsLimits has every kind of node a stat key treats apart. Periods are
// hours, so that no window ends during a run.
const statsLimits = `domain: stats
descriptors:
  - key: api_key
    value: gold
    rate_limit: {unit: hour, requests_per_unit: 3}
  - key: remote_address
    rate_limit: {unit: hour, requests_per_unit: 5}
  - key: source_cluster
    value: proxy
    descriptors:
      - key: destination_cluster
        value: bar
        descriptors:
          - key: path
            rate_limit: {unit: hour, requests_per_unit: 4}
        rate_limit: {unit: hour, requests_per_unit: 10}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: client
    detailed_metric: true
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: user
    value_to_metric: true
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: route
    value: "/api/*"
    rate_limit: {unit: hour, requests_per_unit: 3}
  - key: file
    value: "f*"
    share_threshold: true
    rate_limit: {unit: hour, requests_per_unit: 3}
  - key: tokens
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: health
    rate_limit: {unlimited: true}
`

func statsReq(ds ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: "stats", Descriptors: ds}
}

// statsSteps are the requests, in order, each sent to both services.
func statsSteps() []*rlsv3.RateLimitRequest {
	var s []*rlsv3.RateLimitRequest
	add := func(n int, r *rlsv3.RateLimitRequest) {
		for range n {
			s = append(s, r)
		}
	}
	add(4, statsReq(d("api_key", "gold")))                                                     // key and value: within, near, over
	add(6, statsReq(d("remote_address", "10.0.0.1")))                                          // key alone
	add(1, statsReq(withHits(d("source_cluster", "proxy", "destination_cluster", "bar"), 9)))  // nested, a cost
	add(2, statsReq(d("source_cluster", "proxy", "destination_cluster", "bar")))               // near, over
	add(3, statsReq(d("source_cluster", "proxy", "destination_cluster", "bar", "path", "/a"))) // three levels
	add(2, statsReq(d("shadow", "x")))                                                         // shadow mode
	add(1, statsReq(d("client", "10.0.0.1")))                                                  // detailed_metric, an address
	add(3, statsReq(d("client", "b")))                                                         // detailed_metric
	add(2, statsReq(d("user", "alice")))                                                       // value_to_metric
	add(1, statsReq(d("user", "bob")))                                                         //
	add(4, statsReq(d("route", "/api/x")))                                                     // wildcard
	add(2, statsReq(d("file", "f1"), d("file", "f2")))                                         // share_threshold
	add(1, statsReq(withHits(d("tokens", "t"), 0)))                                            // a peek
	add(1, statsReq(withHits(d("tokens", "t"), 8)))                                            // within, near
	add(1, statsReq(withHits(d("tokens", "t"), 5)))                                            // over, from 8 of 10
	add(2, statsReq(d("health", "x"), d("nothing", "y")))                                      // unlimited, no limit
	add(1, &rlsv3.RateLimitRequest{Domain: "stats", HitsAddend: 2, Descriptors: []*ratelimitv3.RateLimitDescriptor{d("remote_address", "10.0.0.9")}})
	over := d("api_key", "silver")
	over.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_HOUR}
	add(2, statsReq(over))                                                                                             // Envoy's override
	add(1, &rlsv3.RateLimitRequest{Domain: "elsewhere", Descriptors: []*ratelimitv3.RateLimitDescriptor{d("a", "b")}}) // unknown domain
	add(1, &rlsv3.RateLimitRequest{Domain: "", Descriptors: []*ratelimitv3.RateLimitDescriptor{d("a", "b")}})          // service_error
	return s
}

// envoyGatewayMapper is Envoy Gateway's statsd mapper, from
// EG_STATSD_MAPPER (its internal/infrastructure/kubernetes/ratelimit/statsd_conf.yaml),
// else the built-in mapper as Envoy Gateway words it: the response time
// without scale, the deprecated timer_type.
func envoyGatewayMapper(t *testing.T) string {
	if p := os.Getenv("EG_STATSD_MAPPER"); p != "" {
		return p
	}
	text := strings.Replace(strings.ReplaceAll(metrics.DefaultRatelimitMapper, "observer_type:", "timer_type:"), "    scale: 0.001\n", "", 1)
	p := filepath.Join(t.TempDir(), "statsd_conf.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// startStats runs bin with environ until the test ends, once its
// /healthcheck answers, and returns a connection to its gRPC port.
func startStats(t *testing.T, name, bin string, environ []string, ports [3]int) *grpc.ClientConn {
	t.Helper()
	run(t, name, bin, environ)
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthcheck", ports[0]))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is not healthy: %v", name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	conn, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", ports[1]), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// scrape returns the ratelimit_service_ series at url, sorted, with the
// response time's buckets and sum left out (they are timings): its count
// stays.
func scrape(t *testing.T, url string) []string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(l, "ratelimit_service_") ||
			strings.HasPrefix(l, "ratelimit_service_response_time_seconds_bucket") ||
			strings.HasPrefix(l, "ratelimit_service_response_time_seconds_sum") {
			continue
		}
		out = append(out, l)
	}
	slices.Sort(out)
	return out
}

// settled scrapes url until it shows want ShouldRateLimit calls and two
// scrapes in a row agree: envoyproxy/ratelimit flushes its stats to its
// exporter on a timer.
func settled(t *testing.T, url string, want int) []string {
	t.Helper()
	calls := fmt.Sprintf(`ratelimit_service_total_requests{grpc_method="ShouldRateLimit"} %d`, want)
	deadline := time.Now().Add(30 * time.Second)
	var last []string
	for {
		got := scrape(t, url)
		if slices.Contains(got, calls) && slices.Equal(got, last) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not settle on %d calls:\n%s", url, want, strings.Join(got, "\n"))
		}
		last = got
		time.Sleep(700 * time.Millisecond)
	}
}

// TestDropInStatsAsEnvoyproxyRatelimit: both services, run with Envoy
// Gateway's environment and statsd mapper, get the same requests; their
// ratelimit_service_ families are compared series by series.
func TestDropInStatsAsEnvoyproxyRatelimit(t *testing.T) {
	compareStats(t, statsLimits, statsSteps())
}

// localCacheLimits are keys of one and two levels, and one in shadow mode,
// each refused after one or two hits.
const localCacheLimits = `domain: stats
descriptors:
  - key: api_key
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: plan
    descriptors:
      - key: user
        rate_limit: {unit: hour, requests_per_unit: 1}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
`

// TestDropInLocalCacheStatsAsEnvoyproxyRatelimit: with
// LOCAL_CACHE_SIZE_IN_BYTES, the refusals after the first of a key come from
// the local cache (over_limit_with_local_cache); with SHADOW_MODE, every
// request its limits refuse is answered OK and counted in
// global_shadow_mode.
func TestDropInLocalCacheStatsAsEnvoyproxyRatelimit(t *testing.T) {
	compareStats(t, localCacheLimits, localCacheSteps(), "LOCAL_CACHE_SIZE_IN_BYTES=1048576", "SHADOW_MODE=true")
}

// localCacheSteps are keys refused after one or two hits, and a request
// whose descriptors are refused and in shadow mode.
func localCacheSteps() []*rlsv3.RateLimitRequest {
	var steps []*rlsv3.RateLimitRequest
	for _, s := range []struct {
		n int
		r *rlsv3.RateLimitRequest
	}{
		{5, statsReq(d("api_key", "a"))},
		{4, statsReq(d("plan", "free", "user", "u"))},
		{3, statsReq(d("shadow", "x"))},
		{2, statsReq(d("api_key", "b"), d("shadow", "y"))},
	} {
		for range s.n {
			steps = append(steps, s.r)
		}
	}
	return steps
}

// compareStats runs both services on limitsFile with Envoy Gateway's
// environment and statsd mapper and the extra environment, sends both the
// steps, and compares their ratelimit_service_ families series by series.
func compareStats(t *testing.T, limitsFile string, steps []*rlsv3.RateLimitRequest, extra ...string) {
	peer, ours, root := setup(t, limitsFile)
	mapper := envoyGatewayMapper(t)
	statsEnv := func(redisAddr string, ports [3]int, promPort int) []string {
		return append(append(env(root, redisAddr, ports),
			"USE_PROMETHEUS=true",
			"PROMETHEUS_ADDR=127.0.0.1:"+strconv.Itoa(promPort),
			"PROMETHEUS_MAPPER_YAML="+mapper,
			"STATS_FLUSH_INTERVAL=300ms"), extra...)
	}
	peerPorts, ourPorts, prom := freePorts(t), freePorts(t), freePorts(t)
	peerRedis, ourRedis := redistest.Start(t), redistest.Start(t)
	theirs := startStats(t, "envoyproxy/ratelimit", peer, statsEnv(peerRedis.Addr(), peerPorts, prom[0]), peerPorts)
	mine := startStats(t, "envoy-rls", ours, statsEnv(ourRedis.Addr(), ourPorts, prom[1]), ourPorts)

	for _, conn := range []*grpc.ClientConn{theirs, mine} {
		c := rlsv3.NewRateLimitServiceClient(conn)
		for _, r := range steps {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			c.ShouldRateLimit(ctx, r) //nolint:errcheck // the answers are the other test's; an error is counted here
			cancel()
		}
		// A health check is a call of its own method.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			t.Error(err)
		}
		cancel()
	}
	a := settled(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", prom[0]), len(steps))
	b := settled(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", prom[1]), len(steps))
	reportDifferences(t, "series", a, b, knownDifference)
}

// reportDifferences fails the test for every line of a (envoyproxy/ratelimit's)
// or b (envoy-rls's) that the other lacks, unless known says why it
// differs, and logs the tally of what, stats or series.
func reportDifferences(t *testing.T, what string, a, b []string, known func(line string) string) {
	t.Helper()
	onlyTheirs, onlyOurs, same := diffLines(a, b)
	nKnown := 0
	report := func(who string, lines []string) {
		for _, l := range lines {
			if why := known(l); why != "" {
				nKnown++
				t.Logf("%s only (known: %s): %s", who, why, l)
				continue
			}
			t.Errorf("%s only: %s", who, l)
		}
	}
	report("envoyproxy/ratelimit", onlyTheirs)
	report("envoy-rls", onlyOurs)
	t.Logf("%d %s alike, %d only envoyproxy/ratelimit's, %d only envoy-rls's (%d of them known)", same, what, len(onlyTheirs), len(onlyOurs), nKnown)
	if testing.Verbose() {
		t.Logf("envoyproxy/ratelimit:\n%s", strings.Join(a, "\n"))
	}
}

// knownDifferences are the series statsSteps make differently on purpose,
// or where envoy-rls cannot know what envoyproxy/ratelimit counts: a part
// of a series line, and why.
var knownDifferences = []struct{ part, why string }{
	// An unknown domain is a family named after whatever domain a client
	// sends there: envoy-rls counts no series a request can name.
	{"_domain_not_found ", "unknown domains are not counted by name"},
	// Envoy's limit override: envoyproxy/ratelimit names the stat by the
	// request's values (api_key_silver), envoy-rls by the config's (the key
	// alone where no node matched).
	{`key1="api_key_silver"`, "an override's stat key holds no request value"},
	{`key1="api_key"}`, "an override's stat key holds no request value"},
	// Two listings of one shared counter in a request are one hit in
	// envoy-rls, allowed or refused together; envoyproxy/ratelimit decides
	// them one after the other (a difference of the answers, not only the
	// stats).
	{`key1="file_f*"`, "listings of one counter are decided together"},
	// 5 hits from 8 of 10 on a limit that counts refused hits:
	// envoyproxy/ratelimit counts 3 over and 2 near; envoy-rls's store
	// does not say what the count was before a refused hit it charged, so
	// all 5 are over.
	{`_over_limit{domain="stats",key1="tokens"}`, "a charged refusal's count before is not known"},
	{`_near_limit{domain="stats",key1="tokens"}`, "a charged refusal's count before is not known"},
}

func knownDifference(line string) string {
	for _, k := range knownDifferences {
		if strings.Contains(line, k.part) {
			return k.why
		}
	}
	return ""
}

// diffLines compares two sorted lists.
func diffLines(a, b []string) (onlyA, onlyB []string, same int) {
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || i < len(a) && a[i] < b[j]:
			onlyA = append(onlyA, a[i])
			i++
		case i == len(a) || b[j] < a[i]:
			onlyB = append(onlyB, b[j])
			j++
		default:
			same++
			i++
			j++
		}
	}
	return onlyA, onlyB, same
}
