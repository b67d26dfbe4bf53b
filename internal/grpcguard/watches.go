package grpcguard

import (
	"context"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// watchDrain ends the health Watch streams at shutdown. A Watch stream
// lasts as long as its client wants, so GracefulStop would wait for it
// until the drain bound and then cut the whole connection, answers still
// being written included. Instead each stream ends, with UNAVAILABLE, right
// after it has sent NOT_SERVING: the watcher learns the service is going
// away, and the connection can close cleanly.
type watchDrain struct {
	mu       sync.Mutex
	draining bool
	streams  map[*watchStream]struct{}
}

// watchStream is one Watch call; its context ends the health server's loop.
type watchStream struct {
	grpc.ServerStream
	ctx    context.Context
	cancel context.CancelFunc
	d      *watchDrain
	last   healthpb.HealthCheckResponse_ServingStatus // under d.mu
}

func (s *watchStream) Context() context.Context { return s.ctx }

func (s *watchStream) SendMsg(m any) error {
	err := s.ServerStream.SendMsg(m)
	if r, ok := m.(*healthpb.HealthCheckResponse); ok && err == nil {
		s.d.mu.Lock()
		s.last = r.GetStatus()
		if s.d.draining && s.last != healthpb.HealthCheckResponse_SERVING {
			s.cancel()
		}
		s.d.mu.Unlock()
	}
	return err
}

func (d *watchDrain) interceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if info.FullMethod != healthpb.Health_Watch_FullMethodName {
		return handler(srv, ss)
	}
	ctx, cancel := context.WithCancel(ss.Context())
	defer cancel()
	ws := &watchStream{ServerStream: ss, ctx: ctx, cancel: cancel, d: d}
	d.mu.Lock()
	if d.streams == nil {
		d.streams = make(map[*watchStream]struct{})
	}
	d.streams[ws] = struct{}{}
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		delete(d.streams, ws)
		d.mu.Unlock()
	}()
	err := handler(srv, ws)
	if ss.Context().Err() == nil && ctx.Err() != nil {
		// Ended by the drain, not by the client.
		return status.Error(codes.Unavailable, "envoy-rls is shutting down")
	}
	return err
}

// drain ends every Watch stream whose watcher already knows the service is
// not serving; the others end as soon as that news is sent (the health
// server sends it after Shutdown).
func (d *watchDrain) drain() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.draining = true
	for ws := range d.streams {
		if ws.last != healthpb.HealthCheckResponse_SERVING {
			ws.cancel()
		}
	}
}
