package grpcguard

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// callBound is how long a test waits for what should take milliseconds.
const callBound = 5 * time.Second

// holdCalls starts n unary calls from the connection of peer p through
// l's interceptor, each held in its handler until release is closed, and
// returns once all hold their place.
func holdCalls(t *testing.T, l *inflightLimit, p *peer.Peer, n int, release <-chan struct{}) {
	t.Helper()
	ctx := peer.NewContext(context.Background(), p)
	held := make(chan error, n)
	for range n {
		go func() {
			_, err := l.unary(ctx, nil, nil, func(context.Context, any) (any, error) {
				held <- nil
				<-release
				return nil, nil
			})
			if err != nil {
				held <- err
			}
		}()
	}
	for range n {
		if err := <-held; err != nil {
			t.Fatalf("a held call: %v", err)
		}
	}
}

// callThrough makes one unary call from the connection of p through l's
// interceptor, answered at once.
func callThrough(l *inflightLimit, p *peer.Peer) error {
	_, err := l.unary(peer.NewContext(context.Background(), p), nil, nil, func(context.Context, any) (any, error) { return nil, nil })
	return err
}

// Calls past -max-in-flight are refused at once, and the place of a call
// is given back when it is answered. (One connection holds the whole
// bound here: its share is all of it.)
func TestMaxInFlight(t *testing.T) {
	t.Parallel()
	l := newInflightLimit(2, 2, nil)
	p := &peer.Peer{}
	release := make(chan struct{})
	holdCalls(t, l, p, 2, release)
	if err := callThrough(l, p); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a third call: %v, want RESOURCE_EXHAUSTED", err)
	}
	if _, err := l.admit(context.Background(), nil); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a third call's headers while the bound is full: %v, want RESOURCE_EXHAUSTED", err)
	}
	close(release)
	deadline := time.Now().Add(callBound)
	for callThrough(l, p) != nil {
		if time.Now().After(deadline) {
			t.Fatal("calls are still refused after the held ones were answered")
		}
		time.Sleep(time.Millisecond)
	}
}

// One connection holds at most its share of the bound (an eighth by
// default); the others' calls are answered beside it.
func TestMaxInFlightPerConnection(t *testing.T) {
	t.Parallel()
	l := New(Options{MaxInFlight: 16}).calls
	greedy := &peer.Peer{}
	release := make(chan struct{})
	defer close(release)
	holdCalls(t, l, greedy, 2, release)
	if err := callThrough(l, greedy); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a third call on a connection holding its share (2 of 16): %v, want RESOURCE_EXHAUSTED", err)
	}
	if err := callThrough(l, &peer.Peer{}); err != nil {
		t.Errorf("a call on another connection: %v", err)
	}
}

// BenchmarkInflight takes and gives back a place, from callers spread over
// 8 connections.
func BenchmarkInflight(b *testing.B) {
	l := newInflightLimit(4096, 512, nil)
	var next atomic.Int64
	peers := make([]context.Context, 8)
	for i := range peers {
		peers[i] = peer.NewContext(context.Background(), &peer.Peer{})
	}
	b.RunParallel(func(pb *testing.PB) {
		ctx := peers[next.Add(1)%int64(len(peers))]
		for pb.Next() {
			p, ok := l.take(ctx)
			if !ok {
				b.Fatal("refused")
			}
			l.give(p)
		}
	})
}
