package server

import (
	"context"
	"fmt"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zapgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/grpclog"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
)

// This file holds the bounds around the decisions: how many connections
// each listener keeps, how long an idle or slow one may stay, how large and
// how many requests may be read at once, and how often the server
// libraries may log their own errors. Without them a client that opens
// connections and sends nothing, or many large requests at once, exhausts
// the process's file descriptors or memory, and with them every healthy
// client too.

// A request to the HTTP API is small (MaxBodyBytes) and answered at once,
// so a client that takes longer than -http-read-timeout to send it, or to
// read the answer, is not one to wait for; a pprof profile streams for as
// long as it was asked to (30 s by default), so the debug server may write
// for longer.
const (
	httpReadHeaderTimeout = 10 * time.Second
	debugWriteTimeout     = 5 * time.Minute
	httpMaxHeaderBytes    = 64 << 10
)

// grpcHandshakeTimeout bounds how long a new gRPC connection may take to
// finish its TLS and HTTP/2 handshakes (grpc-go's default is 2 minutes).
const grpcHandshakeTimeout = 10 * time.Second

// newHTTPServer returns a server of h with the HTTP bounds of o (writing
// for up to writeTimeout), whose own error log (accept errors, TLS
// handshake failures) goes to log.
func newHTTPServer(h http.Handler, o *Options, writeTimeout time.Duration, log *zap.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: min(httpReadHeaderTimeout, o.httpReadTimeout),
		ReadTimeout:       o.httpReadTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       o.httpIdleTimeout,
		MaxHeaderBytes:    httpMaxHeaderBytes,
		ErrorLog:          serverErrorLog(log, "http"),
	}
}

// grpcBounds are the server options that bound what gRPC clients can make
// the service hold: idle connections, slow handshakes, message sizes,
// streams per connection and requests in flight.
func grpcBounds(o *Options, inflight *inflightLimit) []grpc.ServerOption {
	ka := keepalive.ServerParameters{MaxConnectionIdle: o.grpcMaxConnectionIdle}
	if o.grpcMaxConnectionAge > 0 {
		// A client told to go away reconnects, possibly to a replica that
		// started since; its calls in flight get the drain bound to finish.
		ka.MaxConnectionAge = o.grpcMaxConnectionAge
		ka.MaxConnectionAgeGrace = o.shutdownTimeout
	}
	return []grpc.ServerOption{
		grpc.KeepaliveParams(ka),
		grpc.ConnectionTimeout(grpcHandshakeTimeout),
		grpc.MaxRecvMsgSize(o.grpcMaxMessageBytes),
		grpc.MaxConcurrentStreams(uint32(o.grpcMaxStreams)),
		grpc.InTapHandle(inflight.admit),
	}
}

// inflightLimit bounds the gRPC calls in flight, across all connections
// (max) and on each one (perConn). A call is counted from the moment its
// request message has arrived and decoded until its handler returns: a
// stream whose message is slow to come, or never comes, or that its client
// resets first, holds no place, so that streams opened and left waiting
// cannot lock the other callers out. Such streams are bounded per
// connection by -grpc-max-streams instead, and hold only what their
// client sent. A call over a bound is refused with RESOURCE_EXHAUSTED;
// Envoy then applies its own failure_mode_deny, as for any error of the
// service. While the bound is full, a new call is refused at its headers
// already, before its message is read.
//
// The place is taken and given back by the interceptors, on the call's
// own goroutine, so that nothing has to look for streams that ended
// without a handler.
type inflightLimit struct {
	max, perConn int64
	current      atomic.Int64
	// onRefuse, if set, counts a refused call.
	onRefuse func()
	// evict, if set, closes a call to make room for a new one while max
	// are in flight, and returns a channel closed once that call's
	// handler has returned; nil when no call may be closed (rlqs.Evict:
	// the longest-silent RLQS stream).
	evict func() <-chan struct{}

	mu sync.Mutex
	// conns holds the calls in flight of each connection that has any,
	// under the connection's peer: grpc-go gives every stream of a
	// connection the one peer it made for the connection.
	conns map[*peer.Peer]int64
}

func newInflightLimit(max, perConn int64, onRefuse func()) *inflightLimit {
	return &inflightLimit{max: max, perConn: min(perConn, max), onRefuse: onRefuse, conns: make(map[*peer.Peer]int64)}
}

// streamsPerConn is how many streaming calls one connection may hold open
// (of -max-open-streams). A streaming call (a health Watch, reflection)
// lasts as long as its client wants, so it is bounded apart from the
// decisions, which are unary: were streams counted in -max-in-flight, a
// few connections opening their share of Watch streams would hold the
// whole bound and every decision would be refused. A gRPC health client
// opens one Watch per connection; sixteen leaves room to spare.
const streamsPerConn = 16

