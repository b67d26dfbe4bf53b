package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	"github.com/envoy-rls/envoy-rls/internal/grpcguard"
	"github.com/envoy-rls/envoy-rls/internal/httpapi"
	"github.com/envoy-rls/envoy-rls/internal/metrics"
	"github.com/envoy-rls/envoy-rls/internal/statsd"
	"github.com/envoy-rls/envoy-rls/internal/tracing"
	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/rlqs"
	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

// Main is the server command: it runs the server until SIGTERM or SIGINT
// and returns the exit status: 1 when the config does not load or the
// server stops on an error, 2 when the logger cannot be made. Its log goes
// to stderr, and so does a config that does not load, as one plain line
// (not a JSON log).
func Main(o *Options, stderr io.Writer) int {
	log, err := newLogger(o, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "envoy-rls:", err)
		return 2
	}
	defer log.Sync() //nolint:errcheck // nothing to do about a failed flush at exit
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	err = Run(ctx, o, log)
	var cfgErr *ConfigError
	switch {
	case errors.As(err, &cfgErr):
		fmt.Fprintln(stderr, cfgErr.Err)
		return 1
	case err != nil:
		log.Error("envoy-rls stopped", zap.Error(err))
		fmt.Fprintln(stderr, "envoy-rls:", err)
		return 1
	}
	return 0
}

// ConfigError is Run's error when the limits do not load at the start.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// Run runs the server o says, logging to log, until ctx is done, then
// drains it. The config comes before the listeners, and the service
// answers only once it is loaded: limits that do not load are a
// *ConfigError, and ctx done before the first xDS snapshot is no error.
func Run(ctx context.Context, o *Options, log *zap.Logger) error {
	for _, w := range o.envWarnings {
		log.Warn(w)
	}
	src, err := openSource(o, log, nil)
	if err != nil {
		return &ConfigError{err}
	}
	if !src.ready(ctx) { // stopped before the first xDS snapshot
		src.close()
		return nil
	}
	return runServer(ctx, o, src, log)
}

func newLogger(o *Options, stderr io.Writer) (*zap.Logger, error) {
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

func runServer(ctx context.Context, o *Options, src source, log *zap.Logger) error {
	ls, err := listen(o, log)
	if err != nil {
		src.close()
		return err
	}
	return serveOn(ctx, o, src, log, ls)
}

// serveOn runs the server on ls, with the limits from src, until ctx is
// done, and closes them.
func serveOn(ctx context.Context, o *Options, src source, log *zap.Logger, ls *listeners) error {
	defer ls.close()
	defer src.close()
	routeGRPCLog(log)
	// One place in errc for each server that may stop: gRPC, HTTP, pprof,
	// the stats and the admin endpoints.
	r := &running{o: o, src: src, log: log, ls: ls, errc: make(chan error, 5)}
	defer r.close()
	if err := r.build(); err != nil {
		return err
	}
	bg, stopBG := context.WithCancel(ctx)
	defer stopBG()
	r.serve(bg)
	var runErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case runErr = <-r.errc:
	}
	r.drain(stopBG)
	return runErr
}

// running is one run of the server: its parts, built by build in the
// order they depend on each other, started by serve, stopped by drain,
// released by close.
type running struct {
	o   *Options
	src source
	log *zap.Logger
	ls  *listeners

	gtls             *grpcTLS         // nil without -grpc-tls-cert
	tracing          *tracing.Tracing // nil without -tracing
	m                *metrics.Metrics
	grpcLis, httpLis net.Listener // ls's, bounded
	store            *storeHandle
	svc              *rls.Service
	rlqs             *rlqs.Service // nil with -rlqs=false
	gs               *grpc.Server
	hs               *health.Server
	// guard bounds the gRPC server; the drain waits on it for the
	// decisions in flight, and ends the health Watch streams through it.
	guard *grpcguard.Guard
	// serving is what /healthz says until the drain begins; storeRefused
	// whether Redis refuses the settings, as the store's watch last found.
	serving      atomic.Bool
	storeRefused atomic.Bool
	healthMu     sync.Mutex   // updateHealth's
	hsrv, dsrv   *http.Server // dsrv nil when pprof is off
	admin        *admin       // nil when GET /top, POST /reset and GET /rlqs are off
	usage        *usage       // nil when GET /v1/usage is off
	forwardAuth  *forwardAuth // nil without -forward-auth-config
	stopStats    func()
	pusher       *statsd.Pusher // nil without -statsd-addr

	wg   sync.WaitGroup
	errc chan error
}

