package limits

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrUnavailable marks a store failure that says nothing about the hit and
// everything about the store: a connection refused, a timeout. A store wraps
// such errors with it (errors.Is), so that a circuit breaker can tell a dead
// store from a bad key.
var ErrUnavailable = errors.New("store unavailable")

// ErrRepeatedKey is the error of every hit of a joint run that names one key
// twice. The service never sends one (the keys of a descriptor's limits
// differ by their index in its list), and deciding one would take each store
// a mechanism of its own (a key's state as the run left it so far, restored
// if the run is refused) for no caller: so every store refuses it, the same
// way.
var ErrRepeatedKey = errors.New("joint run repeats a key")

// RepeatedKey returns the index of the first hit of run whose key an earlier
// hit already names, or -1. Runs are a few hits long: comparing each pair
// costs less than a map.
func RepeatedKey(run []Hit) int {
	for i := 1; i < len(run); i++ {
		for j := range i {
			if run[j].Key == run[i].Key {
				return i
			}
		}
	}
	return -1
}

// Hit is one descriptor's claim on one limit: Cost units of the quota kept
// under Key.
//
// Cost is c in docs/semantics.md: a positive cost consumes, zero is a peek
// (allowed if a request of cost 1 would be, consuming nothing) and a negative
// cost refunds.
type Hit struct {
	Key string
	// Tag is the hash of the key's Redis Cluster hash tag (what
	// descriptors.KeyTag returns beside the key): the keys of a joint run
	// share it. A store that spreads keys over shards of its own picks the
	// shard from Tag, so that it never parses the key back; zero means the
	// caller has none (a key built by hand), and the store then hashes the
	// whole key.
	Tag   uint64
	Limit Limit
	Cost  int64
	// MaxDelay is the longest a leaky bucket may delay this hit (what is
	// left of the caller's deadline); a longer wait is a refusal. Zero means
	// no bound beyond the bucket's own queue.
	MaxDelay time.Duration
	// Joint ties this hit to the next one: a run of joint hits (the limits
	// of one descriptor's rate_limits list) is decided in one atomic step,
	// all charged only if every one of them allows. Their keys must share a
	// hash tag and differ (a run that repeats one is refused whole, with
	// ErrRepeatedKey). A refused run charges only its count_refused limits.
	Joint bool
	// Hold, when its ID is set, makes the hit reserve or settle a
	// request's cost under that id (hold.go); the zero Hold is none.
	Hold Hold
}

// MaxDelayMicros is MaxDelay as DecideWithin takes it: zero (or negative)
// means no bound, and a bound under a microsecond is one microsecond rather
// than none.
func (h Hit) MaxDelayMicros() int64 {
	if h.MaxDelay <= 0 {
		return 0
	}
	return max(1, h.MaxDelay.Microseconds())
}

// Result is a store's answer for one Hit.
type Result struct {
	// Allowed reports whether the hit fits the limit.
	Allowed bool
	// Remaining is how many requests of cost 1 would be allowed right now,
	// after this hit; never negative.
	Remaining int64
	// RetryAfter is, on a refusal, the shortest wait after which the same
	// hit would be allowed if nothing else arrives. It is zero on an allowed
	// hit, and zero for a hit that can never fit (a cost above
	// Limit.MaxCost), since no wait makes it fit: a caller must not read
	// zero on a refusal as "retry now".
	RetryAfter time.Duration
	// ResetAfter is, on every answer, the wait until Remaining is back at its
	// maximum (Limit.Capacity) if nothing else arrives.
	ResetAfter time.Duration
	// Delay is how long a leaky bucket makes an allowed hit wait for its
	// turn before the answer goes out.
	Delay time.Duration
	// Locked reports a refusal by a lockout's lock (Limit.BlockFor):
	// RetryAfter and ResetAfter are then the time left on the lock.
	Locked bool
	// Local reports a refusal answered in front of the store, without
	// asking it (package overlimit's cache of refused keys), which
	// envoyproxy/ratelimit's stats count apart.
	Local bool
	// Hold says what the hit did with its Hold (hold.go).
	Hold HoldOutcome
	// Err is set when the store could not decide this hit; the other fields
	// are then meaningless.
	Err error
}

// Store decides hits against shared state. Every implementation honours the
// same semantics (the conformance suite in package storetest checks them).
type Store interface {
	// Decide decides hits[i] into results[i], which must be as long as hits.
	// All hits of a call are sent together (one round trip to Redis); each
	// is decided atomically on its own. A failure that touches only some
	// hits (one cluster node down) sets Err on those results alone.
	//
	// Neither slice is used after Decide returns, even if work it started
	// goes on (a script still in Redis after ctx ended): callers reuse them.
	Decide(ctx context.Context, hits []Hit, results []Result)
}

// Resetter is a Store that can forget keys' state: what lets a client that
// a limit refuses through again (POST /reset). Every store implements it,
// and every layer of a store stack passes it on to the store it wraps
// (clearing what it holds of the keys itself).
type Resetter interface {
	// Reset forgets the state each hit's key holds for its limit, in every
	// form the store keeps it under (a window's counters, a bucket, a log),
	// so that the next hit on it is decided as on a new key. The hits'
	// Cost and MaxDelay are not read. An error means some state may be
	// left: calling Reset again is harmless.
	Reset(ctx context.Context, hits []Hit) error
}

// Reset resets hits on s, which must be a Resetter.
func Reset(ctx context.Context, s Store, hits []Hit) error {
	r, ok := s.(Resetter)
	if !ok {
		return fmt.Errorf("store %T cannot reset keys", s)
	}
	return r.Reset(ctx, hits)
}
