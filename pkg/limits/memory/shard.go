package memory

import (
	"sync"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// shard is one lock's worth of keys. Entries live in a slab addressed by
// int32 indices, which link the eviction lists and the expiry heap without a
// pointer per entry: deciding an existing key allocates nothing, a new key
// costs no allocation of its own (only the map's and the slab's growth), and
// the garbage collector finds one pointer per key, its string.
type shard struct {
	mu    sync.Mutex
	index map[string]int32
	// entries[:lists] are the sentinels of the eviction lists (a sentinel's
	// next is its list's most recently decided entry, its prev the least);
	// free slots are chained through next from freeHead. Index 0, a
	// sentinel, is never an entry: it means none.
	entries  []entry
	freeHead int32
	// heap is a binary min-heap of entry indices by expireAt.
	heap []int32
	// capacity bounds used, the sum of the entries' weights; protectedCap
	// bounds protectedUsed, the part of it in the protected lists.
	capacity, used              int
	protectedCap, protectedUsed int

	evictions, expired uint64

	// holds are the holds of the entries marked held, by entry index
	// (holds.go); nil until the first.
	holds map[int32]*keyHolds

	_ [64]byte // keeps neighbouring shards' mutexes off one cache line
}

type entry struct {
	key        string
	state      limits.State
	expireAt   int64
	prev, next int32
	heapAt     int32
	weight     int32
	list       int32 // the eviction list the entry is on
	// held marks an entry with holds (shard.holds): its expireAt is then
	// when it is due (holds.go). It sits in what was padding.
	held bool
}

// The eviction lists. A key is in probation from the decision that stores it
// until it is decided again while held (allowed, refused or peeked at),
// which makes it protected: a flood of keys that are each decided once
// pushes out only probation, so it cannot make the store forget a key with
// a history. Protected keys weigh at most protectedShare of the shard; beyond
// that the least valuable go back to probation (as in a segmented LRU).
//
// Within each segment a key is on the list of its level, how little quota
// its last decision left (see level): forgetting a key that has used little
// lets through little (what it was charged), forgetting one at its limit
// lets through its whole quota again. Eviction takes the least recently decided key of
// the first non-empty list, probation's levels before protected's. Ranking
// by expiry instead would let a flood of keys with a long period push out a
// short-period key at its limit, and one limit's fixed windows all end at
// once.
const (
	levels    = 3 // more than half the quota left, half or less, none
	protected = levels
	lists     = 2 * levels // probation's levels, then protected's

	// protectedShare is the part of a shard protected keys may weigh, in
	// fifths: the rest is room for new keys to prove themselves in.
	protectedShare = 4
)

// level ranks what the decision r of a key with limit l left it: 0 more
// than half its capacity, 1 half or less, 2 nothing (at its limit, in debt,
// or a leaky bucket without a queue, whose capacity is 0). Remaining only
// grows with time until the next decision, so the level overstates, never
// understates, what forgetting the key would cost.
func level(l limits.Limit, r *limits.Result) int32 {
	switch {
	case r.Remaining <= 0:
		return 2
	case 2*r.Remaining <= l.Capacity():
		return 1
	}
	return 0
}

// LogEntriesPerKey is how many sliding_log entries weigh as much as a key:
// an entry is 16 bytes, and a key besides its name weighs about twelve of
// them (BenchmarkMemoryPerKey measures it), so a log counts as one key more
// per 12 entries it has room for.
const LogEntriesPerKey = 12

// weight is what a state counts against the shard's capacity: 1 for a key,
// plus its log's allocated room (State.LogRoom: a log keeps room beyond its
// length, and entries that left the window before it, so room, not length,
// is what memory holds).
func weight(s limits.State) int {
	return 1 + (s.LogRoom()+LogEntriesPerKey-1)/LogEntriesPerKey
}

func (sh *shard) init(capacity int) {
	sh.capacity = capacity
	sh.protectedCap = capacity * protectedShare / 5
	hint := min(capacity, minShardKeys)
	sh.index = make(map[string]int32, hint)
	sh.entries = make([]entry, lists, hint+lists)
	for l := range int32(lists) {
		sh.entries[l].prev, sh.entries[l].next = l, l
	}
	sh.heap = make([]int32, 0, hint)
}

// decide is limits.DecideWithin for one hit under the shard's lock, with the
// store contract around it.
func (sh *shard) decide(h *limits.Hit, now int64) limits.Result {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	state, i := sh.load(h.Key, now)
	d := limits.DecideWithin(h.Limit, state, h.Cost, now, h.MaxDelayMicros())
	sh.apply(h.Key, i, d, level(h.Limit, &d.Result), now)
	return d.Result
}

// load returns key's state and entry index (0: none). A state is absent from
// its ExpireAt on: an expired entry is removed here.
func (sh *shard) load(key string, now int64) (limits.State, int32) {
	i, ok := sh.index[key]
	if !ok {
		return limits.State{}, 0
	}
	if now >= sh.entries[i].expireAt && !sh.expire(i, now) {
		return limits.State{}, 0
	}
	return sh.entries[i].state, i
}

// apply keeps decision d for key, whose entry is i (0: none), at level lvl:
// the new state is written only when Changed, and deleted when it no longer
// matters. The old state is dropped whenever the new one is kept, so that
// the two never both live (a sliding log's may share storage: see
// limits.Decide).
func (sh *shard) apply(key string, i int32, d limits.Decision, lvl int32, now int64) {
	if i != 0 && sh.entries[i].held {
		sh.applyHeld(i, d, lvl, now)
		return
	}
	switch {
	case d.Changed && (!d.State.Live || d.ExpireAt <= now):
		if i != 0 {
			sh.remove(i)
		}
	case d.Changed && i != 0:
		e := &sh.entries[i]
		e.state = d.State
		if e.expireAt != d.ExpireAt {
			e.expireAt = d.ExpireAt
			sh.heapFix(e.heapAt)
		}
		w := int32(weight(d.State))
		grown := w > e.weight
		if w != e.weight {
			sh.used += int(w - e.weight)
			if e.list >= protected {
				sh.protectedUsed += int(w - e.weight)
			}
			e.weight = w
		}
		sh.promote(i, lvl)
		if grown {
			sh.makeRoom(0, i, now)
		}
	case d.Changed:
		sh.insert(key, d.State, d.ExpireAt, lvl, now)
	case i != 0:
		sh.promote(i, lvl)
	}
}

// insert adds a key to probation at level lvl, first making room for it.
func (sh *shard) insert(key string, state limits.State, expireAt int64, lvl int32, now int64) {
	w := weight(state)
	sh.makeRoom(w, 0, now)
	i := sh.freeHead
	if i != 0 {
		sh.freeHead = sh.entries[i].next
	} else {
		sh.entries = append(sh.entries, entry{})
		i = int32(len(sh.entries) - 1)
	}
	sh.entries[i] = entry{key: key, state: state, expireAt: expireAt, weight: int32(w)}
	sh.used += w
	sh.index[key] = i
	sh.linkFront(i, lvl)
	sh.heapPush(i)
}

// promote moves entry i, just decided again, to the front of the protected
// list of level lvl, then moves the least valuable protected entries back
// to the front of probation while protected ones outweigh their share. i
// itself may go back if it is the least valuable: alone on the lowest
// level.
func (sh *shard) promote(i, lvl int32) {
	e := &sh.entries[i]
	l := protected + lvl
	if e.list < protected {
		sh.protectedUsed += int(e.weight)
	}
	if e.list != l || sh.entries[l].next != i {
		sh.unlink(i)
		sh.linkFront(i, l)
	}
	for sh.protectedUsed > sh.protectedCap {
		j := sh.oldestOf(protected, lists, 0)
		if j == 0 {
			return // none: cannot be while protectedUsed sums the protected weights
		}
		back := &sh.entries[j]
		sh.unlink(j)
		sh.linkFront(j, back.list-protected)
		sh.protectedUsed -= int(back.weight)
	}
}

// makeRoom drops entries other than keep until extra more fits the
// capacity: an expired entry while there is one (the heap's top), else the
// least recently decided entry of the first non-empty eviction list.
func (sh *shard) makeRoom(extra int, keep int32, now int64) {
	for sh.used+extra > sh.capacity {
		if len(sh.heap) > 0 {
			if top := sh.heap[0]; top != keep && sh.entries[top].expireAt <= now {
				sh.expire(top, now)
				continue
			}
		}
		victim := sh.oldestOf(0, lists, keep)
		if victim == 0 {
			return // keep is all there is
		}
		sh.remove(victim)
		sh.evictions++
	}
}

// oldestOf returns the least recently decided entry other than keep of the
// first non-empty list among lists from up to to, or 0 if they hold nothing
// else.
func (sh *shard) oldestOf(from, to, keep int32) int32 {
	for l := from; l < to; l++ {
		i := sh.entries[l].prev
		if i == keep {
			i = sh.entries[i].prev
		}
		if i >= lists {
			return i
		}
	}
	return 0
}

// remove deletes entry i from the map, its list and the heap, and frees its
// slot.
func (sh *shard) remove(i int32) {
	e := &sh.entries[i]
	if e.held {
		delete(sh.holds, i)
	}
	delete(sh.index, e.key)
	sh.unlink(i)
	sh.heapRemove(e.heapAt)
	sh.used -= int(e.weight)
	if e.list >= protected {
		sh.protectedUsed -= int(e.weight)
	}
	*e = entry{next: sh.freeHead}
	sh.freeHead = i
}

// expire removes entry i, due at now, and reports whether it is still
// there: an entry with holds is brought up to now instead (its lapses
// given back), and removed only if nothing is left of it.
func (sh *shard) expire(i int32, now int64) bool {
	if sh.entries[i].held {
		if sh.due(i, now) {
			return true
		}
		sh.expired++ // due removed it
		return false
	}
	sh.remove(i)
	sh.expired++
	return false
}

// sweep removes the entries expired at now, sweepBatch per lock.
func (sh *shard) sweep(now int64) {
	for {
		sh.mu.Lock()
		n := 0
		for ; n < sweepBatch && len(sh.heap) > 0 && sh.entries[sh.heap[0]].expireAt <= now; n++ {
			sh.expire(sh.heap[0], now)
		}
		sh.mu.Unlock()
		if n < sweepBatch {
			return
		}
	}
}

// The eviction lists.

func (sh *shard) linkFront(i, l int32) {
	first := sh.entries[l].next
	e := &sh.entries[i]
	e.prev, e.next, e.list = l, first, l
	sh.entries[first].prev = i
	sh.entries[l].next = i
}

func (sh *shard) unlink(i int32) {
	e := &sh.entries[i]
	sh.entries[e.prev].next = e.next
	sh.entries[e.next].prev = e.prev
}

// The expiry heap.

func (sh *shard) less(a, b int32) bool {
	return sh.entries[sh.heap[a]].expireAt < sh.entries[sh.heap[b]].expireAt
}

func (sh *shard) swap(a, b int32) {
	h := sh.heap
	h[a], h[b] = h[b], h[a]
	sh.entries[h[a]].heapAt = a
	sh.entries[h[b]].heapAt = b
}

func (sh *shard) heapPush(i int32) {
	sh.heap = append(sh.heap, i)
	at := int32(len(sh.heap) - 1)
	sh.entries[i].heapAt = at
	sh.up(at)
}

func (sh *shard) heapRemove(at int32) {
	last := int32(len(sh.heap) - 1)
	if at != last {
		sh.swap(at, last)
	}
	sh.heap = sh.heap[:last]
	if at != last {
		sh.heapFix(at)
	}
}

func (sh *shard) heapFix(at int32) {
	if !sh.down(at) {
		sh.up(at)
	}
}

func (sh *shard) up(at int32) {
	for at > 0 {
		parent := (at - 1) / 2
		if !sh.less(at, parent) {
			return
		}
		sh.swap(at, parent)
		at = parent
	}
}

// down sifts at down and reports whether it moved.
func (sh *shard) down(at int32) bool {
	start, n := at, int32(len(sh.heap))
	for {
		c := 2*at + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && sh.less(r, c) {
			c = r
		}
		if !sh.less(c, at) {
			break
		}
		sh.swap(at, c)
		at = c
	}
	return at > start
}
