// Package memory is the embedded store: limits decided in process, for a
// single instance, for tests, and as the "local" failure mode when Redis is
// unreachable.
//
// Keys live in up to 64 shards, each a mutex over a map, an LRU list and a
// heap of expiry instants. A decision is one critical section of its key's shard, so
// it is atomic per key; shards keep unrelated keys from contending. Memory is
// bounded by Options.MaxKeys: a full shard drops an expired key if it has
// one, else its least recently used key.
package memory

import (
	"context"
	"hash/maphash"
	"sync"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

var _ limits.Store = (*Store)(nil)

// Defaults for the zero Options.
const (
	DefaultMaxKeys       = 1_000_000
	DefaultSweepInterval = 10 * time.Second
)

const (
	maxShards = 64
	// minShardKeys keeps shards from being so small that keys spread
	// unevenly against the bound: a store of fewer than 2×minShardKeys keys
	// has a single shard, so its LRU order is exact.
	minShardKeys = 1024
	// sweepBatch bounds how many keys the janitor removes per lock, so that
	// a mass expiry does not stall the decisions waiting for the shard.
	sweepBatch = 256
)

// Options configures a Store. The zero value is usable.
type Options struct {
	// MaxKeys bounds the keys held at once, across all shards; zero or
	// negative means DefaultMaxKeys. A key costs about 130 bytes plus its
	// own length: the default bounds the store near 130 MB plus the keys.
	// Each shard holds its share of MaxKeys; when a key arrives in a full
	// shard, the shard drops an expired key if it has one, else its least
	// recently used key (whose limit then restarts from nothing: see
	// Stats.Evictions).
	MaxKeys int
	// SweepInterval is how often the janitor removes expired keys; zero
	// means DefaultSweepInterval and negative turns the janitor off.
	// Expired keys are also removed when touched or when a shard is full,
	// so the janitor only returns memory sooner.
	SweepInterval time.Duration
	// Now is the clock, in microseconds since the epoch; nil means the
	// process clock. Tests pass a fake one. It is read once per Decide call
	// and once per sweep.
	Now func() int64
}

// Stats is a snapshot of a Store's counters, for metrics.
type Stats struct {
	// Keys is the number of keys held, expired ones not yet removed
	// included.
	Keys int
	// Evictions counts live keys dropped to stay within MaxKeys. Each one
	// forgets its quota, so a growing count means MaxKeys is too small.
	Evictions uint64
	// Expired counts keys removed because their state had expired, by the
	// janitor, on access, or to make room.
	Expired uint64
}

// Store is the embedded limits.Store. It is safe for concurrent use. Close
// stops its janitor.
type Store struct {
	shards []shard
	shift  uint // a hash's top bits select the shard
	seed   maphash.Seed
	now    func() int64

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// New returns a Store and starts its janitor, unless opts.SweepInterval is
// negative.
func New(opts Options) *Store {
	if opts.MaxKeys <= 0 {
		opts.MaxKeys = DefaultMaxKeys
	}
	if opts.SweepInterval == 0 {
		opts.SweepInterval = DefaultSweepInterval
	}
	if opts.Now == nil {
		opts.Now = func() int64 { return time.Now().UnixMicro() }
	}
	n, bits := 1, uint(0)
	for n < maxShards && opts.MaxKeys/(2*n) >= minShardKeys {
		n, bits = 2*n, bits+1
	}
	s := &Store{
		shards: make([]shard, n),
		shift:  64 - bits,
		seed:   maphash.MakeSeed(),
		now:    opts.Now,
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	for i := range s.shards {
		// Split MaxKeys exactly: the first MaxKeys%n shards take one more.
		capacity := opts.MaxKeys / n
		if i < opts.MaxKeys%n {
			capacity++
		}
		s.shards[i].init(capacity)
	}
	if opts.SweepInterval > 0 {
		go s.janitor(opts.SweepInterval)
	} else {
		close(s.done)
	}
	return s
}

// Decide decides each hit in order, atomically per key, at one instant read
// from the clock; results must be as long as hits. A hit whose limit is not
// valid gets an Err. The context is not consulted: a decision waits for
// nothing but its shard's mutex, and the store must still answer when it
// stands in for a Redis that has used up the request's deadline.
func (s *Store) Decide(_ context.Context, hits []limits.Hit, results []limits.Result) {
	now := s.now()
	for i := range hits {
		h := &hits[i]
		if err := h.Limit.Validate(); err != nil {
			results[i] = limits.Result{Err: err}
			continue
		}
		results[i] = s.shardOf(h.Key).decide(h, now)
	}
}

// Stats returns the current counters. It takes each shard's lock in turn, so
// it is cheap enough for a metrics scrape but not for the hot path.
func (s *Store) Stats() Stats {
	var st Stats
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		st.Keys += len(sh.index)
		st.Evictions += sh.evictions
		st.Expired += sh.expired
		sh.mu.Unlock()
	}
	return st
}

// Close stops the janitor and waits for it to return. The store keeps
// deciding afterwards; expired keys are then removed only on access or to
// make room. Close is idempotent and always returns nil.
func (s *Store) Close() error {
	s.closeOnce.Do(func() { close(s.stop) })
	<-s.done
	return nil
}

func (s *Store) shardOf(key string) *shard {
	if s.shift == 64 {
		return &s.shards[0]
	}
	return &s.shards[maphash.String(s.seed, key)>>s.shift]
}

func (s *Store) janitor(every time.Duration) {
	defer close(s.done)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
			s.sweep()
		}
	}
}

// sweep removes every key expired at the clock's current instant.
func (s *Store) sweep() {
	now := s.now()
	for i := range s.shards {
		s.shards[i].sweep(now)
	}
}
