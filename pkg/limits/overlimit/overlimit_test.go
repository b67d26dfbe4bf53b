package overlimit

import (
	"context"
	"fmt"
	"hash/crc32"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// fakeStore answers every hit with answer(hit) and records what it was asked.
type fakeStore struct {
	mu     sync.Mutex
	calls  [][]limits.Hit
	answer func(limits.Hit) limits.Result
}

func (f *fakeStore) Decide(_ context.Context, hits []limits.Hit, results []limits.Result) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, append([]limits.Hit(nil), hits...))
	for i, h := range hits {
		results[i] = f.answer(h)
	}
}

func (f *fakeStore) asked() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		n += len(c)
	}
	return n
}

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time      { return c.t }
func (c *fakeClock) add(d time.Duration) { c.t = c.t.Add(d) }
func refuse(retry time.Duration) limits.Result {
	return limits.Result{RetryAfter: retry, ResetAfter: 2 * retry}
}

var lim = limits.Limit{Algorithm: limits.SlidingWindow, Requests: 10, Period: time.Second}

func newCache(t *testing.T, answer func(limits.Hit) limits.Result, o Options) (*Cache, *fakeStore, *fakeClock) {
	t.Helper()
	clk := &fakeClock{t: time.Unix(1_000_000, 0)}
	fs := &fakeStore{answer: answer}
	o.Now = clk.now
	return New(fs, o), fs, clk
}

func decide1(c *Cache, h limits.Hit) limits.Result {
	r := make([]limits.Result, 1)
	c.Decide(context.Background(), []limits.Hit{h}, r)
	return r[0]
}

func TestExactness(t *testing.T) {
	c, fs, clk := newCache(t, func(limits.Hit) limits.Result { return refuse(300 * time.Millisecond) }, Options{})
	h := limits.Hit{Key: "k", Limit: lim, Cost: 1}
	if r := decide1(c, h); r.Allowed || r.RetryAfter != 300*time.Millisecond || r.ResetAfter != 600*time.Millisecond || r.Local {
		t.Fatalf("first answer %+v, want the store's", r)
	}
	// Before T: answered locally with the time left.
	for _, step := range []time.Duration{0, 100 * time.Millisecond, 199 * time.Millisecond} {
		clk.add(step)
		r := decide1(c, h)
		want := time.Unix(1_000_000, 0).Add(300 * time.Millisecond).Sub(clk.t)
		full := time.Unix(1_000_000, 0).Add(600 * time.Millisecond).Sub(clk.t)
		if r.Allowed || r.Remaining != 0 || r.RetryAfter != want || r.ResetAfter != full || r.Delay != 0 || r.Err != nil || !r.Local {
			t.Fatalf("local answer %+v, want refused with retry %v, reset %v", r, want, full)
		}
	}
	if fs.asked() != 1 {
		t.Fatalf("store asked %d times before T, want 1", fs.asked())
	}
	if c.LocalAnswers() != 3 {
		t.Errorf("LocalAnswers = %d, want 3", c.LocalAnswers())
	}
	// At T exactly: the store is asked.
	clk.add(time.Millisecond)
	fs.answer = func(limits.Hit) limits.Result {
		return limits.Result{Allowed: true, Remaining: 9, ResetAfter: time.Second}
	}
	if r := decide1(c, h); !r.Allowed || fs.asked() != 2 {
		t.Fatalf("at T: %+v, store asked %d times, want allowed by the store", r, fs.asked())
	}
	if c.Len() != 0 {
		t.Errorf("expired entry kept: Len = %d", c.Len())
	}
	// An allowed answer caches nothing.
	decide1(c, h)
	if fs.asked() != 3 {
		t.Errorf("allowed key answered locally")
	}
}

func TestSentTimeNotReceipt(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_000_000, 0)}
	// The store takes 50ms to answer: T counts from the send.
	fs := &fakeStore{answer: func(limits.Hit) limits.Result {
		clk.add(50 * time.Millisecond)
		return refuse(100 * time.Millisecond)
	}}
	c := New(fs, Options{Now: clk.now})
	h := limits.Hit{Key: "k", Limit: lim, Cost: 1}
	decide1(c, h)
	clk.add(49 * time.Millisecond) // 99ms after the send
	if r := decide1(c, h); r.RetryAfter != time.Millisecond || fs.asked() != 1 {
		t.Fatalf("99ms after the send: %+v (asked %d)", r, fs.asked())
	}
	clk.add(time.Millisecond)
	decide1(c, h)
	if fs.asked() != 2 {
		t.Fatalf("100ms after the send the store was not asked")
	}
}

