package server

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"math"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/envoy-rls/envoy-rls/internal/cli"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/envoy-rls/envoy-rls/internal/metrics"
)

// envoyproxy/ratelimit's stats (internal/metrics' RatelimitHit and its
// mapper), served as it serves them with USE_PROMETHEUS: on a listener of
// their own, beside the service's own families, which -http-addr's
// /metrics keeps serving alone.

// statsOptions are the flags of envoyproxy/ratelimit's stats.
type statsOptions struct {
	// addr is -prometheus-addr; empty: the stats are off.
	addr string
	// path is where addr serves them (-prometheus-path).
	path string
	// mapperFile is a statsd_exporter mapper config; empty: the built-in one.
	mapperFile     string
	nearLimitRatio float32
	// valuesMiB bounds the memory of the stat keys that hold request
	// values (metrics.RatelimitOptions.ValuesBytes), in MiB.
	valuesMiB int
	// disable turns the stats off whatever addr says, as DISABLE_STATS
	// does.
	disable bool
}

// statsFlags defines the flags of envoyproxy/ratelimit's stats.
func statsFlags(fs *flag.FlagSet, o *statsOptions) {
	o.path, o.nearLimitRatio = "/metrics", metrics.DefaultNearLimitRatio
	fs.StringVar(&o.addr, "prometheus-addr", "", "address that serves envoyproxy/ratelimit's Prometheus families (ratelimit_service_*), with the service's own beside them; empty: off")
	fs.Var(statsPathFlag{&o.path}, "prometheus-path", "path at -prometheus-addr that serves them")
	fs.StringVar(&o.mapperFile, "prometheus-mapper-yaml", "", "statsd_exporter mapper config that names the families and labels of envoyproxy/ratelimit's stats (empty: the built-in one, envoyproxy/ratelimit's default)")
	fs.Var(ratioFlag{&o.nearLimitRatio}, "near-limit-ratio", "share of a limit past which hits count as near_limit in envoyproxy/ratelimit's stats")
	fs.IntVar(&o.valuesMiB, "stat-values-max-mib", metrics.DefaultValuesBytes>>20, "memory, in MiB as estimated, that the stat keys holding request values (detailed_metric, value_to_metric) may take in envoyproxy/ratelimit's stats; past it the least recently counted are dropped, their series and statsd counters with them, so that new values are counted")
	fs.BoolVar(&o.disable, "disable-stats", false, "count none of envoyproxy/ratelimit's stats: serve no -prometheus-addr and push to no -statsd-addr, whatever they say")
}

// on reports whether the stats are counted and served.
func (o *statsOptions) on() bool { return o.addr != "" && !o.disable }

// ratioFlag is a share of a limit, from 0 to 1.
type ratioFlag struct{ r *float32 }

func (f ratioFlag) String() string {
	if f.r == nil {
		return ""
	}
	return strconv.FormatFloat(float64(*f.r), 'g', -1, 32)
}

func (f ratioFlag) Set(s string) error {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 32)
	if err != nil || !(v >= 0 && v <= 1) {
		return errors.New("want a number from 0 to 1")
	}
	*f.r = float32(v)
	return nil
}

func (f ratioFlag) Kind() cli.ValueKind {
	return cli.ValueKind{Word: "ratio", Want: "a number from 0 to 1"}
}

// statsPathFlag is an HTTP path.
type statsPathFlag struct{ p *string }

func (f statsPathFlag) String() string {
	if f.p == nil {
		return ""
	}
	return *f.p
}

func (f statsPathFlag) Set(s string) error {
	if !strings.HasPrefix(s, "/") {
		return errors.New("want a path that starts with /")
	}
	*f.p = s
	return nil
}

func (f statsPathFlag) Kind() cli.ValueKind {
	return cli.ValueKind{Word: "path", Want: "a path that starts with /"}
}

// listenStats opens -prometheus-addr; nil when the stats are off.
func listenStats(o *Options, log *zap.Logger) (net.Listener, error) {
	s := &o.stats
	if s.addr != "" && s.disable {
		log.Info("envoyproxy/ratelimit's stats are off (-disable-stats): not serving -prometheus-addr", zap.String("addr", s.addr))
	}
	if !s.on() {
		return nil, nil
	}
	l, err := net.Listen("tcp", s.addr)
	if err != nil {
		return nil, fmt.Errorf("-prometheus-addr: %w", err)
	}
	return l, nil
}

