package accuracy

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// Outcome is one request's answer as the score reads it.
type Outcome struct {
	Allowed bool
	// Delay is a leaky bucket's wait for the request's turn, in
	// microseconds: the request reaches the backend then.
	Delay int64
	// Remaining is the limit's own count of requests that would still fit
	// after this one: N − Remaining is the rate the limit believes.
	Remaining int64
}

// Decider decides the requests of one source, in order, on one limit: the
// pure Go algorithms or a store. at holds the instants in microseconds
// since the epoch; out has the same length and receives the answers. key
// names the source's state, unique within a run.
type Decider interface {
	DecideSource(ctx context.Context, l limits.Limit, key string, at []int64, out []Outcome) error
}

// Pure decides with package limits' pure functions, one state per source,
// dropped when the algorithm says it has expired, as the embedded store
// drops it. Its zero value is ready and safe for concurrent use.
type Pure struct{}

var _ Decider = Pure{}

// DecideSource implements Decider.
func (Pure) DecideSource(_ context.Context, l limits.Limit, _ string, at []int64, out []Outcome) error {
	var s limits.State
	expire := int64(0)
	for i, now := range at {
		if s.Live && expire <= now {
			s = limits.State{}
		}
		d := limits.DecideWithin(l, s, 1, now, 0)
		if d.Changed {
			s, expire = d.State, d.ExpireAt
		}
		out[i] = Outcome{Allowed: d.Result.Allowed, Delay: d.Result.Delay.Microseconds(), Remaining: d.Result.Remaining}
	}
	return nil
}

// Store decides through a limits.Store whose clock reads Now (a Redis store
// built with Options.Clock set to Store.Clock). Calls are one at a time:
// the clock is shared.
type Store struct {
	Store limits.Store
	mu    sync.Mutex
	now   atomic.Int64
}

var _ Decider = (*Store)(nil)

// Clock is the instant of the request being decided: the store's
// Options.Clock.
func (s *Store) Clock() int64 { return s.now.Load() }

// DecideSource implements Decider.
func (s *Store) DecideSource(ctx context.Context, l limits.Limit, key string, at []int64, out []Outcome) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	hits := []limits.Hit{{Key: key, Limit: l, Cost: 1}}
	res := make([]limits.Result, 1)
	for i, now := range at {
		s.now.Store(now)
		s.Store.Decide(ctx, hits, res)
		if res[0].Err != nil {
			return fmt.Errorf("accuracy: %s at %d: %w", key, now, res[0].Err)
		}
		out[i] = Outcome{Allowed: res[0].Allowed, Delay: res[0].Delay.Microseconds(), Remaining: res[0].Remaining}
	}
	return nil
}
