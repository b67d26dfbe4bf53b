package server

import (
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/grpclog"
)

// The server libraries' own errors reach the service's log as structured
// entries, within the budget.
func TestServerErrorLog(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	std := serverErrorLog(zap.New(core), "http")
	for range 100 {
		std.Print("http: Accept error: accept4: too many open files; retrying in 1s")
	}
	n := logs.Len()
	if n == 0 || n > 2*serverLogBudget {
		t.Fatalf("%d entries of 100 within a second or two, want 1 to %d", n, 2*serverLogBudget)
	}
	e := logs.All()[0]
	if e.Level != zap.WarnLevel || e.ContextMap()["from"] != "http" || !strings.Contains(e.Message, "too many open files") {
		t.Errorf("entry %+v", e)
	}
}

// grpc-go's own warnings reach the service's log; its informational lines
// do not, nor its routine warnings (a client gone away, a client
// connection of the process's own that its owner reports).
func TestGRPCLogRouted(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	routeGRPCLog(zap.New(core))
	defer routeGRPCLog(zap.NewNop())
	grpclog.Info("chatter")
	grpclog.Warningf("grpc: Server.processRPC failed to write status: %v", `connection error: desc = "transport is closing"`)
	grpclog.Warningln("[core] grpc: addrConn.createTransport failed to connect to {Addr: \"127.0.0.1:4317\"}")
	grpclog.Warning("transport: something went wrong")
	if logs.Len() != 1 || logs.All()[0].ContextMap()["from"] != "grpc" || !strings.Contains(logs.All()[0].Message, "something went wrong") {
		t.Errorf("logged %v, want the warning alone", logs.All())
	}
}
