package memory

import (
	"context"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

var (
	_ limits.Store    = (*Store)(nil)
	_ limits.Resetter = (*Store)(nil)
)

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
	// negative means DefaultMaxKeys. A key costs a fixed overhead plus its
	// own length (BenchmarkMemoryPerKey measures it), so MaxKeys bounds the
	// store's memory. A sliding_log key also
	// holds one 16-byte entry per hit in its window, so it counts as one key
	// more per LogEntriesPerKey entries it has room for (a full log of
	// N = 1000 counts as 85 keys): the bound stays one of memory, whatever
	// the algorithms.
	//
	// Each shard holds its share of MaxKeys; when a key arrives in a full
	// shard (or a log grows in one), the shard drops expired keys, else new
	// keys before established ones and those with quota left before those
	// at their limit (see the package doc). A key dropped while live
	// restarts from nothing: see Stats.Evictions. A single key heavier than
	// its shard's share is still kept, alone.
	MaxKeys int
	// SweepInterval is how often the janitor removes expired keys; zero
	// means DefaultSweepInterval and negative turns the janitor off.
	// Expired keys are also removed when touched or when a shard is full,
	// so the janitor only returns memory sooner.
	SweepInterval time.Duration
	// Now is the clock, in microseconds since the epoch; nil means the
	// process's monotonic clock (see monotonicMicros). Tests pass a fake
	// one. It is read once per Decide call and once per sweep.
	Now func() int64
}

// Stats is a snapshot of a Store's counters, for metrics.
type Stats struct {
	// Keys is the number of keys held, expired ones not yet removed
	// included.
	Keys int
	// Evictions counts live keys dropped to stay within MaxKeys. Each one
	// forgets its quota, so a growing count means MaxKeys is too small, or
	// that a flood of new keys is pushing out other new keys.
	Evictions uint64
	// Expired counts keys removed because their state had expired, by the
	// janitor, on access, or to make room.
	Expired uint64
	// Holds is the number of holds kept (limits.Hold), lapsed ones not
	// yet given back included.
	Holds int
}

