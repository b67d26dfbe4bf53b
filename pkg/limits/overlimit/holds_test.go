package overlimit

import (
	"context"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/breaker"
	"github.com/envoy-rls/envoy-rls/pkg/limits/memory"
)

// holdStack is the stack the server builds (cache, breaker, store) over
// the embedded store, and a fixed window of 2 per hour with holds of a
// minute's lease.
func holdStack(t *testing.T) (*Cache, func(id string, settle bool) limits.Hit) {
	t.Helper()
	mem := memory.New(memory.Options{SweepInterval: -1})
	t.Cleanup(func() { mem.Close() })
	c := New(breaker.New(mem, breaker.Options{Timeout: time.Second}), Options{})
	l := limits.Limit{Algorithm: limits.FixedWindow, Requests: 2, Period: time.Hour}
	return c, func(id string, settle bool) limits.Hit {
		return limits.Hit{Key: "k", Limit: l, Cost: 1, Hold: limits.Hold{ID: id, Settle: settle, Lease: time.Minute}}
	}
}

// fill reserves r1 and charges a plain hit, so that the key is full, then
// has a third hit refused and a fourth answered from the cache.
func fill(t *testing.T, c *Cache, hit func(string, bool) limits.Hit) {
	t.Helper()
	if r := decide1(c, hit("r1", false)); r.Hold != limits.HoldReserved {
		t.Fatalf("reserve: %+v", r)
	}
	for i, local := range []bool{false, false, true} {
		r := decide1(c, hit("", false))
		if r.Allowed != (i == 0) || r.Local != local {
			t.Fatalf("plain hit %d: %+v", i, r)
		}
	}
}

// TestSettleReachesTheStore: a settle of a key the cache refuses is never
// answered here; it ends the hold in the store, and the key, given back,
// is forgotten.
func TestSettleReachesTheStore(t *testing.T) {
	c, hit := holdStack(t)
	fill(t, c, hit)
	settle := hit("r1", true)
	settle.Cost = 0
	if r := decide1(c, settle); r.Local || r.Hold != limits.HoldSettled || !r.Allowed {
		t.Fatalf("settle: %+v, want the store's, settled", r)
	}
	if r := decide1(c, hit("", false)); r.Local || !r.Allowed {
		t.Fatalf("after the settle: %+v, want the store's answer, allowed", r)
	}
}

// TestRepeatedReserveReachesTheStore: Envoy's retry of an admitted reserve
// is allowed, whatever the cache holds of its key.
func TestRepeatedReserveReachesTheStore(t *testing.T) {
	c, hit := holdStack(t)
	fill(t, c, hit)
	if r := decide1(c, hit("r1", false)); r.Local || r.Hold != limits.HoldRepeated || !r.Allowed {
		t.Fatalf("repeated reserve: %+v, want the store's, allowed", r)
	}
	if cost, n, err := limits.Held(context.Background(), c, hit("", false)); err != nil || cost != 1 || n != 1 {
		t.Fatalf("Held through the cache and the breaker: %d in %d, %v; want 1 in 1", cost, n, err)
	}
}