func TestBypass(t *testing.T) {
	leaky := lim
	leaky.Algorithm = limits.LeakyBucket
	counted := lim
	counted.CountRefused = true
	countedBucket := counted
	countedBucket.Algorithm = limits.TokenBucket
	for _, tc := range []struct {
		name string
		hits []limits.Hit
		// probe is the index in hits of the hit asked again.
		probe int
	}{
		{"count_refused sliding_window", []limits.Hit{{Key: "k", Limit: counted, Cost: 1}}, 0},
		{"count_refused token_bucket", []limits.Hit{{Key: "k", Limit: countedBucket, Cost: 1}}, 0},
		{"leaky_bucket", []limits.Hit{{Key: "k", Limit: leaky, Cost: 1}}, 0},
		{"joint first", []limits.Hit{{Key: "k", Limit: lim, Cost: 1, Joint: true}, {Key: "k2", Limit: lim, Cost: 1}}, 0},
		{"joint last", []limits.Hit{{Key: "k", Limit: lim, Cost: 1, Joint: true}, {Key: "k2", Limit: lim, Cost: 1}}, 1},
		{"cost 2", []limits.Hit{{Key: "k", Limit: lim, Cost: 2}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, fs, _ := newCache(t, func(limits.Hit) limits.Result { return refuse(time.Second) }, Options{})
			for range 3 {
				c.Decide(context.Background(), tc.hits, make([]limits.Result, len(tc.hits)))
			}
			if fs.asked() != 3*len(tc.hits) || c.Len() != 0 {
				t.Fatalf("store asked %d times, cache holds %d: want every hit sent, none cached", fs.asked(), c.Len())
			}
		})
	}
}

// TestCountedFixedWindow: a fixed window that counts refused hits is
// refused until its window ends whatever else arrives, so its refusal is
// cached as envoyproxy/ratelimit's local cache holds an over-limit key: the
// hits answered locally are not sent, and are marked Local.
func TestCountedFixedWindow(t *testing.T) {
	fw := limits.Limit{Algorithm: limits.FixedWindow, Requests: 10, Period: time.Minute, CountRefused: true}
	c, fs, clk := newCache(t, func(limits.Hit) limits.Result { return refuse(20 * time.Second) }, Options{})
	h := limits.Hit{Key: "k", Limit: fw, Cost: 1}
	if r := decide1(c, h); r.Local {
		t.Fatalf("the store's answer %+v is marked Local", r)
	}
	clk.add(19 * time.Second)
	for range 3 {
		if r := decide1(c, h); r.Allowed || !r.Local || r.RetryAfter != time.Second {
			t.Fatalf("before the window's end: %+v, want a Local refusal with a second to wait", r)
		}
	}
	if fs.asked() != 1 {
		t.Fatalf("store asked %d times before the window's end, want 1", fs.asked())
	}
	clk.add(time.Second)
	if decide1(c, h); fs.asked() != 2 {
		t.Fatalf("at the window's end the store was not asked")
	}
	// A cost above 1 still goes to the store, so that its charge counts.
	c2, fs2, _ := newCache(t, func(limits.Hit) limits.Result { return refuse(20 * time.Second) }, Options{})
	decide1(c2, h)
	if r := decide1(c2, limits.Hit{Key: "k", Limit: fw, Cost: 3}); r.Local || fs2.asked() != 2 {
		t.Fatalf("a cost of 3 on a cached key: %+v, store asked %d times, want the store's answer", r, fs2.asked())
	}
}

func TestPeeksAndRefundsGoToTheStore(t *testing.T) {
	c, fs, _ := newCache(t, func(h limits.Hit) limits.Result {
		if h.Cost <= 0 {
			return limits.Result{Allowed: true, Remaining: 1, ResetAfter: time.Second}
		}
		return refuse(time.Second)
	}, Options{})
	h := limits.Hit{Key: "k", Limit: lim, Cost: 1}
	decide1(c, h)
	decide1(c, h)
	if fs.asked() != 1 {
		t.Fatalf("cost 1 not cached")
	}
	peek := h
	peek.Cost = 0
	if r := decide1(c, peek); !r.Allowed || fs.asked() != 2 {
		t.Fatalf("peek answered locally: %+v", r)
	}
	// A peek leaves the entry; a refund drops it.
	decide1(c, h)
	if fs.asked() != 2 {
		t.Fatalf("a peek dropped the entry")
	}
	refund := h
	refund.Cost = -1
	if r := decide1(c, refund); !r.Allowed || fs.asked() != 3 {
		t.Fatalf("refund answered locally: %+v", r)
	}
	decide1(c, h)
	if fs.asked() != 4 {
		t.Fatalf("after a refund the key was still answered locally")
	}
}