// noMappings is a mapper config without a mapping.
const noMappings = "mappings: []\n"

// enableStats turns envoyproxy/ratelimit's stats on in m when they are
// served or pushed to a statsd, with the mapper file read now: one that
// does not load stops the start, and one that does not exist is no
// mapping, as there.
func enableStats(o *Options, m *metrics.Metrics, log *zap.Logger) error {
	s := &o.stats
	families, pushed := s.on(), o.statsd.addr != "" && !s.disable
	if !families && !pushed {
		return nil
	}
	ro := metrics.RatelimitOptions{NearLimitRatio: s.nearLimitRatio, Statsd: pushed, NoFamilies: !families,
		ValuesBytes: int64(s.valuesMiB) << 20,
		ValuesFull: func() {
			log.Warn(fmt.Sprintf("the stat keys holding request values (detailed_metric, value_to_metric) reached %s (%d MiB): from now on the least recently counted are dropped to count new ones, counted in rls_stat_values_evicted_total; said once", o.setting("stat-values-max-mib"), s.valuesMiB))
		}}
	if ro.NearLimitRatio == 0 {
		// 0 asks for every hit to be near the limit. The options' zero
		// means the default; the smallest ratio above 0 gives a threshold
		// of 0 for any limit.
		ro.NearLimitRatio = math.SmallestNonzeroFloat32
	}
	if families && s.mapperFile != "" {
		b, err := os.ReadFile(s.mapperFile)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// As envoyproxy/ratelimit's sink, which ignores the file it
			// cannot read: no mapping, every stat a family of its own
			// named as statsd_exporter escapes it. Said at the start.
			b = []byte(noMappings)
			log.Warn(fmt.Sprintf("%s names %s, which does not exist: envoyproxy/ratelimit's stats are served without a mapper, each under its own escaped name, as there", o.setting("prometheus-mapper-yaml"), s.mapperFile))
		case err != nil:
			return fmt.Errorf("%s: %w", o.setting("prometheus-mapper-yaml"), err)
		}
		if len(strings.TrimSpace(string(b))) == 0 {
			return fmt.Errorf("-prometheus-mapper-yaml %s: the file is empty", s.mapperFile)
		}
		ro.MapperYAML = string(b)
	}
	if err := m.EnableRatelimit(ro); err != nil {
		if ro.MapperYAML != "" {
			return fmt.Errorf("-prometheus-mapper-yaml %s: %w", s.mapperFile, err)
		}
		return err
	}
	return nil
}

// serveStats serves m's envoyproxy/ratelimit families at -prometheus-path
// on l (nothing when l is nil), sending the server's end to errc, and
// returns what closes it. Its connections have the bound of -http-addr's,
// apart from them.
func serveStats(o *Options, m *metrics.Metrics, l net.Listener, log *zap.Logger, wg *sync.WaitGroup, errc chan<- error) (stop func()) {
	if l == nil {
		return func() {}
	}
	families := promhttp.HandlerFor(m.RatelimitGatherer(), promhttp.HandlerOpts{})
	path := o.stats.path
	srv := newHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != path {
			http.NotFound(w, r)
			return
		}
		families.ServeHTTP(w, r)
	}), o, o.httpReadTimeout, log)
	bounded := boundedHTTP(o, m, l)
	wg.Add(1)
	go func() { defer wg.Done(); errc <- serveHTTP(srv, bounded) }()
	log.Info("serving envoyproxy/ratelimit's stats", zap.String("addr", l.Addr().String()), zap.String("path", o.stats.path))
	return func() { srv.Close() }
}

// callStats counts every unary gRPC call in envoyproxy/ratelimit's stats
// by its method, as envoyproxy/ratelimit's server counts them (health
// checks too; /json, which does not go through gRPC, is not a call there).
// It is chained only with the stats on (RatelimitOn).
func callStats(m *metrics.Metrics) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		start := time.Now()
		resp, err := handler(ctx, req)
		m.RatelimitCall(info.FullMethod, time.Since(start))
		return resp, err
	}
}
