// Package servertest runs envoy-rls's server in the test's process, on
// free loopback ports, for the tests of the commands that talk to a
// running server (call, reset). The server is package server's, started as
// `envoy-rls [flags]` starts it; the addresses it took are read from its
// "serving" log line, so no port is chosen before it is bound.
package servertest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/envoy-rls/envoy-rls/internal/server"
)

// Server is a running server's addresses.
type Server struct {
	GRPCAddr, HTTPAddr string
}

// startBound is how long the server may take to serve.
const startBound = 10 * time.Second

// Start writes limits to a file and serves it with args after the test's
// own flags (later flags win), until the test ends; the test fails unless
// the server stops cleanly.
func Start(t testing.TB, limits string, args ...string) *Server {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "limits.yaml")
	if err := os.WriteFile(cfg, []byte(limits), 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"-config", cfg, "-grpc-addr", "127.0.0.1:0", "-http-addr", "127.0.0.1:0", "-debug-addr", "", "-shutdown-timeout", "5s"}
	o, err := server.ParseFlags(append(base, args...), func(string) (string, bool) { return "", false }, server.Help{})
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.DebugLevel)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	var runErr error
	go func() { defer close(stopped); runErr = server.Run(ctx, o, zap.New(core)) }()
	t.Cleanup(func() {
		cancel()
		<-stopped
		if runErr != nil {
			t.Errorf("server stopped: %v", runErr)
		}
	})
	deadline := time.Now().Add(startBound)
	for {
		if serving := logs.FilterMessage("serving").All(); len(serving) > 0 {
			f := serving[0].ContextMap()
			return &Server{GRPCAddr: f["grpc"].(string), HTTPAddr: f["http"].(string)}
		}
		select {
		case <-stopped:
			t.Fatalf("server stopped before serving: %v", runErr)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("server not serving within %v", startBound)
		}
	}
}
