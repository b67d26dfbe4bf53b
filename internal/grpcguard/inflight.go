package grpcguard

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
)

// inflightLimit bounds the gRPC calls in flight, across all connections
// (max) and on each one (perConn). A call is counted from the moment its
// request message has arrived and decoded until its handler returns: a
// stream whose message is slow to come, or never comes, or that its client
// resets first, holds no place, so that streams opened and left waiting
// cannot lock the other callers out. Such streams are bounded per
// connection by Options.MaxStreams instead, and hold only what their
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

// StreamsPerConn is how many streaming calls one connection may hold open
// (of Options.MaxOpenStreams). A streaming call (a health Watch, reflection)
// lasts as long as its client wants, so it is bounded apart from the
// decisions, which are unary: were streams counted in Options.MaxInFlight, a
// few connections opening their share of Watch streams would hold the
// whole bound and every decision would be refused. A gRPC health client
// opens one Watch per connection; sixteen leaves room to spare.
const StreamsPerConn = 16

var errTooManyCalls = status.Error(codes.ResourceExhausted, "too many calls in flight")

// MessageWait is how long a call's request message may take to arrive
// when its client set no shorter deadline (Envoy always sets one, of tens
// of milliseconds): a stream still waiting then is ended (CANCELLED), so
// that one left open without its message does not hold its place in
// Options.MaxStreams, and a goroutine, for as long as its connection lives.
const MessageWait = 10 * time.Second

// messageTimerKey carries, in a call's context, the timer that ends it
// if its message has not arrived within MessageWait.
type messageTimerKey struct{}

// admit is the server's tap: it runs on the connection's reader before the
// stream is created, and refuses the call at once while the bound is full.
// It takes no place: the call has no message yet. The context it returns
// is the stream's: it ends after MessageWait unless the message has come.
func (l *inflightLimit) admit(ctx context.Context, _ *tap.Info) (context.Context, error) {
	if l.current.Load() >= l.max {
		return ctx, l.refuse()
	}
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) <= MessageWait {
		return ctx, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	return context.WithValue(ctx, messageTimerKey{}, time.AfterFunc(MessageWait, cancel)), nil
}

// arrived stops the MessageWait timer of the call of ctx, if it has one:
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
// its handler returns (under Options.MaxOpenStreams: a limit of its own, apart
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
