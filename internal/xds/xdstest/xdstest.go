// Package xdstest runs a real xDS server for tests: go-control-plane's
// snapshot cache behind its ADS server, as Envoy Gateway serves
// RateLimitConfig to envoyproxy/ratelimit, on a free loopback port, with
// TLS when asked. It records every request the clients send, so that a
// test can see their ACKs and NACKs.
package xdstest

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
)

// Server is a running xDS server. Its methods are safe across goroutines.
type Server struct {
	// Addr is the server's host:port.
	Addr string

	cache cachev3.SnapshotCache
	gs    *grpc.Server
	lis   *gatedListener

	mu       sync.Mutex
	requests []*discoveryv3.DiscoveryRequest
	headers  []metadata.MD
}

// Options configure Start.
type Options struct {
	// TLS, when not nil, is the server's TLS (mutual TLS when it requires
	// client certificates); nil serves plaintext.
	TLS *tls.Config
	// Down starts the server refusing every connection (each is closed as
	// soon as it is accepted) until Up is called: a server that is down,
	// on an address the client already knows.
	Down bool
}

// Start runs a server on 127.0.0.1:0 until the test ends.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("xdstest: listen: %v", err)
	}
	s := &Server{Addr: l.Addr().String(), cache: cachev3.NewSnapshotCache(false, cachev3.IDHash{}, nil)}
	s.lis = &gatedListener{Listener: l}
	s.lis.up.Store(!o.Down)
	var opts []grpc.ServerOption
	if o.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(o.TLS)))
	}
	s.gs = grpc.NewServer(opts...)
	ctx, cancel := context.WithCancel(context.Background())
	cb := serverv3.CallbackFuncs{
		StreamOpenFunc: func(ctx context.Context, _ int64, _ string) error {
			md, _ := metadata.FromIncomingContext(ctx)
			s.mu.Lock()
			s.headers = append(s.headers, md)
			s.mu.Unlock()
			return nil
		},
		StreamRequestFunc: func(_ int64, req *discoveryv3.DiscoveryRequest) error {
			s.mu.Lock()
			s.requests = append(s.requests, req)
			s.mu.Unlock()
			return nil
		},
	}
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(s.gs, serverv3.NewServer(ctx, s.cache, cb))
	done := make(chan struct{})
	go func() { defer close(done); s.gs.Serve(s.lis) }() //nolint:errcheck // Serve returns once Stop is called
	t.Cleanup(func() {
		s.gs.Stop()
		cancel()
		<-done
	})
	return s
}

// Up makes a server started Down serve.
func (s *Server) Up() { s.lis.up.Store(true) }

// Refused counts the connections closed while the server was down.
func (s *Server) Refused() int64 { return s.lis.refused.Load() }

// Set makes the snapshot of node version, holding configs.
func (s *Server) Set(t testing.TB, node, version string, configs ...*rlsconfv3.RateLimitConfig) {
	t.Helper()
	rs := make([]types.Resource, len(configs))
	for i, c := range configs {
		rs[i] = c
	}
	snap, err := cachev3.NewSnapshot(version, map[resourcev3.Type][]types.Resource{resourcev3.RateLimitConfigType: rs})
	if err != nil {
		t.Fatalf("xdstest: snapshot: %v", err)
	}
	if err := s.cache.SetSnapshot(context.Background(), node, snap); err != nil {
		t.Fatalf("xdstest: set snapshot: %v", err)
	}
}

// Requests returns the requests received so far, in order.
func (s *Server) Requests() []*discoveryv3.DiscoveryRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*discoveryv3.DiscoveryRequest(nil), s.requests...)
}

// Headers returns the gRPC metadata of each stream opened so far, in
// order.
func (s *Server) Headers() []metadata.MD {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]metadata.MD(nil), s.headers...)
}

// Find returns the first request received that ok accepts, or nil.
func (s *Server) Find(ok func(*discoveryv3.DiscoveryRequest) bool) *discoveryv3.DiscoveryRequest {
	for _, r := range s.Requests() {
		if ok(r) {
			return r
		}
	}
	return nil
}

// gatedListener closes the connections it accepts while it is not up.
type gatedListener struct {
	net.Listener
	up      atomic.Bool
	refused atomic.Int64
}

func (l *gatedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil || l.up.Load() {
			return c, err
		}
		c.Close()
		l.refused.Add(1)
	}
}
