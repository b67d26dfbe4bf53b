package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"

	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/httpapi"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/breaker"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
	"github.com/envoy-rls/envoy-rls/pkg/limits/memory"
	"github.com/envoy-rls/envoy-rls/pkg/limits/overlimit"
	"github.com/envoy-rls/envoy-rls/pkg/limits/redisstore"
	"github.com/envoy-rls/envoy-rls/pkg/metrics"
	"github.com/envoy-rls/envoy-rls/pkg/rls"
	"github.com/envoy-rls/envoy-rls/pkg/watch"
)

// serve runs the server until SIGTERM or SIGINT and returns the exit status.
func serve(o *options, stderr io.Writer) int {
	log, err := newLogger(o, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "envoy-rls:", err)
		return 2
	}
	defer log.Sync() //nolint:errcheck // nothing to do about a failed flush at exit
	// The config comes before the listeners: an invalid file is one plain
	// line on stderr, not a JSON log, and the service answers only once it
	// is loaded.
	start, err := loadConfig(o, log, nil)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if !start.waitFirst(ctx, log) { // xds.go: stopped before the first snapshot
		start.close()
		return 0
	}
	if err := runServer(ctx, o, start, log); err != nil {
		log.Error("envoy-rls stopped", zap.Error(err))
		fmt.Fprintln(stderr, "envoy-rls:", err)
		return 1
	}
	return 0
}

func newLogger(o *options, stderr io.Writer) (*zap.Logger, error) {
	level, err := zapcore.ParseLevel(o.logLevel)
	if err != nil {
		return nil, fmt.Errorf("-log-level: %w", err)
	}
	encCfg := zap.NewProductionEncoderConfig()
	encCfg.EncodeTime = zapcore.ISO8601TimeEncoder
	var enc zapcore.Encoder
	if o.logFormat == "console" {
		enc = zapcore.NewConsoleEncoder(encCfg)
	} else {
		enc = zapcore.NewJSONEncoder(encCfg)
	}
	// Sampled: during a store outage every failed descriptor logs the same
	// warning, thousands of times a second under load. Each message is
	// logged 10 times a second, then once in 1,000.
	core := zapcore.NewSamplerWithOptions(zapcore.NewCore(enc, zapcore.AddSync(stderr), level), time.Second, 10, 1000)
	return zap.New(core), nil
}

// serviceOptions are the rls.Options that decide what a descriptor
// matches, its key, its state and its failure mode: the server and explain
// both start from them, so that explain shows what the server does.
func (o *options) serviceOptions(store *storeHandle) rls.Options {
	so := rls.Options{
		Store:          store.Store,
		Local:          store.local,
		MaxDelay:       o.maxDelay,
		StoreTimeout:   o.storeTimeout,
		StoreInProcess: store.inProcess,
		FailureMode:    o.failureMode,
		KeyPrefix:      o.redisKeyPrefix,
		HashValues:     o.hashValues,
		ShadowMode:     o.shadowMode,
	}
	o.answers.apply(&so)
	return so
}

// storeHandle is a store with what the server needs around it.
type storeHandle struct {
	limits.Store
	// local is the embedded store that decides for failure_mode local while
	// Redis fails; nil when the embedded store is the store.
	local limits.Store
	ping  func(context.Context) error // nil for the embedded store
	// inProcess is set for the embedded store (rls.Options.StoreInProcess).
	inProcess bool
	close     func() error
	// onConfigChange is called on every config change (rls.Options); nil
	// when nothing needs to hear of it.
	onConfigChange func()
}

