// Package grpcguard bounds what gRPC clients can make the service hold:
// connections per listener, how long an idle or slow one may stay, how
// large a request may be, how many calls and streams may be in flight at
// once, on each connection and over all of them, and how fast a
// connection may reset its streams. Without them a client that opens
// connections and sends nothing, or many large requests at once, exhausts
// the process's file descriptors or memory, and with them every healthy
// client too. It also ends the health Watch streams at shutdown, which
// would otherwise hold the drain until its bound.
//
// The server makes one Guard from its flags, puts it around its gRPC
// server (ServerOptions, Unary, Stream), and, at shutdown, drains the
// Watch streams (DrainWatches) and waits for the calls in flight
// (WaitIdle). The listener bound (BoundListener) serves the HTTP
// listeners too. What a guard refuses, it counts through the hooks of
// Options, so that the package needs no metrics of its own.
package grpcguard

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
)

// DefaultMaxMessageBytes is a good Options.MaxMessageBytes: what the
// largest request the service accepts needs (MaxDescriptors descriptors of
// MaxEntries entries, each key and value up to a few hundred bytes, a
// header value's usual size), with room to spare. Envoy's requests are a
// few hundred bytes.
const DefaultMaxMessageBytes = 256 << 10

// MinMessageBytes is the least Options.MaxMessageBytes may be: one
// descriptor of a few long entries.
const MinMessageBytes = 4 << 10

// handshakeTimeout bounds how long a new gRPC connection may take to
// finish its TLS and HTTP/2 handshakes (grpc-go's default is 2 minutes).
const handshakeTimeout = 10 * time.Second

// Options are the bounds of a Guard, and the hooks that count what it
// refuses.
type Options struct {
	// MaxInFlight bounds the unary calls in flight over all connections,
	// MaxInFlightPerConn those of one connection (0: an eighth of
	// MaxInFlight, at least one).
	MaxInFlight, MaxInFlightPerConn int
	// MaxOpenStreams bounds the streaming calls open over all
	// connections; one connection holds at most StreamsPerConn of them.
	MaxOpenStreams int
	// MaxStreams bounds the calls at once on one connection (HTTP/2
	// SETTINGS_MAX_CONCURRENT_STREAMS), open or waiting for their message.
	MaxStreams int
	// MaxMessageBytes is the largest request read.
	MaxMessageBytes int
	// MaxResets is how many streams a client may reset on one connection
	// a second, in bursts of as many; 0: no bound.
	MaxResets int
	// MaxConnectionIdle closes a connection without a call for this long
	// (0: never); MaxConnectionAge closes any after this long (0: never),
	// leaving its calls MaxConnectionAgeGrace to finish.
	MaxConnectionIdle, MaxConnectionAge, MaxConnectionAgeGrace time.Duration

	// Evict, if set, closes a streaming call to make room for a new one
	// while MaxOpenStreams are open, and returns a channel closed once
	// that call's handler has returned; it returns nil when no call may
	// be closed.
	Evict func() <-chan struct{}
	// OnRefusedCall, if set, counts a call or stream refused by a bound.
	OnRefusedCall func()
	// OnResets, if set, counts a connection closed for its resets.
	OnResets func()
}

// Guard is the bounds of one gRPC server. Its methods are safe to call
// from any goroutine.
type Guard struct {
	o       Options
	calls   *inflightLimit // unary calls
	streams *inflightLimit // streaming calls
	watches watchDrain
}

// New returns the guard of the bounds o says.
func New(o Options) *Guard {
	perConn := o.MaxInFlightPerConn
	if perConn <= 0 {
		perConn = max(o.MaxInFlight/8, 1)
	}
	g := &Guard{
		o:       o,
		calls:   newInflightLimit(int64(o.MaxInFlight), int64(perConn), o.OnRefusedCall),
		streams: newInflightLimit(int64(o.MaxOpenStreams), StreamsPerConn, o.OnRefusedCall),
	}
	g.streams.evict = o.Evict
	return g
}

// ServerOptions are the server options that bound what clients can make
// the server hold: idle and aged connections, slow handshakes, message
// sizes, streams per connection, calls in flight (refused at their
// headers while the bound is full) and stream resets, the last around
// creds, the server's transport credentials. The interceptors (Unary,
// Stream) are the caller's to chain, since it orders them among its own.
func (g *Guard) ServerOptions(creds credentials.TransportCredentials) []grpc.ServerOption {
	ka := keepalive.ServerParameters{MaxConnectionIdle: g.o.MaxConnectionIdle}
	if g.o.MaxConnectionAge > 0 {
		// A client told to go away reconnects, possibly to a replica that
		// started since; its calls in flight get the grace to finish.
		ka.MaxConnectionAge = g.o.MaxConnectionAge
		ka.MaxConnectionAgeGrace = g.o.MaxConnectionAgeGrace
	}
	return []grpc.ServerOption{
		grpc.KeepaliveParams(ka),
		grpc.ConnectionTimeout(handshakeTimeout),
		grpc.MaxRecvMsgSize(g.o.MaxMessageBytes),
		grpc.MaxConcurrentStreams(uint32(g.o.MaxStreams)),
		grpc.InTapHandle(g.calls.admit),
		grpc.Creds(boundResets(creds, g.o.MaxResets, g.o.OnResets)),
	}
}

// Unary is the interceptor that bounds the unary calls in flight.
func (g *Guard) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	return g.calls.unary(ctx, req, info, handler)
}

// Stream is the interceptor that bounds the streaming calls open, and
// lets DrainWatches end the health Watch streams.
func (g *Guard) Stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return g.streams.stream(srv, ss, info, func(srv any, ss grpc.ServerStream) error {
		return g.watches.interceptor(srv, ss, info, handler)
	})
}

// DrainWatches ends the health Watch streams once each has told its
// watcher the service is not serving (see watchDrain): call it after
// the health server's Shutdown, so that GracefulStop can finish.
func (g *Guard) DrainWatches() { g.watches.drain() }

// WaitIdle waits until no unary call is in flight, or done is closed
// (every connection has ended), or deadline passes; it reports whether
// the drain finished in time. Streams are not waited for: they last as
// long as their clients want.
func (g *Guard) WaitIdle(done <-chan struct{}, deadline time.Time) bool {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for g.calls.current.Load() > 0 {
		select {
		case <-done:
			return true
		case <-t.C:
			if time.Now().After(deadline) {
				return false
			}
		}
	}
	return true
}
