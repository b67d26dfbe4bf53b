package memory

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

func TestKeysOfOneTagShareAShard(t *testing.T) {
	s := New(Options{SweepInterval: -1}) // the default MaxKeys: 64 shards
	defer s.Close()
	if len(s.shards) != maxShards {
		t.Fatalf("shards got %d want %d", len(s.shards), maxShards)
	}
	spread, untagged := map[int]bool{}, map[int]bool{}
	for i := range 200 {
		in := descriptors.KeyInput{Domain: "d", Entries: []descriptors.Entry{{Key: "k", Value: strconv.Itoa(i)}}}
		in.Limit = limits.Limit{Algorithm: limits.SlidingWindow, Period: time.Second}
		key1, tag1 := descriptors.KeyTag(in)
		in.Limit, in.Index = limits.Limit{Algorithm: limits.TokenBucket, Period: time.Hour}, 1
		key2, tag2 := descriptors.KeyTag(in)
		want := s.shardIndex(&limits.Hit{Key: key1, Tag: tag1})
		if got := s.shardIndex(&limits.Hit{Key: key2, Tag: tag2}); got != want {
			t.Errorf("%s and %s: shards got %d and %d, want one", key1, key2, want, got)
		}
		spread[want] = true
		// Without a tag, the whole key picks the shard.
		untagged[s.shardIndex(&limits.Hit{Key: key1})] = true
	}
	if len(spread) < maxShards/2 {
		t.Errorf("200 tags fall in %d shards: want them spread", len(spread))
	}
	if len(untagged) < maxShards/2 {
		t.Errorf("200 untagged keys fall in %d shards: want them spread", len(untagged))
	}
}

func TestWeight(t *testing.T) {
	for _, c := range []struct {
		log  int
		want int
	}{{0, 1}, {1, 2}, {12, 2}, {13, 3}, {100, 10}, {1000, 85}} {
		s := limits.State{Live: true, Log: make([]limits.LogEntry, 0, c.log)}
		if got := weight(s); got != c.want {
			t.Errorf("weight of a log with room for %d: got %d want %d", c.log, got, c.want)
		}
	}
}

