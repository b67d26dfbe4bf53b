package breaker

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// switchStore fails every hit with an unavailable error while down, counts
// the calls that reach it, and otherwise allows.
type switchStore struct {
	down  atomic.Bool
	calls atomic.Int64
	err   error
}

func (s *switchStore) Decide(_ context.Context, hits []limits.Hit, results []limits.Result) {
	s.calls.Add(1)
	for i := range hits {
		if s.down.Load() {
			results[i] = limits.Result{Err: s.err}
		} else {
			results[i] = limits.Result{Allowed: true}
		}
	}
}

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func decide(b *Breaker) limits.Result {
	res := make([]limits.Result, 1)
	b.Decide(context.Background(), []limits.Hit{{Key: "k"}}, res)
	return res[0]
}

func TestOpensAfterFailuresAndProbes(t *testing.T) {
	s := &switchStore{err: fmt.Errorf("dial: %w", limits.ErrUnavailable)}
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	var changes []bool
	b := New(s, Options{Failures: 3, Cooldown: time.Second, Now: c.now, OnChange: func(open bool) { changes = append(changes, open) }})

	s.down.Store(true)
	for i := 0; i < 3; i++ {
		if r := decide(b); !errors.Is(r.Err, limits.ErrUnavailable) || errors.Is(r.Err, ErrOpen) {
			t.Fatalf("call %d: err = %v, want the store's own error", i, r.Err)
		}
	}
	if !b.Open() {
		t.Fatal("breaker closed after 3 unavailable calls")
	}
	// Open: calls fail fast without reaching the store.
	before := s.calls.Load()
	for i := 0; i < 10; i++ {
		if r := decide(b); !errors.Is(r.Err, ErrOpen) {
			t.Fatalf("open breaker: err = %v, want ErrOpen", r.Err)
		}
	}
	if n := s.calls.Load() - before; n != 0 {
		t.Errorf("an open breaker let %d calls through", n)
	}
	// After the cooldown one probe goes; it fails, so the breaker stays
	// open for another cooldown.
	c.t = c.t.Add(time.Second)
	decide(b)
	if n := s.calls.Load() - before; n != 1 {
		t.Errorf("after the cooldown %d calls reached the store, want one probe", n)
	}
	if r := decide(b); !errors.Is(r.Err, ErrOpen) {
		t.Errorf("after a failed probe: err = %v, want ErrOpen", r.Err)
	}
	// The store is back: the next probe closes the breaker.
	s.down.Store(false)
	c.t = c.t.Add(time.Second)
	if r := decide(b); r.Err != nil || !r.Allowed {
		t.Errorf("probe against a store that is back: %+v", r)
	}
	if b.Open() {
		t.Error("breaker still open after a successful probe")
	}
	if r := decide(b); r.Err != nil {
		t.Errorf("closed breaker: %v", r.Err)
	}
	if len(changes) != 2 || !changes[0] || changes[1] {
		t.Errorf("OnChange saw %v, want [true false]", changes)
	}
}

func TestReplyErrorsDoNotOpen(t *testing.T) {
	s := &switchStore{err: errors.New("WRONGTYPE Operation against a key holding the wrong kind of value")}
	b := New(s, Options{Failures: 1})
	s.down.Store(true)
	for i := 0; i < 5; i++ {
		decide(b)
	}
	if b.Open() {
		t.Error("a store that answers with reply errors opened the breaker")
	}
}

func TestPartialFailureDoesNotOpen(t *testing.T) {
	b := New(partialStore{}, Options{Failures: 1})
	res := make([]limits.Result, 2)
	for i := 0; i < 5; i++ {
		b.Decide(context.Background(), []limits.Hit{{Key: "a"}, {Key: "b"}}, res)
	}
	if b.Open() {
		t.Error("one failed node of two opened the breaker for all")
	}
}

// partialStore fails the first hit only, as a cluster with one node down.
type partialStore struct{}

func (partialStore) Decide(_ context.Context, hits []limits.Hit, results []limits.Result) {
	results[0] = limits.Result{Err: limits.ErrUnavailable}
	for i := 1; i < len(hits); i++ {
		results[i] = limits.Result{Allowed: true}
	}
}
