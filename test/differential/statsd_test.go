//go:build differential

package differential

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
	"github.com/envoy-rls/envoy-rls/internal/statsdtest"
)

// TestDropInStatsdAsEnvoyproxyRatelimit: both services push their stats
// to a statsd of their own, as USE_STATSD=true (over TCP) pushes them,
// and as USE_DOG_STATSD=true (over UDP, with EXTRA_TAGS and a mogrifier)
// does; they get the same requests, and the counters they push, by name
// and tags, are compared, with the number of response times each method
// sent. The Go runtime's stats and the clients' own differ in their
// values, and are compared by name only.
func TestDropInStatsdAsEnvoyproxyRatelimit(t *testing.T) {
	for _, c := range []struct {
		name, network string
		limits        string
		steps         []*rlsv3.RateLimitRequest
		env           []string
	}{
		{"statsd", "tcp", statsLimits, statsSteps(), []string{"USE_STATSD=true", "EXTRA_TAGS=team:edge,env:prod"}},
		// The local cache's refusals (over_limit_with_local_cache) and the
		// global shadow mode's (global_shadow_mode).
		{"statsd, local cache, shadow mode", "tcp", localCacheLimits, localCacheSteps(),
			[]string{"USE_STATSD=true", "LOCAL_CACHE_SIZE_IN_BYTES=1048576", "SHADOW_MODE=true"}},
		{"DogStatsD", "udp", statsLimits, statsSteps(), []string{"USE_STATSD=false", "USE_DOG_STATSD=true", "EXTRA_TAGS=team:edge",
			"USE_DOG_STATSD_MOGRIFIERS=HITS",
			`DOG_STATSD_MOGRIFIER_HITS_PATTERN=^ratelimit\.service\.rate_limit\.([^.]+)\.(.*)\.([^.]+)$`,
			"DOG_STATSD_MOGRIFIER_HITS_NAME=ratelimit.service.rate_limit.$3",
			"DOG_STATSD_MOGRIFIER_HITS_TAGS=domain:$1,descriptor:$2"}},
	} {
		t.Run(c.name, func(t *testing.T) { compareStatsd(t, c.network, c.limits, c.steps, c.env) })
	}
}

// compareStatsd runs both services on limitsFile with the statsd
// environment extra, each pushing to a statsd of its own on network, sends
// both the steps and a health check, and compares what they pushed.
func compareStatsd(t *testing.T, network, limitsFile string, steps []*rlsv3.RateLimitRequest, extra []string) {
	peer, ours, root := setup(t, limitsFile)
	statsdEnv := func(redisAddr string, ports [3]int, sd *statsdtest.Server) []string {
		base := slices.DeleteFunc(env(root, redisAddr, ports), func(v string) bool { return strings.HasPrefix(v, "USE_STATSD=") })
		host, port, _ := strings.Cut(sd.Addr(), ":")
		return append(append(base, "STATSD_HOST="+host, "STATSD_PORT="+port, "STATS_FLUSH_INTERVAL=300ms"), extra...)
	}
	peerPorts, ourPorts := freePorts(t), freePorts(t)
	peerSD, ourSD := statsdtest.Start(t, network), statsdtest.Start(t, network)
	peerRedis, ourRedis := redistest.Start(t), redistest.Start(t)
	theirs := startStats(t, "envoyproxy/ratelimit", peer, statsdEnv(peerRedis.Addr(), peerPorts, peerSD), peerPorts)
	mine := startStats(t, "envoy-rls", ours, statsdEnv(ourRedis.Addr(), ourPorts, ourSD), ourPorts)
	for _, conn := range []*grpc.ClientConn{theirs, mine} {
		c := rlsv3.NewRateLimitServiceClient(conn)
		for _, r := range steps {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			c.ShouldRateLimit(ctx, r) //nolint:errcheck // the answers are the other test's
			cancel()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			t.Error(err)
		}
		cancel()
	}
	a, b := settledStatsd(t, "envoyproxy/ratelimit", peerSD, len(steps)), settledStatsd(t, "envoy-rls", ourSD, len(steps))
	reportDifferences(t, "stats", a, b, knownStatsdDifference)
}