func openStore(o *options, m *metrics.Metrics, log *zap.Logger) (*storeHandle, error) {
	mem := memory.New(memory.Options{MaxKeys: o.maxKeys})
	m.Registry.MustRegister(metrics.NewMemoryStoreCollector(func() (int, uint64, uint64) {
		st := mem.Stats()
		return st.Keys, st.Evictions, st.Expired
	}))
	if !o.usesRedis() {
		log.Info("using the embedded store: limits are per instance", zap.Int("max_keys", o.maxKeys))
		return &storeHandle{Store: mem, inProcess: true, close: mem.Close}, nil
	}
	seeds := splitAddrs(o.redisCluster)
	redis.SetLogger(redisLogger{log.Named("go-redis")})
	client, err := redisstore.NewClient(redisstore.ClientOptions{
		URL:              o.redisURL,
		Cluster:          seeds,
		Sentinel:         splitAddrs(o.redisSentinel),
		SentinelMaster:   o.redisSentinelMaster,
		SentinelPassword: o.redisSentinelPassword,
		Username:         o.redisUsername,
		Password:         o.redisPassword,
		TLS:              o.redisTLS,
		TLSCA:            o.redisTLSCA,
		TLSCert:          o.redisTLSCert,
		TLSKey:           o.redisTLSKey,
		TLSSkipHostname:  o.redisTLSSkipHostname,
		SentinelUsername: o.redisSentinelUsername,
		Timeout:          o.storeTimeout,
		PoolSize:         o.redisPoolSize,
	})
	if err != nil {
		mem.Close()
		return nil, err
	}
	s := redisstore.New(client, redisstore.Options{OnPipeline: m.RedisPipeline})
	warmUp(s.Ping, log)
	// Once Redis is found down for a store timeout, stop waiting on it:
	// answer by the failure mode at once, and probe it, first after one
	// store timeout, then backing off to twice a second. Each call's finding
	// sets rls_store_up when it changes. Not for a cluster: the breaker
	// sees one store, and calls that find one dead master would open it for
	// the keys of the live masters too; there, each call fails on its own
	// within -store-timeout.
	var store limits.Store = s
	if len(seeds) == 0 {
		store = breaker.New(s, breaker.Options{Timeout: o.storeTimeout, OnStoreUp: m.StoreUp, OnChange: func(open bool) {
			m.BreakerOpen(open)
			if open {
				log.Warn("store circuit open: answering by the failure mode without waiting for Redis")
			} else {
				log.Info("store circuit closed: Redis answers again")
			}
		}})
	}
	// Keys Redis refused are refused here until the reset Redis gave,
	// without a round trip (-over-limit-cache); every config change
	// forgets them.
	var onConfigChange func()
	if o.overLimitCache {
		c := overlimit.New(store, overlimit.Options{})
		store, onConfigChange = c, c.Clear
		m.Registry.MustRegister(metrics.NewOverLimitCacheCollector(func() (int, uint64) {
			return c.Len(), c.LocalAnswers()
		}))
	}
	log.Info("using Redis", zap.Bool("cluster", len(seeds) > 0), zap.Bool("sentinel", o.redisSentinel != ""),
		zap.Bool("over_limit_cache", o.overLimitCache))
	return &storeHandle{Store: store, local: mem, ping: s.Ping, onConfigChange: onConfigChange, close: func() error {
		s.Close() // the merged pipelines in flight, before their client
		mem.Close()
		return client.Close()
	}}, nil
}

// warmUpBound is how long the start waits for Redis to answer a first PING.
const warmUpBound = time.Second

// warmUp opens the first Redis connection before the service answers, so
// that the first decisions do not wait on a dial, a TLS handshake and AUTH
// that -store-timeout may not cover (they would take the failure mode).
// A Redis that does not answer is logged and left to the failure mode.
func warmUp(ping func(context.Context) error, log *zap.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), warmUpBound)
	defer cancel()
	if err := ping(ctx); err != nil {
		log.Warn("Redis does not answer yet: deciding by the failure mode until it does", zap.Error(err))
	}
}

func runServer(ctx context.Context, o *options, start *startConfig, log *zap.Logger) error {
	ls, err := listen(o, log)
	if err != nil {
		start.close()
		return err
	}
	return serveOn(ctx, o, start, log, ls)
}

// startConfig is the config the server starts with, and the watcher that
// reloads it.
type startConfig struct {
	cfg *config.Config
	// watch was started before cfg was read, so that a change made while
	// the server starts, after the read and before the watcher runs, is
	// reloaded rather than missed. Nil when the config cannot be watched:
	// reload is off.
	watch *watch.Watcher
	// xds is the xDS client that the config comes from instead (xds.go).
	xds *xdsSource
}