// perConnInFlight is the share of -max-in-flight one connection may hold:
// the flag's, or an eighth of the bound (at least one call).
func perConnInFlight(o *Options) int {
	if o.maxInFlightPerConn > 0 {
		return o.maxInFlightPerConn
	}
	return max(o.maxInFlight/8, 1)
}

var errTooManyCalls = status.Error(codes.ResourceExhausted, "too many calls in flight")

// messageWait is how long a call's request message may take to arrive
// when its client set no shorter deadline (Envoy always sets one, of tens
// of milliseconds): a stream still waiting then is ended (CANCELLED), so
// that one left open without its message does not hold its place in
// -grpc-max-streams, and a goroutine, for as long as its connection lives.
const messageWait = 10 * time.Second

// messageTimerKey carries, in a call's context, the timer that ends it
// if its message has not arrived within messageWait.
type messageTimerKey struct{}

// admit is the server's tap: it runs on the connection's reader before the
// stream is created, and refuses the call at once while the bound is full.
// It takes no place: the call has no message yet. The context it returns
// is the stream's: it ends after messageWait unless the message has come.
func (l *inflightLimit) admit(ctx context.Context, _ *tap.Info) (context.Context, error) {
	if l.current.Load() >= l.max {
		return ctx, l.refuse()
	}
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) <= messageWait {
		return ctx, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	return context.WithValue(ctx, messageTimerKey{}, time.AfterFunc(messageWait, cancel)), nil
}

// arrived stops the messageWait timer of the call of ctx, if it has one:
// its message has come.
func arrived(ctx context.Context) {
	if t, ok := ctx.Value(messageTimerKey{}).(*time.Timer); ok {
		t.Stop()
	}
}

func (l *inflightLimit) refuse() error {
	if l.onRefuse != nil {
		l.onRefuse()
	}
	return errTooManyCalls
}

// take counts a call of the connection of ctx if both bounds have room
// for it, and returns the connection to give it back to.
func (l *inflightLimit) take(ctx context.Context) (*peer.Peer, bool) {
	if l.current.Add(1) > l.max {
		l.current.Add(-1)
		return nil, false
	}
	p, _ := peer.FromContext(ctx)
	l.mu.Lock()
	n := l.conns[p]
	if n >= l.perConn {
		l.mu.Unlock()
		l.current.Add(-1)
		return nil, false
	}
	l.conns[p] = n + 1
	l.mu.Unlock()
	return p, true
}

// evictWait bounds how long a new stream waits for the handler of the
// stream evicted for it to return and give its place back: it returns as
// soon as it sees its context end.
const evictWait = time.Second

// takeOrEvict is take, which, while max calls are in flight, closes one
// that evict picks and takes its place once given back. Another new call
// may take the place first: a few evictions are tried, then the call is
// refused.
func (l *inflightLimit) takeOrEvict(ctx context.Context) (*peer.Peer, bool) {
	for range 3 {
		p, ok := l.take(ctx)
		if ok || l.evict == nil || l.current.Load() < l.max || l.connFull(ctx) {
			// Room, or a refusal that no eviction elsewhere would lift.
			return p, ok
		}
		done := l.evict()
		if done == nil {
			return nil, false
		}
		deadline := time.NewTimer(evictWait)
		select {
		case <-done:
		case <-deadline.C:
		case <-ctx.Done():
		}
		deadline.Stop()
		// The evicted handler has returned; its interceptor gives its
		// place back just after.
		for range 100 {
			if l.current.Load() < l.max || ctx.Err() != nil {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	return l.take(ctx)
}

// connFull reports whether the connection of ctx holds its share.
func (l *inflightLimit) connFull(ctx context.Context) bool {
	p, _ := peer.FromContext(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.conns[p] >= l.perConn
}

// give gives back a call that take counted for the connection p.
func (l *inflightLimit) give(p *peer.Peer) {
	l.mu.Lock()
	if n := l.conns[p] - 1; n > 0 {
		l.conns[p] = n
	} else {
		delete(l.conns, p)
	}
	l.mu.Unlock()
	l.current.Add(-1)
}

// unary counts a call from its decoded request (grpc-go decodes it before
// the interceptors) until its handler returns.
func (l *inflightLimit) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	arrived(ctx)
	p, ok := l.take(ctx)
	if !ok {
		return nil, l.refuse()
	}
	defer l.give(p)
	return handler(ctx, req)
}

// stream counts a streaming call from its first request message until
// its handler returns (under -max-open-streams: a limit of its own, apart
// from the unary calls').
func (l *inflightLimit) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	cs := &countedStream{ServerStream: ss, l: l}
	defer cs.end()
	return handler(srv, cs)
}

// countedStream takes its call's place when its first message arrives,
// and gives it back when its handler returns. A handler may receive on a
// goroutine of its own (RLQS does, to watch the stream's context and the
// drain at once) and return while that goroutine is still in RecvMsg: the
// first message arriving after the end takes no place, else the place
// would be held, with no handler to give it back, for the process's life.
type countedStream struct {
	grpc.ServerStream
	l       *inflightLimit
	counted atomic.Bool // read without mu by RecvMsg's own caller

	mu    sync.Mutex // guards conn and ended, and counted's change
	conn  *peer.Peer
	ended bool
}

func (s *countedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil || s.counted.Load() {
		return err
	}
	arrived(s.Context())
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return status.Error(codes.Canceled, "the call has ended")
	}
	p, ok := s.l.takeOrEvict(s.Context())
	if !ok {
		return s.l.refuse()
	}
	s.conn = p
	s.counted.Store(true)
	return nil
}

// end gives back the place of a stream whose handler returned.
func (s *countedStream) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended = true
	if s.counted.Load() {
		s.l.give(s.conn)
	}
}

