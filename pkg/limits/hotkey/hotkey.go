package hotkey

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/internal/keymap"
)

// DefaultMaxKeys bounds the keys held when Options.MaxKeys is zero.
const DefaultMaxKeys = 100_000

// Options configure a Store.
type Options struct {
	// MaxKeys bounds the keys whose shares are held; zero means
	// DefaultMaxKeys.
	MaxKeys int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Store is the hot-key layer in front of a shared store. It is safe for
// concurrent use.
type Store struct {
	next limits.Store
	now  func() time.Time
	keys *keymap.Map[*entry]
	pool sync.Pool // *scratch

	// The figures of Stats, counted where the mode's hits are decided
	// (never on a plain call's path), read by the metrics at each scrape.
	local, syncs, direct, charged atomic.Uint64
}

var (
	_ limits.Store      = (*Store)(nil)
	_ limits.Resetter   = (*Store)(nil)
	_ limits.HoldReader = (*Store)(nil)
	_ limits.SlotReader = (*Store)(nil)
)

// New returns a Store in front of next.
func New(next limits.Store, o Options) *Store {
	if o.MaxKeys <= 0 {
		o.MaxKeys = DefaultMaxKeys
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Store{next: next, now: o.Now, keys: keymap.New[*entry](o.MaxKeys)}
	s.pool.New = func() any { return new(scratch) }
	return s
}

// Stats are what a Store has done since it was made.
type Stats struct {
	// Keys is the number of keys held.
	Keys int
	// Local is the number of hits admitted from a share, without Redis.
	Local uint64
	// Syncs is the number of shares taken or topped up (one charge each).
	Syncs uint64
	// Direct is the number of hits of the mode that could take a share
	// but were sent to the store plainly, each a round trip: cold keys,
	// keys near their limit, shares Redis refused. (Hits of the mode that
	// cannot take a share at all, joint runs, peeks and holds, are not
	// counted.)
	Direct uint64
	// Charged is what the granted shares charged Redis, in the limit's
	// units: over Syncs, the mean share.
	Charged uint64
}

// Stats returns the Store's figures.
func (s *Store) Stats() Stats {
	return Stats{Keys: s.keys.Len(), Local: s.local.Load(), Syncs: s.syncs.Load(),
		Direct: s.direct.Load(), Charged: s.charged.Load()}
}

// eligible reports whether hits[i] may be decided from a share: a hit of
// a limit of the mode that consumes, alone (not in a joint run), without a
// hold.
func eligible(hits []limits.Hit, i int) bool {
	h := &hits[i]
	return h.Limit.SyncInterval > 0 && h.Cost > 0 && !h.Joint && (i == 0 || !hits[i-1].Joint) && h.Hold.ID == ""
}

// anyEligible reports whether a call has a hit a share may decide: a
// call without one (no limit of the mode, or only joint runs, holds and
// peeks of one) goes to the store as it is.
func anyEligible(hits []limits.Hit) bool {
	for i := range hits {
		if eligible(hits, i) {
			return true
		}
	}
	return false
}

// Decide answers the hits it can from the shares it holds and sends the
// others, with the charges that take or top up shares, to the store it
// wraps in one call (two when Redis refused a share that a hit needed:
// that hit is then sent plainly).
func (s *Store) Decide(ctx context.Context, hits []limits.Hit, results []limits.Result) {
	if !anyEligible(hits) {
		s.next.Decide(ctx, hits, results)
		return
	}
	sc := s.pool.Get().(*scratch)
	defer s.release(sc)
	for i := range hits {
		results[i] = limits.Result{}
		if !eligible(hits, i) {
			sc.add(hits[i], plan{i: i})
			continue
		}
		s.decide(ctx, &hits[i], i, &results[i], sc)
	}
	if len(sc.hits) == 0 {
		return
	}
	s.send(ctx, sc)
	s.apply(sc, results)
	if len(sc.retry) == 0 {
		return
	}
	// The hits whose share Redis refused, plainly.
	sc.clearSent()
	for _, p := range sc.retry {
		sc.add(hits[p.i], plan{i: p.i, e: p.e, kind: observe})
	}
	sc.clearRetry()
	s.send(ctx, sc)
	s.apply(sc, results)
}

// send sends the scratch's hits to the store it wraps.
func (s *Store) send(ctx context.Context, sc *scratch) {
	if cap(sc.results) < len(sc.hits) {
		sc.results = make([]limits.Result, len(sc.hits))
	}
	sc.results = sc.results[:len(sc.hits)]
	clear(sc.results)
	sc.sent = s.now() // before the store reads its clock: a window's end is never later than Redis's
	s.next.Decide(ctx, sc.hits, sc.results)
}

// release returns sc to the pool, without the key strings it points at.
func (s *Store) release(sc *scratch) {
	sc.clearSent()
	sc.clearRetry()
	s.pool.Put(sc)
}

// Reset drops the shares of the hits' keys and resets them in the store it
// wraps.
func (s *Store) Reset(ctx context.Context, hits []limits.Hit) error {
	for i := range hits {
		s.keys.Delete(hits[i].Key)
	}
	return limits.Reset(ctx, s.next, hits)
}

// Forget drops the shares of keys another instance reset: what is left of
// them was charged to counters that are gone.
func (s *Store) Forget(keys []string) {
	for _, k := range keys {
		s.keys.Delete(k)
	}
}

// Slots reads a concurrency key's slots from the store it wraps.
func (s *Store) Slots(ctx context.Context, h limits.Hit) ([]limits.LogEntry, int64, error) {
	return limits.Slots(ctx, s.next, h)
}

// Held reads a key's holds from the store it wraps.
func (s *Store) Held(ctx context.Context, h limits.Hit) (cost, holds int64, err error) {
	return limits.Held(ctx, s.next, h)
}