// loadConfig starts watching the config, then loads it: in that order, as
// watchAndLoad does for the TLS files, so that no change goes unseen. A
// config that cannot be watched is still served, without reload; that is
// logged only once the config has loaded, so that an invalid one is the
// plain error alone. loaded, when not nil, runs right after the load: a
// test's way into the window, until the watcher runs, that the watcher must
// cover.
func loadConfig(o *options, log *zap.Logger, loaded func()) (*startConfig, error) {
	if o.xds.server != "" {
		return startXDS(o, log)
	}
	w, werr := watch.New(log, watch.Options{}, o.configPath)
	cfg, err := o.loadOptions().Load(o.configPath)
	if loaded != nil {
		loaded()
	}
	if err != nil {
		if werr == nil {
			w.Close() //nolint:errcheck // nothing to do about a watch that fails to close
		}
		return nil, err
	}
	if werr != nil {
		log.Warn("config reload is off", zap.Error(werr))
		w = nil
	}
	if len(cfg.Domains) == 0 {
		// Only -allow-empty-config lets a directory load empty: say so, as
		// every request is allowed until a file appears.
		log.Warn("no limits files in the config directory: every request is allowed until one appears", zap.String("config", o.configPath))
	}
	return &startConfig{cfg: cfg, watch: w}, nil
}

// close stops the watcher when the server stops, or does not start; after
// the watcher's Run, which closes it too, it is harmless.
func (s *startConfig) close() {
	if s.xds != nil {
		s.xds.close()
	}
	if s.watch != nil {
		s.watch.Close() //nolint:errcheck // nothing to do about a watch that fails to close
	}
}

// listeners are the server's sockets. They are opened first, so that a
// test can ask for port 0 and learn the ports before serveOn runs.
type listeners struct {
	grpc, http net.Listener
	debug      net.Listener // nil when pprof is off
	stats      net.Listener // nil when envoyproxy/ratelimit's stats are off (stats.go)
}

func listen(o *options, log *zap.Logger) (*listeners, error) {
	ls := &listeners{}
	var err error
	if ls.grpc, err = net.Listen(grpcNetwork(o.grpcAddr)); err != nil {
		return nil, fmt.Errorf("-grpc-addr: %w", err)
	}
	if ls.http, err = net.Listen("tcp", o.httpAddr); err != nil {
		ls.grpc.Close()
		return nil, fmt.Errorf("-http-addr: %w", err)
	}
	if o.debugAddr != "" {
		if ls.debug, err = net.Listen("tcp", o.debugAddr); err != nil {
			log.Warn("pprof is off: cannot listen", zap.String("addr", o.debugAddr), zap.Error(err))
			ls.debug = nil
		}
	}
	if ls.stats, err = listenStats(o, log); err != nil {
		ls.close()
		return nil, err
	}
	return ls, nil
}

// close closes every listener; closing one that a server already closed
// does nothing.
func (ls *listeners) close() {
	for _, l := range []net.Listener{ls.grpc, ls.http, ls.debug, ls.stats} {
		if l != nil {
			l.Close()
		}
	}
}

