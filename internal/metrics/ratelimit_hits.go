package metrics

import (
	"math"
	"sync/atomic"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
)

// A descriptor's hit counts into the six counters of its stat key: the
// counters found by the config node or made for the key, and the hit's
// cost split between them as envoyproxy/ratelimit splits it.

// The counters of one stat key, in statSet order.
const (
	statTotalHits = iota
	statOverLimit
	statNearLimit
	statWithinLimit
	statShadowMode
	statOverLocal
	statCount
)

var statSuffixes = [statCount]string{".total_hits", ".over_limit", ".near_limit", ".within_limit", ".shadow_mode", ".over_limit_with_local_cache"}

// statSet is the counters of one stat key.
type statSet [statCount]counterRef

// statEntry is a stat key's counters, as byKey keeps them. A key holding
// request values is evictable (values.go): last is when it last counted,
// on ratelimitStats.tick's clock, and cost the memory it is said to hold.
type statEntry struct {
	set       statSet
	key       string
	evictable atomic.Bool
	cost      int64 // under ratelimitStats.mu
	last      atomic.Uint64
}

// hit counts one descriptor's hit: total_hits always, and, when the limit
// decided, over_limit, near_limit, within_limit and shadow_mode as
// envoyproxy/ratelimit splits the hits between them.
func (r *ratelimitStats) hit(h *RatelimitHit) {
	set := r.statSet(h)
	if set == nil {
		return
	}
	set[statTotalHits].add(h.Hits)
	if !h.Decided {
		return
	}
	c := r.split(h)
	set[statOverLimit].add(c.over)
	set[statNearLimit].add(c.near)
	set[statWithinLimit].add(c.within)
	set[statShadowMode].add(c.shadow)
	set[statOverLocal].add(c.local)
}

// hitCounts is how a decided hit's cost splits between the stats.
type hitCounts struct{ over, near, within, shadow, local uint64 }

// split divides h's hits as envoyproxy/ratelimit's base limiter does. An
// allowed hit is within_limit, and near_limit for the part of it above the
// near-limit threshold (the ratio of the limit, rounded down). A refused
// hit is over_limit for the part above the limit (all of it when the count
// was at the limit already) and near_limit for the part between the
// threshold and the limit; shadow_mode counts the over_limit part again
// when the node is in shadow mode.
func (r *ratelimitStats) split(h *RatelimitHit) hitCounts {
	limit, before, after, hits := h.Limit, h.Before, h.After, h.Hits
	// float32, as envoyproxy/ratelimit multiplies: 0.8 of 10 is 8.
	near := uint64(math.Floor(float64(float32(limit) * r.nearRatio)))
	var c hitCounts
	if h.Local {
		// The cache holds keys found over their limit: every hit is over,
		// none near, as envoyproxy/ratelimit counts its local cache's.
		c.over, c.local = hits, hits
		if h.Shadow {
			c.shadow = hits
		}
		return c
	}
	if !h.Over {
		c.within = hits
		if after > near {
			if before >= near {
				c.near = hits
			} else {
				c.near = after - near
			}
		}
		return c
	}
	if before >= limit {
		c.over = hits
	} else {
		c.over = after - limit
		c.near = limit - max(near, before)
	}
	if h.Shadow {
		c.shadow = c.over
	}
	return c
}

// statSet finds or makes the counters of h's stat key; nil when the key
// holds request values and is larger than their bound on its own.
func (r *ratelimitStats) statSet(h *RatelimitHit) *statSet {
	static := h.Node != nil && !descriptors.StatKeyVaries(h.Entries, h.Path)
	if static {
		if s, ok := r.byNode.Load(h.Node); ok {
			return s.(*statSet)
		}
	}
	bp := r.keyBufs.Get().(*[]byte)
	key := descriptors.SanitizeStatKey(descriptors.AppendStatKey((*bp)[:0], h.Domain, h.Entries, h.Path))
	r.mu.RLock()
	e := r.byKey[string(key)]
	r.mu.RUnlock()
	if e == nil {
		e = r.newStatEntry(string(key), !static)
	} else if !static && e.evictable.Load() {
		r.values.touch(e)
	}
	*bp = key
	r.keyBufs.Put(bp)
	if e == nil {
		return nil
	}
	if static {
		if !r.pin(e) {
			// Evicted since it was found: the node's counters are made
			// anew, not evictable.
			e = r.newStatEntry(e.key, false)
		}
		r.byNode.Store(h.Node, &e.set)
	}
	return &e.set
}

// newStatEntry maps the six stat names of key, before it takes the lock,
// and keeps their counters;
// a key of request values (evictable) first makes room for itself within
// their bound, or is not kept (nil) when it is larger than the bound.
func (r *ratelimitStats) newStatEntry(key string, evictable bool) *statEntry {
	var mapped [statCount]counterMapping
	for i, suffix := range statSuffixes {
		mapped[i] = r.mapCounter("ratelimit.service.rate_limit." + key + suffix)
	}
	r.mu.Lock()
	e, ok := r.byKey[key]
	if !ok {
		e = &statEntry{key: key}
		e.evictable.Store(evictable)
		if evictable && !r.makeRoomLocked(e) {
			e = nil
		} else {
			for i := range mapped {
				e.set[i] = r.mappedLocked(mapped[i])
			}
			r.byKey[key] = e
		}
	}
	r.mu.Unlock()
	r.values.sayFull()
	return e
}