// Store is the embedded limits.Store. It is safe for concurrent use. Close
// stops its janitor.
type Store struct {
	shards []shard
	shift  uint // a hash's top bits select the shard
	seed   maphash.Seed
	salt   uint64 // mixed into a hit's Tag, as seed is into a key
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
		opts.Now = monotonicMicros()
	}
	n, bits := 1, uint(0)
	for n < maxShards && opts.MaxKeys/(2*n) >= minShardKeys {
		n, bits = 2*n, bits+1
	}
	seed := maphash.MakeSeed()
	s := &Store{
		shards: make([]shard, n),
		shift:  64 - bits,
		seed:   seed,
		salt:   maphash.Comparable(seed, uint64(0)),
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
//
// A run of joint hits (each with Joint set, up to and including the first
// without) is one atomic step: every hit is decided, each Result is that
// hit's own decision, and the new states are stored only if every hit is
// allowed; if one is refused, only the count_refused limits keep theirs (a
// refused count_refused hit is charged, as it would be alone). A run with
// an invalid limit, or whose keys are not all different, is not decided:
// every hit of it gets an Err (limits.ErrRepeatedKey for the latter).
func (s *Store) Decide(_ context.Context, hits []limits.Hit, results []limits.Result) {
	now := s.now()
	for i := 0; i < len(hits); {
		j := i + 1
		for j < len(hits) && hits[j-1].Joint {
			j++
		}
		if j == i+1 {
			h := &hits[i]
			switch err := h.Limit.Validate(); {
			case err != nil:
				results[i] = limits.Result{Err: err}
			case h.Hold != limits.Hold{}:
				results[i] = s.decideHold(h, now)
			default:
				results[i] = s.shards[s.shardIndex(h)].decide(h, now)
			}
		} else {
			s.decideRun(hits[i:j], results[i:j], now)
		}
		i = j
	}
}

// maxRunOnStack is the run length decideRun handles without allocating: a
// descriptor rarely has more limits than this.
const maxRunOnStack = 8

// decideRun decides a run of joint hits in one critical section of every
// shard it touches, taken in index order so that two runs never deadlock.
func (s *Store) decideRun(hits []limits.Hit, results []limits.Result, now int64) {
	if invalidRun(hits, results) {
		return
	}
	var shardsBuf [maxRunOnStack]int
	var decisionsBuf [maxRunOnStack]limits.Decision
	var stepsBuf [maxRunOnStack]holdStep
	shardOf, decisions, steps := shardsBuf[:0], decisionsBuf[:0], stepsBuf[:0]
	if n := len(hits); n > maxRunOnStack {
		shardOf, decisions, steps = make([]int, 0, n), make([]limits.Decision, 0, n), make([]holdStep, 0, n)
	}
	for k := range hits {
		shardOf = append(shardOf, s.shardIndex(&hits[k]))
	}
	var lockedBuf [maxRunOnStack]int
	locked := append(lockedBuf[:0], shardOf...)
	slices.Sort(locked)
	locked = slices.Compact(locked)
	for _, i := range locked {
		s.shards[i].mu.Lock()
	}
	defer func() {
		for _, i := range locked {
			s.shards[i].mu.Unlock()
		}
	}()

	allowed := true
	for k := range hits {
		d, st := s.shards[shardOf[k]].decideInRun(&hits[k], now)
		decisions, steps = append(decisions, d), append(steps, st)
		results[k] = d.Result
		allowed = allowed && d.Result.Allowed
	}
	for k := range hits {
		sh := &s.shards[shardOf[k]]
		i := sh.index[hits[k].Key]
		lvl := level(hits[k].Limit, &results[k])
		st := &steps[k]
		if !allowed && st.add {
			// A run's reserves are held all or none.
			st.add, st.outcome = false, limits.HoldRefused
		}
		results[k].Hold = st.outcome
		if kept(&hits[k], allowed, decisions[k], st) {
			// A lock that this hit's refusal starts is its limit's own,
			// whatever the run's verdict (limits.Decision.Locks).
			sh.apply(hits[k].Key, i, decisions[k], lvl, now)
			sh.commit(hits[k].Key, &hits[k], *st, now)
		} else if i != 0 {
			// Refused with the run: Remaining is what the hit would have
			// left, so the level may rank the key one hit nearer its
			// limit than it is.
			sh.promote(i, lvl)
		}
	}
}

// kept reports whether the decision d of hit h, of a run that allowed or
// not, is kept: an allowed run's all, a refused run's count_refused
// charges (not a reserve's: all or nothing), the locks its refusals start
// and its settles (charged whether they fit or not).
func kept(h *limits.Hit, allowed bool, d limits.Decision, st *holdStep) bool {
	switch {
	case allowed, d.Locks, st.outcome == limits.HoldSettled:
		return true
	}
	return h.Limit.CountRefused && !h.Reserves()
}

// invalidRun reports whether a run of joint hits cannot be decided, a key
// repeated in it or a limit invalid, and then gives every hit of the run
// the error: a joint run is decided whole or not at all.
func invalidRun(hits []limits.Hit, results []limits.Result) bool {
	if k := limits.RepeatedKey(hits); k >= 0 {
		err := fmt.Errorf("memory: joint run of %d hits: hit %d (%s): %w", len(hits), k, hits[k].Key, limits.ErrRepeatedKey)
		for m := range hits {
			results[m] = limits.Result{Err: err}
		}
		return true
	}
	for k := range hits {
		err := hits[k].Limit.Validate()
		if err == nil {
			err = limits.CheckHold(hits[k].Hold)
		}
		if err != nil {
			for m := range hits {
				results[m] = limits.Result{Err: fmt.Errorf("joint with hit %d: %w", k, err)}
			}
			results[k] = limits.Result{Err: err}
			return true
		}
	}
	return false
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
		for _, kh := range sh.holds {
			st.Holds += len(kh.ids)
		}
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

// shardIndex picks h's shard by its Tag, or by its whole key when it has
// none (see the package doc).
func (s *Store) shardIndex(h *limits.Hit) int {
	if s.shift == 64 {
		return 0
	}
	if h.Tag == 0 {
		return int(maphash.String(s.seed, h.Key) >> s.shift)
	}
	return int(mix(h.Tag^s.salt) >> s.shift)
}

// mix is SplitMix64's finalizer: every bit of x moves the top bits that pick
// a shard. A tag is a hash already, but one fixed across processes; salted
// with a per-store random value and mixed, its shard is not predictable from
// the key.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
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

// monotonicMicros returns a clock that reads the wall clock once and then
// advances with the monotonic clock. A wall-clock step (an NTP correction, a
// VM resumed) then neither refills nor drains a bucket, and each reading
// costs one clock read where time.Now takes two, on every decision
// (BenchmarkClock compares the two).
func monotonicMicros() func() int64 {
	start := time.Now()
	base := start.UnixMicro()
	return func() int64 { return base + time.Since(start).Microseconds() }
}

// Reset forgets the state of the hits' keys.
func (s *Store) Reset(_ context.Context, hits []limits.Hit) error {
	for i := range hits {
		sh := &s.shards[s.shardIndex(&hits[i])]
		sh.mu.Lock()
		if e, ok := sh.index[hits[i].Key]; ok {
			sh.remove(e)
		}
		sh.mu.Unlock()
	}
	return nil
}