// settledStatsd waits until sd has received calls ShouldRateLimit calls'
// worth of total_requests, and two looks in a row agree, then returns
// what it received, summed, as sorted lines: "NAME|#TAGS TYPE COUNT" for
// the counters and the number of samples of each timer, "NAME|#TAGS TYPE"
// for the gauges and for the counters whose values are the runtime's.
func settledStatsd(t *testing.T, who string, sd *statsdtest.Server, calls int) []string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last []string
	for {
		got, requests := summed(sd.Lines())
		if requests == calls && slices.Equal(got, last) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's statsd did not settle on %d calls (%d):\n%s", who, calls, requests, strings.Join(got, "\n"))
		}
		last = got
		time.Sleep(700 * time.Millisecond)
	}
}

// summed adds up the stat lines received, and returns the ShouldRateLimit
// calls counted.
func summed(lines []string) (out []string, calls int) {
	type stat struct{ name, kind string }
	counts := map[stat]uint64{}
	for _, l := range lines {
		st, ok := statsdtest.Parse(l)
		if !ok {
			continue
		}
		k := stat{st.Key(), st.Type}
		switch {
		case st.Type == "ms":
			counts[k]++
		case st.Type == "c" && !runtimeStat(st.Name):
			n, _ := strconv.ParseUint(st.Value, 10, 64)
			counts[k] += n
		default:
			counts[k] += 0
		}
		if st.Type == "c" && strings.HasPrefix(st.Name, "ratelimit_server.ShouldRateLimit.total_requests") {
			n, _ := strconv.Atoi(st.Value)
			calls += n
		}
	}
	for k, n := range counts {
		if k.kind == "c" && !runtimeStat(k.name) || k.kind == "ms" {
			out = append(out, fmt.Sprintf("%s %s %d", k.name, k.kind, n))
		} else {
			out = append(out, k.name+" "+k.kind)
		}
	}
	slices.Sort(out)
	return out, calls
}

// runtimeStat reports a stat whose value is the process's, not the
// decisions': the Go runtime's, the Redis pool's, the local cache's, the
// runtime loader's, the DogStatsD client's own.
func runtimeStat(name string) bool {
	for _, p := range []string{"ratelimit.go.", "ratelimit.redis_pool.", "ratelimit.localcache.", "runtime.", "datadog."} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// knownStatsdDifferences are the stats statsSteps make differently on
// purpose, or that envoy-rls does not keep: a part of a line, and why.
var knownStatsdDifferences = []struct{ part, why string }{
	{".domain_not_found", "unknown domains are not counted by name"},
	{"stats.api_key_silver.", "an override's stat key holds no request value"},
	{"descriptor:api_key_silver", "an override's stat key holds no request value"},
	{"stats.api_key.", "an override's stat key holds no request value"},
	{"descriptor:api_key,", "an override's stat key holds no request value"},
	{"file_f*", "listings of one counter are decided together"},
	{"stats.tokens.over_limit", "a charged refusal's count before is not known"},
	{"stats.tokens.near_limit", "a charged refusal's count before is not known"},
	{"over_limit|#descriptor:tokens,", "a charged refusal's count before is not known"},
	{"near_limit|#descriptor:tokens,", "a charged refusal's count before is not known"},
	{"ratelimit.redis_pool.", "envoy-rls's Redis client is not envoyproxy/ratelimit's; rls_store_* says how the store does"},
	{"ratelimit.localcache.", "freecache's own gauges; envoy-rls's over-limit cache has rls_over_limit_cache_keys and rls_over_limit_cache_answers_total"},
	{"runtime.load_attempts", "goruntime's own stats: the limits are loaded by envoy-rls's loader (rls_config_reloads_total)"},
	{"runtime.num_values", "goruntime's own stats: the limits are loaded by envoy-rls's loader (rls_config_reloads_total)"},
	{"client_transport:", "the DogStatsD client's telemetry names its transport: udp there, custom here (envoy-rls's writer counts what it drops)"},
}

func knownStatsdDifference(line string) string {
	for _, k := range knownStatsdDifferences {
		if strings.Contains(line, k.part) {
			return k.why
		}
	}
	return ""
}
