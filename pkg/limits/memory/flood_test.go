package memory_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/memory"
)

// perMinute is every algorithm's limit of 10 hits a minute, each with
// room for 10 at once (a leaky bucket takes one in service and 9 queued).
func perMinute(a limits.Algorithm) limits.Limit {
	l := limits.Limit{Algorithm: a, Requests: 10, Period: time.Minute}
	if a == limits.LeakyBucket {
		l.Burst = 9
	}
	return l
}

// junk decides n new keys of limit l, once each, as an attacker's flood of
// made-up descriptor values would; every one is allowed (new keys).
func junk(t *testing.T, s *memory.Store, prefix string, n int, l limits.Limit, tag uint64) {
	t.Helper()
	hit := []limits.Hit{{Limit: l, Cost: 1, Tag: tag}}
	results := make([]limits.Result, 1)
	buf := []byte(prefix)
	for i := range n {
		hit[0].Key = string(strconv.AppendInt(buf[:len(prefix)], int64(i), 10))
		s.Decide(context.Background(), hit, results)
		if !results[0].Allowed {
			t.Fatalf("junk key %d: got %+v want allowed (a new key)", i, results[0])
		}
	}
}

// refusedUntilRetry checks that key is refused now, is still refused 1 µs
// before the RetryAfter it is told, and is allowed at it: the store kept
// the key's state exactly (a forgotten key would be allowed at once).
func refusedUntilRetry(t *testing.T, s *memory.Store, clock *fakeClock, key string, l limits.Limit, when string) {
	t.Helper()
	r := decide(t, s, key, l, 1)
	if r.Allowed || r.RetryAfter <= 0 {
		t.Fatalf("%s: got %+v want refused (the key is at its limit)", when, r)
	}
	clock.advance(r.RetryAfter - time.Microsecond)
	if r2 := decide(t, s, key, l, 1); r2.Allowed {
		t.Fatalf("%s: 1 µs before the RetryAfter %v got %+v want refused", when, r.RetryAfter, r2)
	}
	clock.advance(time.Microsecond)
	if r3 := decide(t, s, key, l, 1); !r3.Allowed {
		t.Fatalf("%s: at the RetryAfter %v got %+v want allowed", when, r.RetryAfter, r3)
	}
}

// TestFloodKeepsALimitedKey is the flood of the hardening issue with small
// limits: a key at its limit, then 5,000 and 200,000 new keys decided once
// each, in a store of 1,000 keys (one shard), and in one of 4,096 (four
// shards of 1,024) with every junk key on the limited key's shard (its
// hash tag). The limited key is still refused, until the wait it is told
// and no longer. The flood forgets only its own keys.
func TestFloodKeepsALimitedKey(t *testing.T) {
	for _, shards := range []struct {
		name               string
		maxKeys, shardKeys int
		tag                uint64
	}{{"one shard", 1000, 1000, 0}, {"four shards", 4096, 1024, 0x5eed}} {
		for _, a := range algorithms {
			t.Run(shards.name+"/"+a.String(), func(t *testing.T) {
				clock := newFakeClock()
				s := memory.New(memory.Options{MaxKeys: shards.maxKeys, SweepInterval: -1, Now: clock.Load})
				defer s.Close()
				l := perMinute(a)
				limited := []limits.Hit{{Key: "limited", Tag: shards.tag, Limit: l, Cost: 1}}
				r := make([]limits.Result, 1)
				for i := range 10 {
					if s.Decide(context.Background(), limited, r); !r[0].Allowed {
						t.Fatalf("hit %d: got %+v want allowed", i, r[0])
					}
				}
				weight := 1
				if a == limits.SlidingLog {
					weight = 3 // room for 15 entries: 1 + 15/12 rounded up
				}
				flooded := 0
				for _, n := range []int{5_000, 200_000} {
					junk(t, s, fmt.Sprint("junk", n, ":"), n, perMinute(limits.FixedWindow), shards.tag)
					flooded += n
					// The junk keys fill what the limited key leaves of its
					// shard, and each one beyond evicts another junk key.
					held := shards.shardKeys - weight
					want := memory.Stats{Keys: held + 1, Evictions: uint64(flooded - held)}
					if st := s.Stats(); st != want {
						t.Errorf("after %d junk keys: Stats() %+v want %+v", flooded, st, want)
					}
					if s.Decide(context.Background(), limited, r); r[0].Allowed {
						t.Fatalf("after %d junk keys: got %+v want refused (the key is at its limit)", flooded, r[0])
					}
				}
				if shards.tag == 0 {
					refusedUntilRetry(t, s, clock, "limited", l, "after the flood")
				}
			})
		}
	}
}