// build makes the parts, first those whose failure stops the start: the
// TLS files, the stats (before the first load, which they count), the
// store and the service.
func (r *running) build() error {
	o := r.o
	if o.grpcTLSCert != "" {
		gtls, err := newGRPCTLS(o, r.log)
		if err != nil {
			return err
		}
		r.gtls = gtls
	}
	r.m = metrics.New()
	if err := enableStats(o, r.m, r.log); err != nil {
		return err
	}
	pusher, err := newPusher(o, r.m, r.log) // statsd.go
	if err != nil {
		return err
	}
	r.pusher = pusher
	r.src.count(r.m)
	grpcConns, _ := grpcguard.ConnectionBounds(o.grpcMaxConnections, o.httpMaxConnections)
	r.grpcLis = grpcguard.BoundListener(r.ls.grpc, grpcConns, func() { r.m.Refused(metrics.RefusedGRPCConnection) })
	r.httpLis = boundedHTTP(o, r.m, r.ls.http)
	tr, err := startTracing(&o.tracing, r.m, r.log) // tracing.go
	if err != nil {
		return err
	}
	r.tracing = tr
	var tracer trace.Tracer // nil: no tracing
	if r.tracing != nil {
		tracer = r.tracing.Tracer(tracing.ServerScope)
	}
	store, err := openStore(o, r.m, r.log, tracer, r.limitsInForce)
	if err != nil {
		return err
	}
	r.store = store
	so := o.serviceOptions(store, r.log, r.m)
	so.Tracer = tracer
	if r.svc, err = rls.New(descriptors.NewIndex(r.src.config()), so); err != nil {
		return err
	}
	if r.rlqs, err = newRLQS(o, r.svc, r.store, r.m, r.log); err != nil { // rlqs.go
		return err
	}
	if r.admin, err = newAdmin(o, r.svc, r.rlqs, r.m, r.log); err != nil { // admin.go
		return err
	}
	if r.usage, err = newUsage(o, r.log); err != nil { // usage.go
		return err
	}
	if r.forwardAuth, err = newForwardAuth(o, r.m, r.log); err != nil { // forwardauth.go
		return err
	}
	r.grpcServer()
	r.httpServer()
	return nil
}

// grpcServer makes the gRPC server: the service, its bounds (package
// grpcguard), health and reflection.
func (r *running) grpcServer() {
	o := r.o
	r.guard = grpcguard.New(r.guardOptions())
	creds := insecure.NewCredentials()
	if r.gtls != nil {
		creds = credentials.NewTLS(r.gtls.config)
	}
	unary := append(tracingInterceptors(r.tracing), r.guard.Unary)
	if r.m.RatelimitOn() { // decided at start-up (enableStats): off, no call pays for the interceptor
		unary = append(unary, callStats(r.m)) // stats.go
	}
	gopts := append(r.guard.ServerOptions(creds),
		// Envoy keeps a few long-lived HTTP/2 connections and may ping them;
		// do not punish that.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(r.guard.Stream),
		// Every call on a goroutine of its own grows a fresh stack, which
		// shows as runtime.newstack in a profile under load (BENCHMARKS.md
		// has the share). Workers keep their grown stacks; past this many
		// calls at once, grpc-go falls back to a goroutine per call.
		grpc.NumStreamWorkers(streamWorkers),
	)
	r.gs = grpc.NewServer(gopts...)
	rlsv3.RegisterRateLimitServiceServer(r.gs, r.svc)
	if r.rlqs != nil {
		rlqspb.RegisterRateLimitQuotaServiceServer(r.gs, r.rlqs)
	}
	r.hs = health.NewServer()
	healthpb.RegisterHealthServer(r.gs, r.hs)
	if o.grpcReflection {
		reflection.Register(r.gs)
	}
	r.updateHealth()
}

// guardOptions are the gRPC bounds the flags say, each refusal counted.
func (r *running) guardOptions() grpcguard.Options {
	o := r.o
	g := grpcguard.Options{
		MaxInFlight:           o.maxInFlight,
		MaxInFlightPerConn:    o.maxInFlightPerConn,
		MaxOpenStreams:        o.maxOpenStreams,
		MaxStreams:            o.grpcMaxStreams,
		MaxMessageBytes:       o.grpcMaxMessageBytes,
		MaxResets:             o.grpcMaxResets,
		MaxConnectionIdle:     o.grpcMaxConnectionIdle,
		MaxConnectionAge:      o.grpcMaxConnectionAge,
		MaxConnectionAgeGrace: o.shutdownTimeout,
		OnRefusedCall:         func() { r.m.Refused(metrics.RefusedGRPCCall) },
		OnResets:              func() { r.m.Refused(metrics.RefusedGRPCResets) },
	}
	if r.rlqs != nil {
		// While every stream place is taken, a new stream closes the
		// longest-silent RLQS stream.
		g.Evict = r.rlqs.Evict
	}
	return g
}

// httpServer makes the server of the HTTP endpoints (package httpapi).
func (r *running) httpServer() {
	o := r.o
	r.serving.Store(true)
	bodies := httpapi.NewBodyBudget(httpapi.DefaultBodyBudget)
	r.m.JSONBodies(bodies.Held)
	ho := httpapi.Options{
		Limiter:      r.svc,
		Serving:      func() bool { return r.serving.Load() && r.src.healthy() },
		StorePing:    r.store.ping,
		ConfigLines:  func() []string { return r.svc.Index().Config().Lines() },
		ConfigHealth: func() string { return configHealth(r.svc.Index()) },
		Gatherer:     r.m.Registry,
		Explainer:    explainer(o, r.svc), // nil with -explain-endpoint=false
		JSONRefunds:  o.jsonRefunds && o.negativeHits,
		Bodies:       bodies,
		BodyRefused:  func() { r.m.Refused(metrics.RefusedJSONBody) },

		BrowserRefused: r.m.BrowserRefused,
	}
	r.usage.wire(&ho, r.svc)       // usage.go
	r.forwardAuth.wire(&ho, r.svc) // forwardauth.go
	api := httpapi.Handler(ho)
	if !o.jsonEndpoint {
		api = withoutJSON(api)
	}
	api = withIndex(r.admin.onHTTP(api), r.index()) // index.go
	r.hsrv = newHTTPServer(api, o, o.httpReadTimeout, r.log)
}

