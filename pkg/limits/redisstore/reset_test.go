package redisstore

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// TestResetCluster: on a cluster, with Redis's clock, a reset deletes the
// state of every algorithm's key wherever its slot lives, so that the next
// hit is allowed, and leaves another key's state alone. (The conformance
// suite checks Reset on one Redis, at fixed instants.)
func TestResetCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	c := newClient(t, ClientOptions{Cluster: cl.Addrs(), Timeout: testTimeout})
	s := New(c, Options{})
	defer s.Close()
	ctx := context.Background()
	for g, alg := range implemented {
		l := allowing(alg, 2)
		a := limits.Hit{Key: fmt.Sprintf("{reset%d}:a", g), Limit: l, Cost: 1}
		b := limits.Hit{Key: fmt.Sprintf("{other%d}:b", g), Limit: l, Cost: 1}
		res := make([]limits.Result, 1)
		decide := func(h limits.Hit) limits.Result {
			s.Decide(ctx, []limits.Hit{h}, res)
			if res[0].Err != nil {
				t.Fatalf("%s %s: %v", alg, h.Key, res[0].Err)
			}
			return res[0]
		}
		decide(b)
		for range 2 {
			decide(a)
		}
		if r := decide(a); r.Allowed {
			t.Fatalf("%s: the third hit of 2 per hour was allowed", alg)
		}
		if err := s.Reset(ctx, []limits.Hit{a}); err != nil {
			t.Fatalf("%s: reset: %v", alg, err)
		}
		if r := decide(a); !r.Allowed || r.Remaining != 1 {
			t.Errorf("%s: after the reset got %+v, want allowed with 1 remaining, as a new key", alg, r)
		}
		if r := decide(b); !r.Allowed || r.Remaining != 0 {
			t.Errorf("%s: the other key got %+v, want its second hit allowed with 0 remaining", alg, r)
		}
	}
}

// TestResetHeard: a reset on one store is announced on the channel, and
// another store on the same Redis that hears it forgets the keys (a
// sliding window's previous count kept) and hands them on.
func TestResetHeard(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, ClientOptions{URL: srv.URL(), Timeout: testTimeout})
	a := New(c, Options{ResetChannel: "test:resets"})
	defer a.Close()
	b := New(c, Options{ResetChannel: "test:resets"})
	defer b.Close()
	type heardKeys struct {
		keys []string
		kept []string // those b still kept a previous count of
	}
	heard := make(chan heardKeys, 16)
	b.HearResets(func(keys []string) {
		h := heardKeys{keys: keys}
		for _, k := range keys {
			if _, ok := b.prevs.get(k); ok {
				h.kept = append(h.kept, k)
			}
		}
		heard <- h
	})
	hit := limits.Hit{Key: "{heard}:a\n1:b", Limit: allowing(limits.SlidingWindow, 2), Cost: 1}
	ctx := context.Background()
	deadline := time.After(10 * time.Second)
	for {
		// Kept by b as previous windows' final counts, to be forgotten.
		w := time.Now().UnixMicro() / hit.Limit.PeriodMicros()
		for i := w - 2; i <= w+2; i++ {
			b.prevs.put(windowKey(hit.Key, i), 5)
		}
		if err := a.Reset(ctx, []limits.Hit{hit}); err != nil {
			t.Fatal(err)
		}
		select {
		case h := <-heard:
			if len(h.keys) != 4 || h.keys[0] != hit.Key || !slices.Contains(h.keys[1:], windowKey(hit.Key, w)) {
				t.Fatalf("heard %q, want the hit's key and its 3 window counters around %d", h.keys, w)
			}
			if len(h.kept) != 0 {
				t.Fatalf("b still keeps the counts of %q", h.kept)
			}
			return
		case <-time.After(200 * time.Millisecond): // b not subscribed yet: again
		case <-deadline:
			t.Fatal("the reset was not heard within 10 s")
		}
	}
}

func TestKeysEncoding(t *testing.T) {
	keys := []string{"rls:{1}:fw:1:0:4:edge1:k3:a\n:", "", "12:x"}
	got, ok := decodeKeys(encodeKeys(keys))
	if !ok || len(got) != len(keys) {
		t.Fatalf("got %q, %v", got, ok)
	}
	for i := range keys {
		if got[i] != keys[i] {
			t.Errorf("key %d: got %q, want %q", i, got[i], keys[i])
		}
	}
	for _, bad := range []string{"x", "5:ab", "-1:", "3"} {
		if _, ok := decodeKeys(bad); ok {
			t.Errorf("decodeKeys(%q) accepted it", bad)
		}
	}
}