// TestConcurrentJointRuns decides runs of two limits from many goroutines,
// half of them naming the keys in the other order, with the keys in two
// shards: the locks are taken in one order (no deadlock), and the runs are
// atomic (a is charged exactly as often as b).
func TestConcurrentJointRuns(t *testing.T) {
	s := New(Options{SweepInterval: -1})
	defer s.Close()
	keyA := "a"
	keyB := "b"
	for i := 0; s.shardIndex(&limits.Hit{Key: keyB}) == s.shardIndex(&limits.Hit{Key: keyA}); i++ {
		keyB = "b" + string(rune('0'+i%10)) + string(rune('0'+i/10))
	}
	a := limits.Limit{Algorithm: limits.SlidingLog, Requests: 100, Period: time.Hour}
	b := limits.Limit{Algorithm: limits.TokenBucket, Requests: 50, Period: time.Hour}
	const goroutines, runs = 16, 20
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			hits := []limits.Hit{{Key: keyA, Limit: a, Cost: 1, Joint: true}, {Key: keyB, Limit: b, Cost: 1}}
			if g%2 == 1 {
				hits = []limits.Hit{{Key: keyB, Limit: b, Cost: 1, Joint: true}, {Key: keyA, Limit: a, Cost: 1}}
			}
			results := make([]limits.Result, 2)
			for range runs {
				s.Decide(context.Background(), hits, results)
				if results[0].Allowed && results[1].Allowed {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if got := allowed.Load(); got != 50 {
		t.Errorf("runs allowed got %d want 50 of %d", got, goroutines*runs)
	}
	peek := []limits.Hit{{Key: keyA, Limit: a}, {Key: keyB, Limit: b}}
	results := make([]limits.Result, 2)
	s.Decide(context.Background(), peek, results)
	if results[0].Remaining != 50 || results[1].Remaining != 0 {
		t.Errorf("remaining got a %d, b %d; want 50 and 0 (charged together)", results[0].Remaining, results[1].Remaining)
	}
}

// TestMonotonicMicros: the default clock starts at the wall clock and
// advances with the monotonic one, never backwards.
func TestMonotonicMicros(t *testing.T) {
	clock := monotonicMicros()
	first := clock()
	if d := time.Now().UnixMicro() - first; d < 0 || d > int64(time.Second/time.Microsecond) {
		t.Fatalf("first reading %d is %d µs away from the wall clock, want within a second", first, d)
	}
	prev := first
	for range 1000 {
		now := clock()
		if now < prev {
			t.Fatalf("clock went back from %d to %d", prev, now)
		}
		prev = now
	}
	time.Sleep(2 * time.Millisecond)
	if got := clock() - first; got < 2000 {
		t.Errorf("after sleeping 2 ms the clock advanced %d µs, want at least 2000", got)
	}
}

// BenchmarkClock compares the embedded store's clock with reading the wall
// clock (time.Now takes two clock reads, the monotonic clock one).
func BenchmarkClock(b *testing.B) {
	b.Run("time.Now", func(b *testing.B) {
		for b.Loop() {
			_ = time.Now().UnixMicro()
		}
	})
	b.Run("monotonicMicros", func(b *testing.B) {
		clock := monotonicMicros()
		for b.Loop() {
			_ = clock()
		}
	})
}

// TestShardInvariants decides random hits of every algorithm, some joint,
// with refusals, peeks, refunds and expiry, then checks each shard's books
// against its lists: every held key on exactly one list and in the heap,
// the weights summed in used and protectedUsed, the protected share and
// the capacity respected.
func TestShardInvariants(t *testing.T) {
	algorithms := []limits.Algorithm{limits.FixedWindow, limits.SlidingWindow, limits.TokenBucket, limits.SlidingLog, limits.LeakyBucket}
	for _, maxKeys := range []int{1, 7, 60, 3000} {
		t.Run(strconv.Itoa(maxKeys), func(t *testing.T) {
			var now atomic.Int64
			now.Store(1_700_000_000_000_000)
			s := New(Options{MaxKeys: maxKeys, SweepInterval: -1, Now: now.Load})
			defer s.Close()
			rng := rand.New(rand.NewPCG(uint64(maxKeys), 1))
			hits := make([]limits.Hit, 0, 4)
			results := make([]limits.Result, 4)
			protectedSeen, holdsSeen := 0, 0
			for call := range 20_000 {
				now.Add(rng.Int64N(int64(1 + 200_000/maxKeys))) // some keys expire, not all
				hits = hits[:0]
				for j := range 1 + rng.IntN(3) {
					a := algorithms[rng.IntN(len(algorithms))]
					n := int64(1 + rng.IntN(30))
					hits = append(hits, limits.Hit{
						Key:   fmt.Sprint(a.ShortName(), ":", j, ":", rng.IntN(3*maxKeys+5)),
						Limit: limits.Limit{Algorithm: a, Requests: n, Period: time.Duration(1+rng.IntN(5)) * time.Second, Burst: n / 2, CountRefused: rng.IntN(4) == 0},
						Cost:  int64(rng.IntN(6)) - 1,
						Joint: rng.IntN(3) == 0,
						Hold:  randomHold(rng),
					})
				}
				hits[len(hits)-1].Joint = false
				s.Decide(context.Background(), hits, results[:len(hits)])
				if call%97 == 0 {
					for i := range s.shards {
						protectedSeen += checkShard(t, &s.shards[i])
						holdsSeen += len(s.shards[i].holds)
					}
				}
			}
			st := s.Stats()
			// A store of one key has no protected share.
			if st.Evictions == 0 || st.Expired == 0 || (protectedSeen == 0 && maxKeys > 1) || holdsSeen == 0 {
				t.Errorf("Stats() %+v, protected weight seen %d, keys with holds %d: want evictions, expiry, protected keys and holds, so that the test reaches all four", st, protectedSeen, holdsSeen)
			}
		})
	}
}

// checkShard fails t if sh's books disagree with its lists, and returns
// what its protected keys weigh.
func checkShard(t *testing.T, sh *shard) int {
	t.Helper()
	held, used, protectedUsed := 0, 0, 0
	for l := range int32(lists) {
		prev := l
		for i := sh.entries[l].next; i != l; i = sh.entries[i].next {
			e := &sh.entries[i]
			if i < lists || e.prev != prev || e.list != l {
				t.Fatalf("list %d: entry %d has prev %d, list %d: want prev %d, list %d", l, i, e.prev, e.list, prev, l)
			}
			if got, ok := sh.index[e.key]; !ok || got != i {
				t.Fatalf("list %d: entry %d (%q) indexed as %d, %v", l, i, e.key, got, ok)
			}
			if w := weight(e.state) + holdWeight*heldBy(t, sh, i); int(e.weight) != w {
				t.Fatalf("entry %d: weight %d, want %d", i, e.weight, w)
			}
			if sh.heap[e.heapAt] != i {
				t.Fatalf("entry %d: heap[%d] is %d", i, e.heapAt, sh.heap[e.heapAt])
			}
			held++
			used += int(e.weight)
			if l >= protected {
				protectedUsed += int(e.weight)
			}
			prev = i
		}
		if sh.entries[l].prev != prev {
			t.Fatalf("list %d: sentinel's prev %d, want %d", l, sh.entries[l].prev, prev)
		}
	}
	if n := countHeld(sh); n != len(sh.holds) {
		t.Fatalf("%d entries marked held, %d with holds", n, len(sh.holds))
	}
	if held != len(sh.index) || held != len(sh.heap) {
		t.Fatalf("%d entries on the lists, %d in the index, %d in the heap", held, len(sh.index), len(sh.heap))
	}
	if used != sh.used || protectedUsed != sh.protectedUsed {
		t.Fatalf("weights %d (protected %d), books say %d (%d)", used, protectedUsed, sh.used, sh.protectedUsed)
	}
	if sh.protectedUsed > sh.protectedCap {
		t.Fatalf("protected weigh %d, above their share %d", sh.protectedUsed, sh.protectedCap)
	}
	if sh.used > sh.capacity && held > 1 {
		t.Fatalf("%d entries weigh %d, above the capacity %d", held, sh.used, sh.capacity)
	}
	return protectedUsed
}

// randomHold is no hold half the time, else a reserve or a settle of one
// of a few ids, with a lease from a millisecond to a few seconds.
func randomHold(rng *rand.Rand) limits.Hold {
	if rng.IntN(2) == 0 {
		return limits.Hold{}
	}
	return limits.Hold{
		ID:     fmt.Sprint("r", rng.IntN(4)),
		Settle: rng.IntN(3) == 0,
		Lease:  time.Duration(1+rng.IntN(3000)) * time.Millisecond,
	}
}

// heldBy is how many holds entry i of sh has, checking them against the
// books: their summed cost, the entry due no later than the first lapse.
func heldBy(t *testing.T, sh *shard, i int32) int {
	t.Helper()
	e := &sh.entries[i]
	kh, ok := sh.holds[i]
	if ok != e.held {
		t.Fatalf("entry %d: held %v, holds %v", i, e.held, ok)
	}
	if !ok {
		return 0
	}
	if len(kh.ids) == 0 {
		t.Fatalf("entry %d: held, with no holds", i)
	}
	cost := int64(0)
	for _, r := range kh.ids {
		cost += r.Cost
		if r.Until < kh.next || r.Until < e.expireAt {
			t.Fatalf("entry %d: a hold lapses at %d, before next %d or the entry's due %d", i, r.Until, kh.next, e.expireAt)
		}
	}
	if cost != kh.cost {
		t.Fatalf("entry %d: holds cost %d, books say %d", i, cost, kh.cost)
	}
	return len(kh.ids)
}

func countHeld(sh *shard) int {
	n := 0
	for i := range sh.entries {
		if sh.entries[i].held {
			n++
		}
	}
	return n
}