// TestOnceAtItsLimit: a key brought to its limit by a single decision (a
// hit that costs the whole quota) is in probation, but on its lowest level:
// a flood of keys that each keep quota forgets only its own keys. Keys each
// at its limit after one decision rank with it, and push it out as the
// least recently decided: what a single decision charged is what the store
// may forget.
func TestOnceAtItsLimit(t *testing.T) {
	l := perMinute(limits.FixedWindow)
	one := limits.Limit{Algorithm: limits.FixedWindow, Requests: 1, Period: time.Minute}
	for _, c := range []struct {
		atLimit int   // junk keys at their limit, after 5,000 that keep quota
		want    int64 // what "once" has left
	}{{999, 0}, {1000, 10}} {
		clock := newFakeClock()
		s := memory.New(memory.Options{MaxKeys: 1000, SweepInterval: -1, Now: clock.Load})
		defer s.Close()
		if r := decide(t, s, "once", l, 10); !r.Allowed || r.Remaining != 0 {
			t.Fatalf("got %+v want allowed with nothing left", r)
		}
		junk(t, s, "junk:", 5_000, l, 0)
		junk(t, s, "at-limit:", c.atLimit, one, 0)
		wantStats(t, s, memory.Stats{Keys: 1000, Evictions: uint64(5_000 - 999 + c.atLimit)})
		if got := remaining(t, s, "once", l); got != c.want {
			t.Errorf("after 5,000 keys that keep quota and %d at their limit: remaining got %d want %d", c.atLimit, got, c.want)
		}
	}
}

// TestFloodOfKeysAtTheirLimit: keys at their limit after one hit each still
// enter probation, so they push out only each other, not a key decided
// twice.
func TestFloodOfKeysAtTheirLimit(t *testing.T) {
	clock := newFakeClock()
	s := memory.New(memory.Options{MaxKeys: 1000, SweepInterval: -1, Now: clock.Load})
	defer s.Close()
	two := limits.Limit{Algorithm: limits.FixedWindow, Requests: 2, Period: time.Minute}
	decide(t, s, "limited", two, 1)
	decide(t, s, "limited", two, 1)
	one := limits.Limit{Algorithm: limits.FixedWindow, Requests: 1, Period: time.Minute}
	junk(t, s, "junk:", 50_000, one, 0)
	wantStats(t, s, memory.Stats{Keys: 1000, Evictions: 50_000 - 999})
	if r := decide(t, s, "limited", two, 1); r.Allowed {
		t.Errorf("got %+v want refused (kept)", r)
	}
}

// TestEstablishedJunk: an attacker who decides each junk key twice makes
// it established, but with quota left: it goes back to probation before a
// key at its limit does, so the key at its limit is kept.
func TestEstablishedJunk(t *testing.T) {
	clock := newFakeClock()
	s := memory.New(memory.Options{MaxKeys: 1000, SweepInterval: -1, Now: clock.Load})
	defer s.Close()
	l := perMinute(limits.FixedWindow)
	for range 10 {
		decide(t, s, "limited", l, 1)
	}
	hit := []limits.Hit{{Limit: l, Cost: 1}}
	r := make([]limits.Result, 1)
	for i := range 20_000 {
		hit[0].Key = fmt.Sprint("junk", i)
		for range 2 {
			if s.Decide(context.Background(), hit, r); !r[0].Allowed {
				t.Fatalf("junk key %d: got %+v want allowed", i, r[0])
			}
		}
	}
	if got := s.Stats(); got.Keys != 1000 {
		t.Errorf("Stats() %+v: want 1000 keys", got)
	}
	if r := decide(t, s, "limited", l, 1); r.Allowed {
		t.Errorf("got %+v want refused (kept)", r)
	}
}

// TestEstablishedKeysBeyondTheProtectedShare: when more keys are
// established than the protected share (4/5 of a shard) holds, those with
// the most quota left, least recently decided first, go back to probation,
// and new keys push them out; a key at its limit goes last, though decided
// before them all.
func TestEstablishedKeysBeyondTheProtectedShare(t *testing.T) {
	clock := newFakeClock()
	s := memory.New(memory.Options{MaxKeys: 10, SweepInterval: -1, Now: clock.Load})
	defer s.Close()
	two := limits.Limit{Algorithm: limits.FixedWindow, Requests: 2, Period: time.Hour}
	decide(t, s, "limited", two, 1)
	decide(t, s, "limited", two, 1)
	many := limits.Limit{Algorithm: limits.FixedWindow, Requests: 100, Period: time.Hour}
	for i := range 9 {
		decide(t, s, fmt.Sprint("a", i), many, 1)
		decide(t, s, fmt.Sprint("a", i), many, 1)
	}
	// Full: "limited" and a2…a8 protected, a0 and a1 back in probation.
	wantStats(t, s, memory.Stats{Keys: 10})
	junk(t, s, "junk:", 100, many, 0)
	wantStats(t, s, memory.Stats{Keys: 10, Evictions: 100})
	if r := decide(t, s, "limited", two, 1); r.Allowed {
		t.Errorf("limited: got %+v want refused (kept)", r)
	}
	for i := range 9 {
		want := int64(98)
		if i < 2 {
			want = 100 // forgotten
		}
		if got := remaining(t, s, fmt.Sprint("a", i), many); got != want {
			t.Errorf("a%d: remaining got %d want %d", i, got, want)
		}
	}
}

