package statsd

import (
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/envoy-rls/envoy-rls/internal/metrics"
	"github.com/envoy-rls/envoy-rls/internal/statsdtest"
)

const shouldRateLimit = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"

// kept is metrics with envoyproxy/ratelimit's stats kept for a statsd
// alone.
func kept(t *testing.T) *metrics.Metrics {
	t.Helper()
	m := metrics.New()
	if err := m.EnableRatelimit(metrics.RatelimitOptions{Statsd: true, NoFamilies: true}); err != nil {
		t.Fatal(err)
	}
	if m.RatelimitGatherer() != nil {
		t.Error("NoFamilies: the Prometheus families are served")
	}
	return m
}

// record counts a config load, two calls (3 ms and 1.5 ms), a store
// error and a request the global shadow mode let through.
func record(m *metrics.Metrics) {
	m.Reload(true, time.Now())
	m.RatelimitCall(shouldRateLimit, 3*time.Millisecond)
	m.RatelimitCall(shouldRateLimit, 1500*time.Microsecond)
	m.Request("unavailable", 0, metrics.ErrRedis)
	m.GlobalShadow()
}

func pusher(t *testing.T, o Options, m *metrics.Metrics, log *zap.Logger) *Pusher {
	t.Helper()
	p, err := New(o, m, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.close() })
	return p
}

// ours drops the Go runtime's stats and the DogStatsD client's own.
func ours(lines []string) []string {
	return slices.DeleteFunc(slices.Clone(lines), func(l string) bool {
		return strings.HasPrefix(l, "ratelimit.go.") || strings.HasPrefix(l, "datadog.")
	})
}

// TestPlainLines: over TCP and over UDP, a flush writes each counter that
// counted as NAME.__TAG=VALUE:N|c, each response time as |ms, in whole
// milliseconds; the Go runtime's gauges as |g; the next flush writes no
// counter that counted nothing since.
func TestPlainLines(t *testing.T) {
	for _, network := range []string{"tcp", "udp"} {
		t.Run(network, func(t *testing.T) {
			srv := statsdtest.Start(t, network)
			m := kept(t)
			tags, err := ParseTags("team:edge,env:prod.eu")
			if err != nil {
				t.Fatal(err)
			}
			p := pusher(t, Options{Addr: srv.Addr(), Network: network, Tags: tags}, m, zap.NewNop())
			record(m)
			p.Flush()
			want := []string{
				"ratelimit.service.call.should_rate_limit.redis_error.__env=prod_eu.__team=edge:1|c",
				"ratelimit.service.config_load_success.__env=prod_eu.__team=edge:1|c",
				"ratelimit.service.global_shadow_mode.__env=prod_eu.__team=edge:1|c",
				"ratelimit_server.ShouldRateLimit.response_time.__env=prod_eu.__team=edge:1|ms",
				"ratelimit_server.ShouldRateLimit.response_time.__env=prod_eu.__team=edge:3|ms",
				"ratelimit_server.ShouldRateLimit.total_requests.__env=prod_eu.__team=edge:2|c",
			}
			if !srv.WaitFor(5*time.Second, func(l []string) bool { return len(ours(l)) >= len(want) }) {
				t.Fatalf("got %q", srv.Lines())
			}
			got := ours(srv.Lines())
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if !slices.Contains(srv.Lines(), "ratelimit.go.numGC.__env=prod_eu.__team=edge:0|c") &&
				!slices.ContainsFunc(srv.Lines(), func(l string) bool {
					return strings.HasPrefix(l, "ratelimit.go.numGoroutine.__env=prod_eu.__team=edge:") && strings.HasSuffix(l, "|g")
				}) {
				t.Errorf("no runtime gauge in %q", srv.Lines())
			}
			before := len(srv.Lines())
			m.RatelimitCall(shouldRateLimit, 0)
			p.Flush()
			if !srv.WaitFor(5*time.Second, func(l []string) bool { return len(ours(l)) >= len(want)+2 }) {
				t.Fatalf("second flush: got %q", ours(srv.Lines()))
			}
			if got, want := ours(srv.Lines()[before:]), []string{
				"ratelimit_server.ShouldRateLimit.total_requests.__env=prod_eu.__team=edge:1|c",
				"ratelimit_server.ShouldRateLimit.response_time.__env=prod_eu.__team=edge:0|ms",
			}; !slices.Equal(got, want) {
				t.Errorf("second flush: got %q, want %q", got, want)
			}
			if got := sent(m); got < float64(len(want)) {
				t.Errorf("rls_statsd_sent_total %v, want at least %d", got, len(want))
			}
		})
	}
}

// sent is rls_statsd_sent_total.
func sent(m *metrics.Metrics) float64 { return counterValue(m, "rls_statsd_sent_total") }

// dropped is rls_statsd_dropped_total.
func dropped(m *metrics.Metrics) float64 { return counterValue(m, "rls_statsd_dropped_total") }