func TestChangedLimitMisses(t *testing.T) {
	c, fs, _ := newCache(t, func(limits.Hit) limits.Result { return refuse(time.Second) }, Options{})
	h := limits.Hit{Key: "k", Limit: lim, Cost: 1}
	decide1(c, h)
	h.Limit.Requests = 20
	decide1(c, h)
	if fs.asked() != 2 {
		t.Fatalf("a hit with another limit was answered from the cache")
	}
}

func TestClear(t *testing.T) {
	c, fs, _ := newCache(t, func(limits.Hit) limits.Result { return refuse(time.Second) }, Options{})
	h := limits.Hit{Key: "k", Limit: lim, Cost: 1}
	decide1(c, h)
	decide1(c, h)
	if fs.asked() != 1 {
		t.Fatal("not cached")
	}
	c.Clear()
	if c.Len() != 0 {
		t.Fatalf("Len after Clear = %d", c.Len())
	}
	decide1(c, h)
	if fs.asked() != 2 {
		t.Fatal("answered locally after Clear")
	}
}

func TestNotCached(t *testing.T) {
	for name, r := range map[string]limits.Result{
		"error":         {Err: limits.ErrUnavailable},
		"remaining > 0": {Remaining: 1, RetryAfter: time.Second, ResetAfter: time.Second},
		"never fits":    {ResetAfter: time.Second},
		"no reset":      {},
		"allowed":       {Allowed: true, ResetAfter: time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			c, _, _ := newCache(t, func(limits.Hit) limits.Result { return r }, Options{})
			decide1(c, limits.Hit{Key: "k", Limit: lim, Cost: 1})
			if c.Len() != 0 {
				t.Fatalf("cached %+v", r)
			}
		})
	}
}

func TestMixedBatch(t *testing.T) {
	c, fs, _ := newCache(t, func(h limits.Hit) limits.Result {
		if h.Key == "hot" {
			return refuse(time.Second)
		}
		return limits.Result{Allowed: true, Remaining: 5, ResetAfter: time.Second}
	}, Options{})
	hits := []limits.Hit{
		{Key: "a", Limit: lim, Cost: 1},
		{Key: "hot", Limit: lim, Cost: 1},
		{Key: "b", Limit: lim, Cost: 1},
	}
	res := make([]limits.Result, 3)
	c.Decide(context.Background(), hits, res)
	for range 2 {
		res = make([]limits.Result, 3)
		c.Decide(context.Background(), hits, res)
		if !res[0].Allowed || res[1].Allowed || !res[2].Allowed || res[1].Delay != 0 || res[0].Remaining != 5 {
			t.Fatalf("mixed batch answered %+v", res)
		}
	}
	last := fs.calls[len(fs.calls)-1]
	if len(last) != 2 || last[0].Key != "a" || last[1].Key != "b" {
		t.Fatalf("store got %+v, want a and b only", last)
	}
	// All local: no store call at all.
	n := len(fs.calls)
	c.Decide(context.Background(), hits[1:2], make([]limits.Result, 1))
	if len(fs.calls) != n {
		t.Fatal("store called for a batch answered locally")
	}
}

func TestBound(t *testing.T) {
	const max = 640
	c, _, clk := newCache(t, func(limits.Hit) limits.Result { return refuse(time.Hour) }, Options{MaxEntries: max})
	for i := range 20 * max {
		decide1(c, limits.Hit{Key: fmt.Sprint("k", i), Limit: lim, Cost: 1})
	}
	if n := c.Len(); n > max {
		t.Fatalf("Len = %d, above the bound %d", n, max)
	}
	// Expired entries make room first.
	clk.add(2 * time.Hour)
	for i := range max {
		decide1(c, limits.Hit{Key: fmt.Sprint("new", i), Limit: lim, Cost: 1})
	}
	if n := c.Len(); n > max {
		t.Fatalf("Len = %d, above the bound %d", n, max)
	}
}