// limitListener accepts at most max connections open at once. Past that, a
// new connection is accepted and closed at once: its client fails fast
// instead of waiting in the kernel's backlog, and the process keeps its
// descriptors for the connections it serves. Each listener has its own
// bound, so a flood of gRPC connections leaves the health checks on the
// HTTP listener answered.
type limitListener struct {
	net.Listener
	max  int64
	open atomic.Int64
	// onRefuse, if set, counts a refused connection.
	onRefuse func()
}

func newLimitListener(l net.Listener, max int, onRefuse func()) net.Listener {
	if max <= 0 {
		return l
	}
	return &limitListener{Listener: l, max: int64(max), onRefuse: onRefuse}
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= l.max {
			return &limitConn{Conn: c, release: func() { l.open.Add(-1) }}, nil
		}
		l.open.Add(-1)
		c.Close()
		if l.onRefuse != nil {
			l.onRefuse()
		}
	}
}

// limitConn gives its place back to its listener once, on its first Close.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// serverLogBudget is how many lines per second the server libraries may log
// of their own; the rest of a second's lines are dropped. An error that
// repeats for every connection (accept failing with too many open files, a
// TLS handshake refused) says all it has to say in a few lines, and must
// not drown the service's own log.
const serverLogBudget = 5

// serverErrorLog is a standard logger for a server library's own errors,
// written through log as structured warnings (from names the library),
// within serverLogBudget lines a second.
func serverErrorLog(log *zap.Logger, from string) *log.Logger {
	l := budgeted(log).With(zap.String("from", from))
	std, err := zap.NewStdLogAt(l, zapcore.WarnLevel)
	if err != nil {
		// Only an invalid level fails, and WarnLevel is valid.
		return zap.NewStdLog(l)
	}
	return std
}

// grpcLog is grpc-go's process-wide logger. grpclog's setter must not race
// with gRPC's own use of it, so it is set once, before anything runs
// (init), to this logger, which writes through whichever zap logger
// routeGRPCLog gave it last: none (nothing logged) until a server starts.
var grpcLog = func() *swappableGRPCLog {
	g := &swappableGRPCLog{}
	g.current.Store(zapgrpc.NewLogger(zap.NewNop()))
	grpclog.SetLoggerV2(g)
	return g
}()

// routeGRPCLog sends grpc-go's warnings and errors through log, within the
// budget; its informational lines are dropped, as grpc-go's default does.
func routeGRPCLog(log *zap.Logger) {
	l := budgeted(log).With(zap.String("from", "grpc"))
	if l.Core().Enabled(zapcore.InfoLevel) {
		l = l.WithOptions(zap.IncreaseLevel(zapcore.WarnLevel))
	}
	grpcLog.current.Store(zapgrpc.NewLogger(l))
}

// swappableGRPCLog is a grpclog.LoggerV2 whose zap logger can be replaced
// while gRPC runs.
type swappableGRPCLog struct {
	current atomic.Pointer[zapgrpc.Logger]
}

var _ grpclog.LoggerV2 = (*swappableGRPCLog)(nil)

