package server

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/envoy-rls/envoy-rls/internal/statsdtest"
)

// TestStatValuesBounded: with -stat-values-max-mib 1, a caller sending
// more detailed_metric values than the bound holds does not stop new
// values being counted: the least recently counted leave the scrape, the
// newest are in it, the keys held stay within the bound, the evictions
// are counted, and the bound is logged once.
func TestStatValuesBounded(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	srv := statsdtest.Start(t, "udp")
	s := startInProcessLogging(t, zap.New(core), "-config", writeFile(t, "limits.yaml", statsLimits),
		"-prometheus-addr", "127.0.0.1:0", "-statsd-addr", srv.Addr(), "-statsd-protocol", "udp",
		"-stat-values-max-mib", "1")
	c := rlsv3.NewRateLimitServiceClient(grpcDial(t, s.grpcAddr, insecure.NewCredentials()))
	const n = 1000
	for i := range n {
		ctx, cancel := context.WithTimeout(context.Background(), callBound)
		_, err := c.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "rl", Descriptors: []*ratelimitv3.RateLimitDescriptor{{
			Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "client", Value: "user-" + strconv.Itoa(i)}},
		}}})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, body := httpDo(t, "GET", "http://"+s.statsAddr+"/metrics", "")
	series := func(v string) string {
		return fmt.Sprintf(`ratelimit_service_rate_limit_total_hits{domain="rl",key1="client_user-%s"} 1`, v)
	}
	if !strings.Contains(body, series(strconv.Itoa(n-1))) {
		t.Errorf("the newest value is not counted: no %s", series(strconv.Itoa(n-1)))
	}
	if strings.Contains(body, series("0")) {
		t.Errorf("the oldest value is still served: %s", series("0"))
	}
	held, _ := strconv.Atoi(metric(t, s.httpAddr, "rls_stat_values"))
	if served := strings.Count(body, "ratelimit_service_rate_limit_total_hits{domain=\"rl\",key1=\"client_user-"); held < 100 || held >= n || served != held {
		t.Errorf("%d keys held and %d served, want the same number, between 100 and %d", held, served, n)
	}
	if b, _ := strconv.ParseFloat(metric(t, s.httpAddr, "rls_stat_values_bytes"), 64); b > 1<<20 {
		t.Errorf("rls_stat_values_bytes %v, over the bound of 1 MiB", b)
	}
	if ev, _ := strconv.Atoi(metric(t, s.httpAddr, "rls_stat_values_evicted_total")); ev != n-held {
		t.Errorf("rls_stat_values_evicted_total %d, want %d", ev, n-held)
	}
	if got := logs.FilterMessageSnippet("-stat-values-max-mib").Len(); got != 1 {
		t.Errorf("the bound was logged %d times, want once", got)
	}
}