// serveOn runs the server on ls, with the config and its watcher in start,
// until ctx is done, and closes them.
func serveOn(ctx context.Context, o *options, start *startConfig, log *zap.Logger, ls *listeners) error {
	defer ls.close()
	defer start.close()
	routeGRPCLog(log)
	var gtls *grpcTLS
	if o.grpcTLSCert != "" {
		var err error
		if gtls, err = newGRPCTLS(o, log); err != nil {
			return err
		}
		defer gtls.close()
	}
	m := metrics.New()
	if err := enableStats(o, m); err != nil { // before the first load, which they count
		return err
	}
	if start.xds == nil { // xds.go counts each snapshot
		m.Reload(true, time.Now())
	}
	grpcConns, httpConns := connectionBounds(o)
	grpcLis := newLimitListener(ls.grpc, grpcConns, func() { m.Refused(metrics.RefusedGRPCConnection) })
	httpLis := newLimitListener(ls.http, httpConns, func() { m.Refused(metrics.RefusedHTTPConnection) })
	store, err := openStore(o, m, log)
	if err != nil {
		return err
	}
	defer store.close() //nolint:errcheck // closing at exit

	so := o.serviceOptions(store)
	so.Logger, so.Metrics = log, m
	so.RefuseNegativeHits = !o.negativeHits
	if o.responseHeaders {
		so.Headers = append(so.Headers, rls.IETFHeaders)
	}
	if o.json429Body {
		so.Headers = append(so.Headers, rls.JSON429Body)
	}
	so.OnConfigChange = store.onConfigChange
	svc, err := rls.New(descriptors.NewIndex(start.cfg), so)
	if err != nil {
		return err
	}

	var inflight inflightCounter
	var watches watchDrain
	calls := newInflightLimit(int64(o.maxInFlight), func() { m.Refused(metrics.RefusedGRPCCall) })
	gopts := []grpc.ServerOption{
		// Envoy keeps a few long-lived HTTP/2 connections and may ping them;
		// do not punish that.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		grpc.ChainUnaryInterceptor(calls.unary, callStats(m), inflight.interceptor), // callStats: stats.go
		grpc.ChainStreamInterceptor(calls.stream, watches.interceptor),
		// Every call on a goroutine of its own grows a fresh stack, which
		// shows as runtime.newstack in a profile under load (BENCHMARKS.md
		// has the share). Workers keep their grown stacks; past this many
		// calls at once, grpc-go falls back to a goroutine per call.
		grpc.NumStreamWorkers(streamWorkers),
	}
	gopts = append(gopts, grpcBounds(o, calls)...)
	if gtls != nil {
		gopts = append(gopts, grpc.Creds(credentials.NewTLS(gtls.config)))
	}
	gs := grpc.NewServer(gopts...)
	rlsv3.RegisterRateLimitServiceServer(gs, svc)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	if o.grpcReflection {
		reflection.Register(gs)
	}
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus(rlsv3.RateLimitService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	start.serving(svc, hs, m) // xds.go: snapshots swapped into svc, health by -xds-healthy-needs-config

	var serving atomic.Bool
	serving.Store(true)
	api := httpapi.Handler(httpapi.Options{
		Limiter:     svc,
		Serving:     func() bool { return serving.Load() && start.healthy() },
		StorePing:   store.ping,
		ConfigLines: func() []string { return svc.Index().Config().Lines() },
		Gatherer:    m.Registry,
		Explainer:   explainer(o, svc), // nil with -explain-endpoint=false
		JSONRefunds: o.jsonRefunds && o.negativeHits,
	})
	if !o.jsonEndpoint {
		api = withoutJSON(api)
	}
	hsrv := newHTTPServer(api, o, o.httpReadTimeout, log)

	var wg sync.WaitGroup
	errc := make(chan error, 4)
	wg.Add(2)
	go func() { defer wg.Done(); errc <- serveGRPC(gs, grpcLis) }()
	go func() { defer wg.Done(); errc <- serveHTTP(hsrv, httpLis) }()

	var dsrv *http.Server
	if ls.debug != nil {
		dsrv = debugServer(o, log)
		wg.Add(1)
		go func() { defer wg.Done(); errc <- serveHTTP(dsrv, ls.debug) }()
	}

	stopStats := serveStats(o, m, ls.stats, log, &wg, errc)

	bg, stopBG := context.WithCancel(ctx)
	defer stopBG()
	if start.watch != nil {
		startReload(bg, &wg, start.watch, o.configPath, o.loadOptions(), svc, m, log)
	}
	if gtls != nil {
		gtls.run(bg, &wg)
	}
	if store.ping != nil {
		wg.Add(1)
		go func() { defer wg.Done(); watchStore(bg, store.ping, m, log) }()
	}
	log.Info("serving", zap.String("grpc", grpcLis.Addr().String()), zap.String("http", httpLis.Addr().String()),
		zap.String("config", o.configPath), zap.String("failure_mode", o.failureMode.String()),
		zap.Bool("grpc_tls", o.grpcTLSCert != ""), zap.Bool("grpc_mtls", o.grpcTLSClientCA != ""),
		zap.Bool("shadow_mode", o.shadowMode), zap.String("profile", so.Profile.Name))

	var runErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case runErr = <-errc:
	}

	// Tell health checkers first, then stop accepting and drain the calls
	// in flight, all within one -shutdown-timeout.
	deadline := time.Now().Add(o.shutdownTimeout)
	serving.Store(false)
	hs.Shutdown()
	// Health Watch streams never end by themselves; each ends once it has
	// told its watcher NOT_SERVING, so that GracefulStop can finish.
	watches.drain()
	stopBG()
	done := make(chan struct{})
	go func() { gs.GracefulStop(); close(done) }()
	if !inflight.waitIdle(done, deadline) {
		log.Warn("drain timed out: closing the remaining calls", zap.Duration("timeout", o.shutdownTimeout))
	} else {
		// Every decision is answered, but its last frames may still sit in
		// a connection's write queue, which Stop would drop; GracefulStop
		// closes each connection after flushing it. Other streams (a
		// reflection client) get a short grace, not the whole drain bound.
		grace := time.NewTimer(min(streamGrace, time.Until(deadline)))
		select {
		case <-done:
		case <-grace.C:
		}
		grace.Stop()
	}
	gs.Stop()
	<-done
	sctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	hsrv.Shutdown(sctx) //nolint:errcheck // best effort at exit
	if dsrv != nil {
		dsrv.Close()
	}
	stopStats()
	wg.Wait()
	return runErr
}

