package keymap

import (
	"strconv"
	"testing"
	"time"
)

// TestBounded: a Map never holds more than its bound, and a full shard
// drops a stale entry before a live one.
func TestBounded(t *testing.T) {
	m := New[int](shardCount * 4)
	now := time.Unix(0, 0)
	stale := func(v int, _ time.Time) bool { return v < 0 }
	for i := range 10_000 {
		k := strconv.Itoa(i)
		s := m.Shard(k)
		s.Lock()
		s.Put(k, i, now, stale)
		s.Unlock()
	}
	if n := m.Len(); n > shardCount*4 {
		t.Fatalf("holds %d keys, bound %d", n, shardCount*4)
	}
	// A shard full of live entries and one stale: the stale one goes.
	s := &Shard[int]{m: map[string]int{"a": 1, "b": -1}, perShard: 2}
	s.Put("c", 3, now, stale)
	if _, ok := s.Get("b"); ok || len(s.m) != 2 {
		t.Fatalf("got %v, want the stale entry dropped", s.m)
	}
	// Delete drops the key it names, from its shard.
	ks := m.Shard("k")
	ks.Lock()
	ks.Put("k", 1, now, stale)
	ks.Unlock()
	m.Delete("k")
	ks.Lock()
	_, ok := ks.Get("k")
	ks.Unlock()
	if ok {
		t.Fatal("a deleted key is still held")
	}
	m.Clear()
	if n := m.Len(); n != 0 {
		t.Fatalf("holds %d keys after Clear", n)
	}
}
