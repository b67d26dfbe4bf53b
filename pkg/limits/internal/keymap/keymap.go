// Package keymap is a map of store keys split into shards, each under a
// mutex of its own and bounded in size: what the layers in front of a
// store keep per key (the over-limit cache's refusals, the hot-key mode's
// shares), so that one busy key locks one shard and a flood of keys
// costs a bounded memory.
package keymap

import (
	"hash/maphash"
	"sync"
	"time"
)

// shardCount is how many shards a Map has.
const shardCount = 64

// evictScan is how many entries a full shard looks at to make room.
const evictScan = 16

// Map is a sharded map of keys to V. It is safe for concurrent use
// through its methods and those of its locked shards.
type Map[V any] struct {
	seed   maphash.Seed
	shards [shardCount]Shard[V]
}

// Shard is one shard of a Map: Lock it before Get, Put or Delete.
type Shard[V any] struct {
	sync.Mutex
	m        map[string]V
	perShard int
}

// New returns a Map that holds at most maxKeys keys (each shard its
// share, at least one).
func New[V any](maxKeys int) *Map[V] {
	m := &Map[V]{seed: maphash.MakeSeed()}
	for i := range m.shards {
		m.shards[i].m = make(map[string]V)
		m.shards[i].perShard = max(1, maxKeys/shardCount)
	}
	return m
}

// Shard returns the shard of key, unlocked.
func (m *Map[V]) Shard(key string) *Shard[V] {
	return &m.shards[maphash.String(m.seed, key)%shardCount]
}

// Delete drops key, if held.
func (m *Map[V]) Delete(key string) {
	s := m.Shard(key)
	s.Lock()
	delete(s.m, key)
	s.Unlock()
}

// Len is the number of keys held.
func (m *Map[V]) Len() int {
	n := 0
	for i := range m.shards {
		s := &m.shards[i]
		s.Lock()
		n += len(s.m)
		s.Unlock()
	}
	return n
}

// Clear drops every key.
func (m *Map[V]) Clear() {
	for i := range m.shards {
		s := &m.shards[i]
		s.Lock()
		clear(s.m)
		s.Unlock()
	}
}

// Get returns key's value, if held.
func (s *Shard[V]) Get(key string) (V, bool) {
	v, ok := s.m[key]
	return v, ok
}

// Delete drops key, if held.
func (s *Shard[V]) Delete(key string) { delete(s.m, key) }

// Put holds v under key. A new key in a full shard first makes room: the
// entries among a few it looks at (from a random place: map iteration
// order) that stale reports at now are dropped, or else the first one
// seen; bounded work per new key, even when every entry is live.
func (s *Shard[V]) Put(key string, v V, now time.Time, stale func(v V, now time.Time) bool) {
	if _, ok := s.m[key]; !ok && len(s.m) >= s.perShard {
		var first string
		dropped, seen := false, 0
		for k, old := range s.m {
			if seen == 0 {
				first = k
			}
			if stale(old, now) {
				delete(s.m, k)
				dropped = true
			}
			if seen++; seen == evictScan {
				break
			}
		}
		if !dropped {
			delete(s.m, first)
		}
	}
	s.m[key] = v
}