func counterValue(m *metrics.Metrics, name string) float64 {
	fams, err := m.Registry.Gather()
	if err != nil {
		panic(err)
	}
	for _, f := range fams {
		if f.GetName() == name {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return -1
}

// TestDogStatsdTags: DogStatsD lines carry the tags as |#KEY:VALUE, the
// extra tags first, and a mogrifier renames a rate-limit stat and tags it
// with its parts; response times are |ms, as the DataDog client writes
// them (1.000000), as in envoyproxy/ratelimit.
func TestDogStatsdTags(t *testing.T) {
	srv := statsdtest.Start(t, "udp")
	m := kept(t)
	mogs, err := ParseMogrifiers(`[{"pattern": "^ratelimit\\.service\\.([^.]+)\\.(.*)$", "name": "ratelimit.service.$2", "tags": {"scope": "$1"}}]`)
	if err != nil {
		t.Fatal(err)
	}
	p := pusher(t, Options{Addr: srv.Addr(), Dog: true, Tags: []Tag{{"env", "prod"}}, Mogrifiers: mogs}, m, zap.NewNop())
	record(m)
	p.Flush()
	want := map[string]uint64{
		"ratelimit.service.should_rate_limit.redis_error|#env:prod,scope:call": 1,
		"ratelimit.service.config_load_success|#env:prod":                      1,
		"ratelimit.service.global_shadow_mode|#env:prod":                       1,
		"ratelimit_server.ShouldRateLimit.total_requests|#env:prod":            2,
	}
	notRuntime := func(n string) bool {
		return !strings.HasPrefix(n, "ratelimit.go.") && !strings.HasPrefix(n, "datadog.")
	}
	if !srv.WaitFor(5*time.Second, func([]string) bool { return len(srv.Counts(notRuntime)) >= len(want) }) {
		t.Fatalf("got %q", srv.Lines())
	}
	got := srv.Counts(notRuntime)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %d, want %d (all: %v)", k, got[k], v, got)
		}
	}
	var times []string
	for _, l := range srv.Lines() {
		if st, ok := statsdtest.Parse(l); ok && st.Type == "ms" {
			times = append(times, st.Name+":"+st.Value+"|#"+strings.Join(st.Tags, ","))
		}
	}
	slices.Sort(times)
	if want := []string{"ratelimit_server.ShouldRateLimit.response_time:1.000000|#env:prod", "ratelimit_server.ShouldRateLimit.response_time:3.000000|#env:prod"}; !slices.Equal(times, want) {
		t.Errorf("timers %q, want %q", times, want)
	}
}

// deadAddr is a loopback address where nothing listens.
func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestDeadStatsd: a statsd that refuses the connection loses the flush's
// lines, counted; one warning says so, not one a flush; once it listens,
// the next flush goes through and says so.
func TestDeadStatsd(t *testing.T) {
	addr := deadAddr(t)
	m := kept(t)
	core, logs := observer.New(zap.DebugLevel)
	p := pusher(t, Options{Addr: addr, Timeout: 200 * time.Millisecond}, m, zap.New(core))
	for range 3 {
		record(m)
		p.Flush()
	}
	if d := dropped(m); d < 3*6 {
		t.Errorf("rls_statsd_dropped_total %v after three flushes of six stats or more", d)
	}
	if n := logs.FilterLevelExact(zap.WarnLevel).Len(); n != 1 {
		t.Errorf("%d warnings, want 1: %v", n, logs.All())
	}
	listenTCP(t, addr, func(c net.Conn) { _, _ = io.Copy(io.Discard, c) })
	record(m)
	p.Flush()
	if logs.FilterMessage("statsd: stats go through again").Len() != 1 {
		t.Errorf("no line that stats go through again: %v", logs.All())
	}
}

// listenTCP listens on addr until the test ends, and hands each
// connection to each, on a goroutine of its own; the connections close
// when the test ends.
func listenTCP(t *testing.T, addr string, each func(net.Conn)) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening on %s: %v", addr, err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go each(c)
		}
	}()
	return l
}

// TestSlowStatsd: a statsd that takes the connection but reads nothing
// holds a flush no longer than the write timeout, and what it did not
// take is dropped and counted.
func TestSlowStatsd(t *testing.T) {
	l := listenTCP(t, "127.0.0.1:0", func(net.Conn) {}) // never read
	m := kept(t)
	p := pusher(t, Options{Addr: l.Addr().String(), Timeout: 200 * time.Millisecond}, m, zap.NewNop())
	// Enough lines to fill the connection's buffers many times over.
	for i := range 200_000 {
		m.RatelimitCall(shouldRateLimit, time.Duration(i%100)*time.Millisecond)
	}
	start := time.Now()
	p.Flush()
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("a flush to a statsd that reads nothing took %v", took)
	}
	if d := dropped(m); d == 0 {
		t.Error("nothing dropped")
	}
}