// TestDecideAllocs: a decision allocates nothing, on a held key of every
// algorithm (a sliding log's array moves now and then: amortised, under
// one allocation per decision), in a joint run, and for a new key in a
// full store, which evicts one.
func TestDecideAllocs(t *testing.T) {
	ctx := context.Background()
	for _, c := range benchLimits {
		t.Run(c.name, func(t *testing.T) {
			s := benchStore(c.tick)
			defer s.Close()
			hits := []limits.Hit{{Key: "descriptor-key", Limit: c.limit, Cost: 1}}
			results := make([]limits.Result, 1)
			s.Decide(ctx, hits, results)
			if got := testing.AllocsPerRun(2000, func() { s.Decide(ctx, hits, results) }); got != 0 {
				t.Errorf("allocations per decision got %v want 0", got)
			}
			if !results[0].Allowed {
				t.Errorf("got %+v want allowed", results[0])
			}
		})
	}
	t.Run("joint", func(t *testing.T) {
		s := memory.New(memory.Options{})
		defer s.Close()
		hits := []limits.Hit{
			{Key: "{t}a", Limit: benchLimits[1].limit, Cost: 1, Joint: true},
			{Key: "{t}b", Limit: benchLimits[2].limit, Cost: 1},
		}
		results := make([]limits.Result, 2)
		s.Decide(ctx, hits, results)
		if got := testing.AllocsPerRun(2000, func() { s.Decide(ctx, hits, results) }); got != 0 {
			t.Errorf("allocations per run got %v want 0", got)
		}
	})
	t.Run("flood", func(t *testing.T) {
		const maxKeys = 2000
		keys := floodKeys(4 * maxKeys)
		clock := newFakeClock()
		s := memory.New(memory.Options{MaxKeys: maxKeys, SweepInterval: -1, Now: clock.Load})
		defer s.Close()
		hit := []limits.Hit{{Limit: perMinute(limits.FixedWindow), Cost: 1}}
		results := make([]limits.Result, 1)
		i := 0
		next := func() {
			hit[0].Key = keys[i%len(keys)]
			s.Decide(ctx, hit, results)
			i++
		}
		for range 2 * maxKeys {
			next()
		}
		if got := testing.AllocsPerRun(4*maxKeys, next); got != 0 {
			t.Errorf("allocations per new key in a full store got %v want 0", got)
		}
		if st := s.Stats(); st.Keys != maxKeys || st.Evictions < 4*maxKeys {
			t.Errorf("Stats() %+v: want %d keys and every new key evicting one", st, maxKeys)
		}
	})
}

// floodKeys are distinct keys shaped like the service's, four times the
// store of BenchmarkDecideFlood, so that a key comes back only after the
// flood has pushed it out.
func floodKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("rls:{%016x}:fw:60000000:0:3:api4:user%d", uint64(i)*0x9e3779b97f4a7c15, i)
	}
	return keys
}

// BenchmarkDecideFlood decides a new key per call in a full store, as a
// flood of made-up descriptor values does: every call makes room by
// evicting a live key. The clock stands still, so nothing expires.
func BenchmarkDecideFlood(b *testing.B) {
	const maxKeys = 100_000
	keys := floodKeys(4 * maxKeys)
	clock := newFakeClock()
	s := memory.New(memory.Options{MaxKeys: maxKeys, SweepInterval: -1, Now: clock.Load})
	defer s.Close()
	hit := []limits.Hit{{Limit: perMinute(limits.FixedWindow), Cost: 1}}
	results := make([]limits.Result, 1)
	for _, k := range keys[:2*maxKeys] {
		hit[0].Key = k
		s.Decide(context.Background(), hit, results)
	}
	i := 2 * maxKeys
	b.ReportAllocs()
	for b.Loop() {
		hit[0].Key = keys[i%len(keys)]
		s.Decide(context.Background(), hit, results)
		i++
	}
	if !results[0].Allowed {
		b.Fatalf("got %+v want allowed (a new key)", results[0])
	}
	if st := s.Stats(); st.Keys != maxKeys {
		b.Fatalf("Stats() %+v: want the store full, %d keys", st, maxKeys)
	}
}