// serve starts the servers, and the background work that ends with bg:
// the config's loads, the TLS files' reload, the store's watch.
func (r *running) serve(bg context.Context) {
	o := r.o
	// Each config the source puts in force from now on goes to the
	// service, and health follows; one that came since build, before the
	// first call is answered.
	r.src.serve(bg, &r.wg, r.svc, r.updateHealth)
	r.goServe(func() error { return serveGRPC(r.gs, r.grpcLis) })
	r.goServe(func() error { return serveHTTP(r.hsrv, r.httpLis) })
	if r.ls.debug != nil {
		r.dsrv = debugServer(o, r.log)
		r.goServe(func() error { return serveHTTP(r.dsrv, r.ls.debug) })
	}
	stopFamilies, stopPush := serveStats(o, r.m, r.ls.stats, r.log, &r.wg, r.errc), startPush(r.pusher)
	r.stopStats = func() { stopPush(); stopFamilies() } // after the last decision: its stats are pushed
	r.admin.serve(bg, o, r.ls.admin, r.m, &r.wg, r.errc)
	r.usage.serve(bg, &r.wg)
	r.forwardAuth.serve(bg, &r.wg)
	if r.gtls != nil {
		r.gtls.run(bg, &r.wg)
	}
	if r.store.ping != nil {
		r.wg.Add(1)
		go func() { defer r.wg.Done(); watchStore(bg, r.store.ping, r.m, r.log, r.storeRefusedChanged) }()
	}
	r.log.Info("serving", zap.String("grpc", r.grpcLis.Addr().String()), zap.String("http", r.httpLis.Addr().String()),
		zap.String("config", r.src.name()), zap.String("failure_mode", o.failureMode.String()),
		zap.Bool("grpc_tls", o.grpcTLSCert != ""), zap.Bool("grpc_mtls", o.grpcTLSClientCA != ""),
		zap.Bool("shadow_mode", o.shadowMode), zap.String("profile", o.answers.profile().Name))
}

// goServe runs a server's Serve, its error to errc.
func (r *running) goServe(serve func() error) {
	r.wg.Add(1)
	go func() { defer r.wg.Done(); r.errc <- serve() }()
}

// drain tells health checkers first, then stops accepting and drains the
// calls in flight, all within one -shutdown-timeout; stopBG ends the
// background work once nothing new is accepted.
func (r *running) drain(stopBG func()) {
	deadline := time.Now().Add(r.o.shutdownTimeout)
	r.serving.Store(false)
	r.hs.Shutdown()
	// Health Watch streams never end by themselves; each ends once it has
	// told its watcher NOT_SERVING, so that GracefulStop can finish.
	r.guard.DrainWatches()
	if r.rlqs != nil {
		r.rlqs.Drain() // RLQS streams too: Envoy reconnects elsewhere
	}
	stopBG()
	r.stopGRPC(deadline)
	sctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	r.hsrv.Shutdown(sctx) //nolint:errcheck // best effort at exit
	if r.dsrv != nil {
		r.dsrv.Close()
	}
	r.stopStats()
	r.admin.stop()
	r.wg.Wait()
}

// stopGRPC stops the gRPC server once the decisions in flight are
// answered, or at deadline.
func (r *running) stopGRPC(deadline time.Time) {
	done := make(chan struct{})
	go func() { r.gs.GracefulStop(); close(done) }()
	if !r.guard.WaitIdle(done, deadline) {
		r.log.Warn("drain timed out: closing the remaining calls", zap.Duration("timeout", r.o.shutdownTimeout))
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
	r.gs.Stop()
	<-done
}

// close releases what build made that outlives the servers: the store,
// then the TLS files' watch.
func (r *running) close() {
	if r.store != nil {
		r.store.close() //nolint:errcheck // closing at exit
	}
	stopTracing(r.tracing) // the spans of the last calls
	if r.gtls != nil {
		r.gtls.close()
	}
	r.admin.close()
	r.usage.close()
	r.forwardAuth.close()
}

func serveGRPC(s *grpc.Server, l net.Listener) error {
	if err := s.Serve(l); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("grpc: %w", err)
	}
	return nil
}

// streamGrace is how long shutdown waits, once every unary call is
// answered, for the connections to close by themselves before closing them.
const streamGrace = 500 * time.Millisecond

// streamWorkers is how many goroutines serve gRPC calls. Calls wait on
// Redis, so more than the cores are busy at once; idle workers cost only
// their stacks.
const streamWorkers = 256
