package overlimit

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/internal/keymap"
)

// DefaultMaxEntries bounds the cache when Options.MaxEntries is zero.
const DefaultMaxEntries = 100_000

// Options configure a Cache.
type Options struct {
	// MaxEntries bounds the number of keys held; zero means
	// DefaultMaxEntries.
	MaxEntries int
	// Now is the clock; nil means time.Now. Tests set a fake one.
	Now func() time.Time
}

// Cache wraps a limits.Store with the local over-limit cache. It is a
// limits.Store itself, safe for concurrent use.
type Cache struct {
	store limits.Store
	now   func() time.Time
	keys  *keymap.Map[entry]

	local atomic.Uint64 // hits answered locally
	pool  sync.Pool     // *scratch
}

type entry struct {
	limit limits.Limit
	until time.Time // T
	full  time.Time // when the store said the key is back at its maximum
}

// scratch holds the sub-batch sent to the store when some hits of a call are
// answered locally.
type scratch struct {
	hits    []limits.Hit
	results []limits.Result
	index   []int
}

var (
	_ limits.Store      = (*Cache)(nil)
	_ limits.Resetter   = (*Cache)(nil)
	_ limits.HoldReader = (*Cache)(nil)
)

// New returns a Cache in front of store.
func New(store limits.Store, o Options) *Cache {
	if o.MaxEntries <= 0 {
		o.MaxEntries = DefaultMaxEntries
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	c := &Cache{store: store, now: o.Now, keys: keymap.New[entry](o.MaxEntries)}
	c.pool.New = func() any { return new(scratch) }
	return c
}

// Clear forgets every entry. The service calls it on every config change.
func (c *Cache) Clear() { c.keys.Clear() }

// Len is the number of entries held, expired ones included until they are
// dropped.
func (c *Cache) Len() int { return c.keys.Len() }

// LocalAnswers is the number of hits answered without asking the store.
func (c *Cache) LocalAnswers() uint64 { return c.local.Load() }

// inRun reports whether hits[i] belongs to a joint run.
func inRun(hits []limits.Hit, i int) bool {
	return hits[i].Joint || (i > 0 && hits[i-1].Joint)
}

// cacheable reports whether a hit's refusal may be cached, and a cached
// refusal may answer it (see What is cached). A hit with a hold id never
// is: a settle must reach the store, and a reserve may repeat one the
// store holds, which it answers allowed.
func cacheable(hits []limits.Hit, i int) bool {
	h := &hits[i]
	lasts := h.Limit.Algorithm == limits.FixedWindow || !h.Limit.CountRefused && h.Limit.Algorithm != limits.LeakyBucket
	released := h.Limit.Algorithm == limits.Concurrency // by any instance, at any time
	return h.Cost == 1 && lasts && !released && !inRun(hits, i) && h.Hold.ID == ""
}

// Decide answers the hits it can from the cache and sends the others to the
// store in one call.
func (c *Cache) Decide(ctx context.Context, hits []limits.Hit, results []limits.Result) {
	now := c.now()
	nLocal := 0
	for i := range hits {
		if c.lookup(hits, i, now, &results[i]) {
			nLocal++
		}
	}
	if nLocal == 0 {
		c.store.Decide(ctx, hits, results)
		c.remember(hits, results, now)
		return
	}
	c.local.Add(uint64(nLocal))
	if nLocal < len(hits) {
		sc := c.pool.Get().(*scratch)
		sc.hits, sc.index = sc.hits[:0], sc.index[:0]
		for i := range hits {
			if !results[i].Local {
				sc.hits = append(sc.hits, hits[i])
				sc.index = append(sc.index, i)
			}
		}
		if cap(sc.results) < len(sc.hits) {
			sc.results = make([]limits.Result, len(sc.hits))
		}
		sc.results = sc.results[:len(sc.hits)]
		clear(sc.results)
		c.store.Decide(ctx, sc.hits, sc.results)
		c.remember(sc.hits, sc.results, now)
		for k, i := range sc.index {
			results[i] = sc.results[k]
		}
		clear(sc.hits) // drop the key strings
		c.pool.Put(sc)
	}
}

// remember caches the refusals of hits that qualify. sent is the local time
// the store call was sent.
func (c *Cache) remember(hits []limits.Hit, results []limits.Result, sent time.Time) {
	for i := range hits {
		r := &results[i]
		if r.Err != nil || r.Allowed || r.Remaining != 0 || r.RetryAfter <= 0 || !cacheable(hits, i) {
			continue
		}
		c.put(hits[i].Key, entry{limit: hits[i].Limit, until: sent.Add(r.RetryAfter), full: sent.Add(r.ResetAfter)}, sent)
	}
}

func (c *Cache) put(key string, e entry, now time.Time) {
	s := c.keys.Shard(key)
	s.Lock()
	s.Put(key, e, now, expired)
	s.Unlock()
}

// expired reports whether a cached refusal has ended at now: a full
// shard drops those first.
func expired(e entry, now time.Time) bool { return !now.Before(e.until) }

// lookup answers hits[i] into r when the cache holds a live refusal for it,
// and clears r otherwise. A refund forgets the key, and so does a settle,
// which gives its hold's cost back.
func (c *Cache) lookup(hits []limits.Hit, i int, now time.Time, r *limits.Result) bool {
	*r = limits.Result{}
	h := &hits[i]
	if h.Cost < 0 || h.Settles() {
		c.keys.Delete(h.Key)
		return false
	}
	if !cacheable(hits, i) {
		return false
	}
	s := c.keys.Shard(h.Key)
	s.Lock()
	e, ok := s.Get(h.Key)
	if ok && (e.limit != h.Limit || expired(e, now)) {
		s.Delete(h.Key)
		ok = false
	}
	s.Unlock()
	if !ok {
		return false
	}
	*r = limits.Result{Allowed: false, Remaining: 0, RetryAfter: e.until.Sub(now), ResetAfter: e.full.Sub(now), Local: true}
	return true
}

// Reset forgets the refusals cached of the hits' keys and resets them on
// the store it wraps. Another instance's cache is its own: it goes on
// refusing a key until its T unless told to Forget it.
func (c *Cache) Reset(ctx context.Context, hits []limits.Hit) error {
	for i := range hits {
		c.forget(hits[i].Key)
	}
	return limits.Reset(ctx, c.store, hits)
}

// Forget drops the refusals cached of keys (a reset another instance
// announced); keys the cache does not hold are ignored.
func (c *Cache) Forget(keys []string) {
	for _, k := range keys {
		c.forget(k)
	}
}

func (c *Cache) forget(key string) { c.keys.Delete(key) }

// Slots reads a concurrency key's slots from the store it wraps: the
// cache holds none.
func (c *Cache) Slots(ctx context.Context, h limits.Hit) ([]limits.LogEntry, int64, error) {
	return limits.Slots(ctx, c.store, h)
}

// Held reads a key's holds from the store it wraps: the cache holds none.
func (c *Cache) Held(ctx context.Context, h limits.Hit) (cost, holds int64, err error) {
	return limits.Held(ctx, c.store, h)
}