// TestConcurrent runs calls, refunds, peeks and Clear from many goroutines
// on a clock that only moves forward, and checks what the cache promises,
// answer by answer: it never allows a hit on its own (every allowed answer
// is the store's, for that very hit); it refuses only hits of cost 1 that
// the store refuses, never for longer than the store's own window (a
// refusal's instant plus its RetryAfter is never past the latest refusal
// the store gave the key); peeks and refunds always reach the store; and
// the bound holds. Run under -race it also checks the locking.
func TestConcurrent(t *testing.T) {
	var tick atomic.Int64 // µs since the clock's start: every reading moves it
	now := func() time.Time { return time.Unix(1_000_000, 0).Add(time.Duration(tick.Add(1)) * time.Microsecond) }
	const retry = 50 * time.Millisecond // many times the clock's moves in a round
	refusing := func(key string) bool { return key == "x" || strings.HasPrefix(key, "r") }
	remainingOf := func(key string) int64 { return 1 + int64(crc32.ChecksumIEEE([]byte(key))%1000) }

	var mu sync.Mutex
	until := map[string]time.Time{} // the end of the latest refusal the store gave each key
	var storeAllowed, storeNonPositive atomic.Int64
	fs := &fakeStore{answer: func(h limits.Hit) limits.Result {
		if h.Cost <= 0 {
			storeNonPositive.Add(1)
		}
		if h.Cost == 1 && refusing(h.Key) {
			at := now()
			mu.Lock()
			if u := at.Add(retry); u.After(until[h.Key]) {
				until[h.Key] = u
			}
			mu.Unlock()
			return limits.Result{RetryAfter: retry, ResetAfter: 2 * retry}
		}
		storeAllowed.Add(1)
		return limits.Result{Allowed: true, Remaining: remainingOf(h.Key), ResetAfter: time.Second}
	}}
	const maxEntries = 128
	c := New(fs, Options{MaxEntries: maxEntries, Now: now})

	var allowed, nonPositive atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				prefix := "a"
				if i%40 < 20 {
					prefix = "r"
				}
				hits := []limits.Hit{
					{Key: fmt.Sprintf("%s:%d:%d", prefix, g, i%40), Limit: lim, Cost: 1},
					{Key: "x", Limit: lim, Cost: int64(i%3 - 1)},
				}
				if hits[1].Cost <= 0 {
					nonPositive.Add(1)
				}
				sent := now()
				res := make([]limits.Result, len(hits))
				c.Decide(context.Background(), hits, res)
				for j, r := range res {
					h := hits[j]
					switch {
					case r.Err != nil || r.Delay != 0:
						t.Errorf("%s, cost %d: got %+v, want neither an error nor a delay", h.Key, h.Cost, r)
						return
					case r.Allowed && h.Cost == 1 && refusing(h.Key):
						t.Errorf("%s: allowed, but the store refuses it", h.Key)
						return
					case r.Allowed && r.Remaining != remainingOf(h.Key):
						t.Errorf("%s: got remaining %d, want the store's answer for this hit, %d", h.Key, r.Remaining, remainingOf(h.Key))
						return
					case r.Allowed:
						allowed.Add(1)
					case h.Cost != 1 || !refusing(h.Key):
						t.Errorf("%s, cost %d: refused, but the store allows it", h.Key, h.Cost)
						return
					case r.RetryAfter <= 0:
						t.Errorf("%s: refused with retry %s, want a positive wait", h.Key, r.RetryAfter)
						return
					default:
						mu.Lock()
						u := until[h.Key]
						mu.Unlock()
						if end := sent.Add(r.RetryAfter); end.After(u) {
							t.Errorf("%s: refused until %s, past the store's latest refusal, until %s", h.Key, end, u)
							return
						}
					}
				}
				if i%500 == 0 {
					c.Clear()
				}
			}
		})
	}
	wg.Wait()
	if a, s := allowed.Load(), storeAllowed.Load(); a != s {
		t.Errorf("%d allowed answers, %d from the store: want every one from the store", a, s)
	}
	if n, s := nonPositive.Load(), storeNonPositive.Load(); n != s {
		t.Errorf("%d peeks and refunds sent, %d reached the store: want all", n, s)
	}
	if c.LocalAnswers() == 0 {
		t.Error("no hit answered locally: the test checked nothing of the cache")
	}
	if n := c.Len(); n > maxEntries {
		t.Errorf("Len = %d, above the bound %d", n, maxEntries)
	}
	c.Clear()
	if n := c.Len(); n != 0 {
		t.Errorf("Len after Clear = %d", n)
	}
}

func BenchmarkDecideLocal(b *testing.B) {
	c := New(&fakeStore{answer: func(limits.Hit) limits.Result { return refuse(time.Hour) }}, Options{})
	hits := []limits.Hit{{Key: "rls:{0123456789abcdef}:sw:1000000:0:4:edge7:api_key5:bench", Limit: lim, Cost: 1}}
	res := make([]limits.Result, 1)
	b.ReportAllocs()
	for b.Loop() {
		c.Decide(context.Background(), hits, res)
	}
}
