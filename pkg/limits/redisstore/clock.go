package redisstore

import (
	"context"

	"github.com/envoy-rls/envoy-rls/internal/redispipe"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// askClock samples Redis's clock for the calls that have no estimate they
// may use (Store.ask): a TIME in a pipeline of its own on a single Redis, a
// master's TIME on a cluster.
func (s *Store) askClock(ctx context.Context) error {
	if s.cluster {
		return s.sampleMasters(ctx)
	}
	probe := &redispipe.Probe{}
	wk := &work{clock: probe}
	s.send(ctx, wk)
	if wk.err != nil {
		return wk.err // the call stopped waiting: the probe is not for it to read
	}
	return probe.Err()
}

// latest is the latest instant, in µs, a hit concurrent with a call
// decided at now can have been decided at: now itself with Options.Clock
// (tests, whose instants are their own), or else the estimate of Redis's
// clock plus twice its uncertainty (this instance's, and another's taken
// to be as good, as prevCounts takes their deadlines).
func (s *Store) latest(now int64) int64 {
	if s.clock != nil {
		return now
	}
	now, u, ok := s.redisClock.Now()
	if !ok {
		return keepBuckets // no estimate: keep every bucket charge
	}
	return now + 2*u
}

// now is the instant of a call: Options.Clock's, or Redis's clock as
// estimated from the TIME of earlier pipelines (fresh). Without an
// estimate (the first calls, or after 100 s idle), a call whose hits
// allow it takes a provisional instant, this host's wall clock, and the
// TIME that checks it goes with its pipeline (decideRound: in it on a
// single Redis, beside it to the clock's master on a cluster): one round
// trip, as with an estimate. Otherwise it waits for a TIME that every call
// in the same case shares (asked).
func (s *Store) now(ctx context.Context, hits []limits.Hit) (instant, error) {
	if s.clock != nil {
		return instant{micros: s.clock()}, nil
	}
	if now, ok := s.redisClock.Fresh(); ok {
		return instant{micros: now}, nil
	}
	if s.mayGuess(hits) {
		return instant{micros: s.wall().UnixMicro(), local: redispipe.LocalMicros(), provisional: true}, nil
	}
	now, err := s.asked(ctx)
	return instant{micros: now}, err
}

// mayGuess reports whether a call of hits may be decided at a provisional
// instant: none of its hits a concurrency limit's (whose release gives
// back slots in a round trip of its own) or under a lockout (whose
// refusal starts a lock that an undo could not lift).
func (s *Store) mayGuess(hits []limits.Hit) bool {
	for i := range hits {
		if hits[i].Limit.Algorithm == limits.Concurrency || hits[i].Limit.BlockFor > 0 {
			return false
		}
	}
	return true
}

// asked is Options.Clock's instant, or Redis's clock, estimated: at once
// if the estimate is fresh, else once a TIME that every call in the same
// case shares (ask) is answered. It is never provisional.
func (s *Store) asked(ctx context.Context) (int64, error) {
	if s.clock != nil {
		return s.clock(), nil
	}
	if now, ok := s.redisClock.Fresh(); ok {
		return now, nil
	}
	a := s.ask()
	select {
	case <-a.done:
	case <-ctx.Done():
		return 0, storeError("clock", ctx.Err())
	}
	if a.err != nil {
		return 0, storeError("clock", a.err)
	}
	now, _, _ := s.redisClock.Now()
	return now, nil
}

// clockAsk is a TIME asked for calls that have no estimate of the clock to
// use: done is closed once it is answered, or failed with err.
type clockAsk struct {
	done chan struct{}
	err  error
}

// ask returns the TIME out for calls without an estimate, or sends one:
// from a goroutine of its own, with no deadline but the client's
// timeouts, so that the calls that wait for it each wait as long as their
// own deadline allows, none queues behind another, and one that gives up
// does not fail the others.
func (s *Store) ask() *clockAsk {
	s.askMu.Lock()
	defer s.askMu.Unlock()
	if s.asking != nil {
		return s.asking
	}
	a := &clockAsk{done: make(chan struct{})}
	s.asking = a
	s.probes.Add(1)
	go func() {
		defer s.probes.Done()
		err := s.askClock(context.Background())
		s.askMu.Lock()
		s.asking = nil
		s.askMu.Unlock()
		a.err = err
		close(a.done)
	}()
	return a
}
