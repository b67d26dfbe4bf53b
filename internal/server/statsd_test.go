package server

import (
	"context"
	"fmt"
	"maps"
	"net"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/envoy-rls/envoy-rls/internal/statsdtest"
)

// statsdWant is what statsSteps and one health check make of
// envoyproxy/ratelimit's counters in a statsd, by stat name: the counts
// envoyproxy/ratelimit sends for the same requests (test/differential
// compares the two).
var statsdWant = func() map[string]uint64 {
	want := map[string]uint64{
		"ratelimit.service.config_load_success":           1,
		"ratelimit_server.ShouldRateLimit.total_requests": 19,
		"ratelimit_server.Check.total_requests":           1,
	}
	for key, c := range map[string][5]uint64{ // total_hits, within_limit, near_limit, over_limit, shadow_mode
		"rl.api_key_gold":   {4, 3, 1, 1, 0},
		"rl.remote_address": {5, 5, 1, 0, 0},
		"rl.source_cluster_proxy.destination_cluster_bar": {11, 10, 2, 1, 0},
		"rl.shadow":          {2, 1, 1, 1, 1},
		"rl.client_10_0_0_1": {1, 1, 0, 0, 0},
		"rl.client_b":        {3, 2, 1, 1, 0},
	} {
		for i, stat := range []string{"total_hits", "within_limit", "near_limit", "over_limit", "shadow_mode"} {
			if c[i] > 0 {
				want["ratelimit.service.rate_limit."+key+"."+stat] = c[i]
			}
		}
	}
	return want
}()

// envoyproxy/ratelimit's own stats, not the Go runtime's or the DogStatsD
// client's.
func rateLimitStat(name string) bool {
	return strings.HasPrefix(name, "ratelimit.service.") || strings.HasPrefix(name, "ratelimit_server.")
}

