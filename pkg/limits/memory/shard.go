package memory

import (
	"sync"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// shard is one lock's worth of keys. Entries live in a slab addressed by
// int32 indices, which link the LRU list and the expiry heap without a
// pointer per entry: deciding an existing key allocates nothing, a new key
// costs no allocation of its own (only the map's and the slab's growth), and
// the garbage collector finds one pointer per key, its string.
type shard struct {
	mu    sync.Mutex
	index map[string]int32
	// entries[0] is the sentinel of the LRU list (its next is the most
	// recently used entry, its prev the least); free slots are chained
	// through next from freeHead.
	entries  []entry
	freeHead int32
	// heap is a binary min-heap of entry indices by expireAt.
	heap []int32
	// capacity bounds used, the sum of the entries' weights.
	capacity, used int

	evictions, expired uint64

	_ [64]byte // keeps neighbouring shards' mutexes off one cache line
}

type entry struct {
	key        string
	state      limits.State
	expireAt   int64
	prev, next int32
	heapAt     int32
	weight     int32
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
	hint := min(capacity, minShardKeys)
	sh.index = make(map[string]int32, hint)
	sh.entries = make([]entry, 1, hint+1)
	sh.heap = make([]int32, 0, hint)
}

// decide is limits.DecideWithin for one hit under the shard's lock, with the
// store contract around it.
func (sh *shard) decide(h *limits.Hit, now int64) limits.Result {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	state, i := sh.load(h.Key, now)
	d := limits.DecideWithin(h.Limit, state, h.Cost, now, h.MaxDelayMicros())
	sh.apply(h.Key, i, d, now)
	return d.Result
}

// load returns key's state and entry index (0: none). A state is absent from
// its ExpireAt on: an expired entry is removed here.
func (sh *shard) load(key string, now int64) (limits.State, int32) {
	i, ok := sh.index[key]
	if !ok {
		return limits.State{}, 0
	}
	if now >= sh.entries[i].expireAt {
		sh.remove(i)
		sh.expired++
		return limits.State{}, 0
	}
	return sh.entries[i].state, i
}

// apply keeps decision d for key, whose entry is i (0: none): the new state
// is written only when Changed, and deleted when it no longer matters. The
// old state is dropped whenever the new one is kept, so that the two never
// both live (a sliding log's may share storage: see limits.Decide).
func (sh *shard) apply(key string, i int32, d limits.Decision, now int64) {
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
		sh.touch(i)
		if w := weight(d.State); w != int(e.weight) {
			sh.used += w - int(e.weight)
			e.weight = int32(w)
			sh.makeRoom(0, i, now)
		}
	case d.Changed:
		sh.insert(key, d.State, d.ExpireAt, now)
	case i != 0:
		sh.touch(i)
	}
}

// insert adds a key, first making room for it.
func (sh *shard) insert(key string, state limits.State, expireAt, now int64) {
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
	sh.linkFront(i)
	sh.heapPush(i)
}

// makeRoom drops entries other than keep until extra more fits the
// capacity: an expired entry while there is one (the heap's top), else the
// least recently used.
func (sh *shard) makeRoom(extra int, keep int32, now int64) {
	for sh.used+extra > sh.capacity && len(sh.heap) > 0 {
		if top := sh.heap[0]; top != keep && sh.entries[top].expireAt <= now {
			sh.remove(top)
			sh.expired++
			continue
		}
		lru := sh.entries[0].prev
		if lru == keep {
			return // keep is all there is
		}
		sh.remove(lru)
		sh.evictions++
	}
}

// remove deletes entry i from the map, the list and the heap, and frees its
// slot.
func (sh *shard) remove(i int32) {
	e := &sh.entries[i]
	delete(sh.index, e.key)
	sh.unlink(i)
	sh.heapRemove(e.heapAt)
	sh.used -= int(e.weight)
	*e = entry{next: sh.freeHead}
	sh.freeHead = i
}

// sweep removes the entries expired at now, sweepBatch per lock.
func (sh *shard) sweep(now int64) {
	for {
		sh.mu.Lock()
		n := 0
		for ; n < sweepBatch && len(sh.heap) > 0 && sh.entries[sh.heap[0]].expireAt <= now; n++ {
			sh.remove(sh.heap[0])
			sh.expired++
		}
		sh.mu.Unlock()
		if n < sweepBatch {
			return
		}
	}
}

// The LRU list.

func (sh *shard) touch(i int32) {
	if sh.entries[0].next != i {
		sh.unlink(i)
		sh.linkFront(i)
	}
}

func (sh *shard) linkFront(i int32) {
	first := sh.entries[0].next
	sh.entries[i].prev, sh.entries[i].next = 0, first
	sh.entries[first].prev = i
	sh.entries[0].next = i
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
