package server

import (
	"fmt"
	"log"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zapgrpc"
	"google.golang.org/grpc/grpclog"
)

// This file routes the server libraries' own logs (net/http's, grpc-go's)
// through the service's logger, within a budget.

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