// decideSteps sends statsSteps and a health check to the server at
// grpcAddr, each answered.
func decideSteps(t *testing.T, grpcAddr string) {
	t.Helper()
	conn := grpcDial(t, grpcAddr, insecure.NewCredentials())
	c := rlsv3.NewRateLimitServiceClient(conn)
	for i, r := range statsSteps() {
		ctx, cancel := context.WithTimeout(context.Background(), callBound)
		_, err := c.ShouldRateLimit(ctx, r)
		cancel()
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	if _, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
}

// TestStatsdPushed: with -statsd-addr, a statsd listening over TCP or
// UDP, plain or DogStatsD with tags and a mogrifier, receives the counts
// of a sequence of decisions that envoyproxy/ratelimit sends for it, and
// one response time a call, in milliseconds.
func TestStatsdPushed(t *testing.T) {
	hits := `[{"pattern": "^ratelimit\\.service\\.rate_limit\\.([^.]+)\\.(.*)\\.([^.]+)$", "name": "ratelimit.service.rate_limit.$3", "tags": {"domain": "$1", "descriptor": "$2"}}]`
	mogrified := regexp.MustCompile(`^ratelimit\.service\.rate_limit\.([^.]+)\.(.*)\.([^.]+)$`)
	for _, c := range []struct {
		name, network string
		args          []string
		// key is the name Counts gives a stat of statsdWant.
		key func(name string) string
	}{
		{"statsd over TCP", "tcp", nil, func(n string) string { return n }},
		{"statsd over UDP, tagged", "udp", []string{"-statsd-protocol", "udp", "-statsd-tags", "env:test"},
			func(n string) string { return n + ".__env=test" }},
		{"DogStatsD, tagged and mogrified", "udp", []string{"-dogstatsd", "-statsd-tags", "env:test", "-dogstatsd-mogrifiers", hits},
			func(n string) string {
				if g := mogrified.FindStringSubmatch(n); g != nil {
					return fmt.Sprintf("ratelimit.service.rate_limit.%s|#descriptor:%s,domain:%s,env:test", g[3], g[2], g[1])
				}
				return n + "|#env:test"
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := statsdtest.Start(t, c.network)
			s := startInProcess(t, append([]string{"-config", writeFile(t, "limits.yaml", statsLimits),
				"-default-algorithm", "fixed_window", "-count-refused",
				"-statsd-addr", srv.Addr(), "-statsd-flush-interval", "100ms"}, c.args...)...)
			decideSteps(t, s.grpcAddr)
			want := map[string]uint64{}
			for n, v := range statsdWant {
				want[c.key(n)] = v
			}
			if !srv.WaitFor(10*time.Second, func([]string) bool { return maps.Equal(srv.Counts(rateLimitStat), want) }) {
				got := srv.Counts(rateLimitStat)
				t.Fatalf("got\n%s\nwant\n%s", sortedCounts(got), sortedCounts(want))
			}
			timers := 0
			for _, l := range srv.Lines() {
				if st, ok := statsdtest.Parse(l); ok && st.Type == "ms" && strings.Contains(st.Name, "response_time") {
					timers++
				}
			}
			if timers != 20 {
				t.Errorf("%d response times, want one a call (20)", timers)
			}
		})
	}
}

func sortedCounts(m map[string]uint64) string {
	var lines []string
	for k, v := range m {
		lines = append(lines, fmt.Sprintf("%s %d", k, v))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// TestStatsdDead: with a statsd that refuses the connection, decisions
// are answered as ever, and the stats dropped are counted.
func TestStatsdDead(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	s := startInProcess(t, "-config", writeFile(t, "limits.yaml", statsLimits),
		"-statsd-addr", dead, "-statsd-flush-interval", "50ms")
	for range 3 {
		decideSteps(t, s.grpcAddr)
	}
	eventually(t, "stats dropped, counted", func() bool {
		_, body := httpDo(t, "GET", "http://"+s.httpAddr+"/metrics", "")
		return strings.Contains(body, "\nrls_statsd_dropped_total ") && !strings.Contains(body, "\nrls_statsd_dropped_total 0\n")
	})
}

// TestStatsdDropIn: the drop-in's DogStatsD environment, mogrifier and
// tags included, becomes the statsd flags, through their RLS_ twins.
func TestStatsdDropIn(t *testing.T) {
	o := dropInOptions(t, map[string]string{
		"USE_STATSD": "false", "USE_DOG_STATSD": "true", "STATSD_HOST": "dd-agent", "STATSD_PORT": "9125",
		"EXTRA_TAGS": "env:prod,team:edge", "STATS_FLUSH_INTERVAL": "3s", "USE_DOG_STATSD_MOGRIFIERS": "hits",
		"DOG_STATSD_MOGRIFIER_HITS_PATTERN": `^ratelimit\.service\.rate_limit\.([^.]+)\.(.*)\.([^.]+)$`,
		"DOG_STATSD_MOGRIFIER_HITS_NAME":    "ratelimit.service.rate_limit.$3",
		"DOG_STATSD_MOGRIFIER_HITS_TAGS":    "domain:$1,descriptor:$2",
		"RUNTIME_ROOT":                      t.TempDir(),
	})
	s := &o.statsd
	if s.addr != "dd-agent:9125" || !s.dog || s.interval != 3*time.Second || len(s.tags.t) != 2 || len(s.mogs.m) != 1 {
		t.Errorf("got addr %q, dogstatsd %v, interval %v, tags %v, %d mogrifiers", s.addr, s.dog, s.interval, s.tags.t, len(s.mogs.m))
	}
	if m := s.mogs.m[0]; m.Name != "ratelimit.service.rate_limit.$3" || m.Tags["descriptor"] != "$2" {
		t.Errorf("mogrifier %+v", m)
	}
	// Unset, USE_STATSD is true, as there: localhost:8125 over TCP.
	if o := dropInOptions(t, map[string]string{"RUNTIME_ROOT": t.TempDir()}); o.statsd.addr != "localhost:8125" || o.statsd.dog {
		t.Errorf("USE_STATSD unset: -statsd-addr %q, -dogstatsd %v", o.statsd.addr, o.statsd.dog)
	}
}