func serveGRPC(s *grpc.Server, l net.Listener) error {
	if err := s.Serve(l); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("grpc: %w", err)
	}
	return nil
}

func serveHTTP(s *http.Server, l net.Listener) error {
	if err := s.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http: %w", err)
	}
	return nil
}

// withoutJSON is the HTTP API without POST /json (-json-endpoint=false),
// for an -http-addr that callers who must not decide can reach: /json
// answers 404 as an unknown path does.
func withoutJSON(api http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/json", http.NotFoundHandler())
	mux.Handle("/", api)
	return mux
}

// debugServer serves pprof. It is the only server that does: the HTTP API
// on -http-addr never does, since the debug address is meant to stay on
// loopback.
func debugServer(o *options, log *zap.Logger) *http.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", redactedCmdline) // secrets.go
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return newHTTPServer(mux, o, debugWriteTimeout, log)
}

// startReload reloads the config from path whenever w, its watcher, calls
// back: when the contents of its file or directory change, and once a change
// written in place has settled, so that a file caught half written is not
// served. A config that does not load is refused with the same
// message as at startup, and the last good one stays in effect. A change
// that leaves the files' bytes as they were (a touch, a ConfigMap update to
// the same data) is no reload: the watcher does not call back, so the
// snapshot and the over-limit cache stay, and nothing is logged or counted.
func startReload(ctx context.Context, wg *sync.WaitGroup, w *watch.Watcher, path string, lo config.Options, svc *rls.Service, m *metrics.Metrics, log *zap.Logger) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		w.Run(ctx, func() {
			cfg, err := lo.Load(path)
			if err != nil {
				m.Reload(false, time.Now())
				log.Error("config reload refused, keeping the last good config", zap.String("error", err.Error()))
				return
			}
			svc.SetIndex(descriptors.NewIndex(cfg))
			m.Reload(true, time.Now())
			log.Info("config reloaded", zap.Int("domains", len(cfg.Domains)))
		})
	}()
}

// watchStore keeps the store-up gauge current while no calls come (the
// breaker sets it from the calls), and on a cluster.
func watchStore(ctx context.Context, ping func(context.Context) error, m *metrics.Metrics, log *zap.Logger) {
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	wasUp := true
	for {
		start := time.Now()
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := ping(pctx)
		cancel()
		m.StoreChecked(start, err == nil)
		if (err == nil) != wasUp {
			if err != nil {
				log.Warn("store unreachable", zap.Error(err))
			} else {
				log.Info("store reachable again")
			}
			wasUp = err == nil
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// redisLogger routes go-redis's own messages (failed dials during an
// outage) to the service's logger instead of the standard library's.
type redisLogger struct{ log *zap.Logger }

func (l redisLogger) Printf(_ context.Context, format string, v ...any) {
	l.log.Debug(fmt.Sprintf(format, v...))
}

// streamWorkers is how many goroutines serve gRPC calls. Calls wait on
// Redis, so more than the cores are busy at once; idle workers cost only
// their stacks.
const streamWorkers = 256
