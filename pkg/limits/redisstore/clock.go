package redisstore

import (
	"context"

	"github.com/envoy-rls/envoy-rls/internal/redispipe"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// latest is the latest instant, in µs, a hit concurrent with a call
// decided at now can have been decided at: now itself with Options.Clock
// (tests, whose instants are their own), or else the estimate of Redis's
// clock plus twice its uncertainty (this instance's, and another's taken
// to be as good, as prevCounts takes their deadlines).
func (s *Store) latest(now int64) int64 {
	if s.clock != nil {
		return now
	}
	now, u, ok := s.pipes.Clock().Now()
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
	if now, ok := s.pipes.Clock().Fresh(); ok {
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
// back slots in a round trip of its own), under a lockout (whose
// refusal starts a lock that an undo could not lift) or of a domain with
// holds (a hold's record, which a round made again would find as its own
// repeat, and the lapses that the instant judges).
func (s *Store) mayGuess(hits []limits.Hit) bool {
	for i := range hits {
		if hits[i].Limit.Algorithm == limits.Concurrency || hits[i].Limit.BlockFor > 0 || hits[i].Hold != (limits.Hold{}) {
			return false
		}
	}
	return true
}

// asked is Options.Clock's instant, or Redis's clock, estimated: at once
// if the estimate is fresh, else once a TIME that every call in the same
// case shares (redispipe.Pipes.Ask) is answered. It is never provisional.
func (s *Store) asked(ctx context.Context) (int64, error) {
	if s.clock != nil {
		return s.clock(), nil
	}
	if now, ok := s.pipes.Clock().Fresh(); ok {
		return now, nil
	}
	if err := s.pipes.Ask().Wait(ctx); err != nil {
		return 0, storeError("clock", err)
	}
	now, _, _ := s.pipes.Clock().Now()
	return now, nil
}