func (g *swappableGRPCLog) l() *zapgrpc.Logger                  { return g.current.Load() }
func (g *swappableGRPCLog) Info(args ...any)                    { g.l().Info(args...) }
func (g *swappableGRPCLog) Infoln(args ...any)                  { g.l().Infoln(args...) }
func (g *swappableGRPCLog) Infof(format string, args ...any)    { g.l().Infof(format, args...) }
func (g *swappableGRPCLog) Warning(args ...any)                 { g.warn(fmt.Sprint(args...)) }
func (g *swappableGRPCLog) Warningln(args ...any)               { g.warn(fmt.Sprintln(args...)) }
func (g *swappableGRPCLog) Warningf(format string, args ...any) { g.warn(fmt.Sprintf(format, args...)) }
func (g *swappableGRPCLog) Error(args ...any)                   { g.l().Error(args...) }
func (g *swappableGRPCLog) Errorln(args ...any)                 { g.l().Errorln(args...) }
func (g *swappableGRPCLog) Errorf(format string, args ...any)   { g.l().Errorf(format, args...) }
func (g *swappableGRPCLog) Fatal(args ...any)                   { g.l().Fatal(args...) }
func (g *swappableGRPCLog) Fatalln(args ...any)                 { g.l().Fatalln(args...) }
func (g *swappableGRPCLog) Fatalf(format string, args ...any)   { g.l().Fatalf(format, args...) }
func (g *swappableGRPCLog) V(level int) bool                    { return g.l().V(level) }

// warn logs grpc-go's warning msg, but as one of its informational lines
// (dropped) when it is one of the routine ones below: the clients of this
// process and the clients of its server are someone else's to report.
func (g *swappableGRPCLog) warn(msg string) {
	msg = strings.TrimSuffix(msg, "\n")
	for _, routine := range routineGRPCWarnings {
		if strings.Contains(msg, routine) {
			g.l().Info(msg)
			return
		}
	}
	g.l().Warning(msg)
}

// routineGRPCWarnings are the warnings of grpc-go's that are no news:
//   - "transport is closing": a client (an Envoy ending its RLQS stream,
//     a health checker) closed its connection while the server wrote a
//     call's final status: a client gone away;
//   - "addrConn.createTransport failed to connect": a client connection
//     of this process (the OTLP exporter's, the xDS client's) cannot
//     connect, which its owner logs at its own pace (tracing once a
//     minute, the xDS client within its budget), where grpc-go said it
//     again at every reconnection, in the millisecond of the owner's line.
var routineGRPCWarnings = []string{"transport is closing", "addrConn.createTransport failed to connect"}

// budgeted returns log limited to serverLogBudget entries a second.
func budgeted(log *zap.Logger) *zap.Logger {
	b := &logBudget{}
	return log.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return &budgetCore{Core: c, budget: b} }))
}

// logBudget counts the entries of the current second.
type logBudget struct {
	second atomic.Int64
	used   atomic.Int64
}

func (b *logBudget) take(now time.Time) bool {
	s := now.Unix()
	if old := b.second.Load(); old != s && b.second.CompareAndSwap(old, s) {
		b.used.Store(0)
	}
	return b.used.Add(1) <= serverLogBudget
}

// budgetCore is a core that writes at most the budget's entries a second.
type budgetCore struct {
	zapcore.Core
	budget *logBudget
}

func (c *budgetCore) With(fields []zapcore.Field) zapcore.Core {
	return &budgetCore{Core: c.Core.With(fields), budget: c.budget}
}

func (c *budgetCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if !c.Enabled(e.Level) || !c.budget.take(e.Time) {
		return ce
	}
	return ce.AddCore(e, c)
}

// defaultMaxMessageBytes is -grpc-max-message-bytes' default: what the
// largest request the service accepts needs (MaxDescriptors descriptors of
// MaxEntries entries, each key and value up to a few hundred bytes, a
// header value's usual size), with room to spare. Envoy's requests are a
// few hundred bytes.
const defaultMaxMessageBytes = 256 << 10

// minMessageBytes is the least -grpc-max-message-bytes may be: one
// descriptor of a few long entries.
const minMessageBytes = 4 << 10

// connectionBounds returns the connection bounds in force: the flags', or
// shares of the process's file descriptor limit, less a reserve for what
// else the process opens (Redis connections, the limits files, the
// listeners themselves).
func connectionBounds(o *Options) (grpcConns, httpConns int) {
	grpcConns, httpConns = o.grpcMaxConnections, o.httpMaxConnections
	if grpcConns > 0 && httpConns > 0 {
		return grpcConns, httpConns
	}
	usable := fdLimit() - fdReserve
	if usable < 64 {
		usable = 64
	}
	if grpcConns == 0 {
		grpcConns = usable * 3 / 4
	}
	if httpConns == 0 {
		httpConns = max(usable/8, 16)
	}
	return grpcConns, httpConns
}

// fdReserve is kept out of the connection bounds for the process's other
// files: a Redis pool per node, the limits files and their watches.
const fdReserve = 256

// fdLimit is the number of file descriptors the process may open (Go raises
// the soft limit to the hard one at start).
func fdLimit() int {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil || l.Cur > 1<<30 {
		return 1 << 16
	}
	return int(l.Cur)
}
