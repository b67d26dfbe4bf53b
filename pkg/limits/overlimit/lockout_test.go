package overlimit

import (
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/memory"
)

// TestLockoutCached: a lockout's refusal is cached until the lock's end,
// past its window's, since the store answers with the time left on the
// lock; and a refund through the cache forgets the key, as the store
// lifts the lock.
func TestLockoutCached(t *testing.T) {
	now := time.UnixMicro(1_700_000_000_000_000)
	mem := memory.New(memory.Options{SweepInterval: -1, Now: func() int64 { return now.UnixMicro() }})
	defer mem.Close()
	c := New(mem, Options{Now: func() time.Time { return now }})
	h := limits.Hit{Key: "k", Limit: limits.Limit{Algorithm: limits.FixedWindow, Requests: 1, Period: time.Minute, BlockFor: 15 * time.Minute}, Cost: 1}
	if r := decide1(c, h); !r.Allowed {
		t.Fatalf("first hit: %+v", r)
	}
	if r := decide1(c, h); r.Allowed || r.Local || !r.Locked || r.RetryAfter != 15*time.Minute {
		t.Fatalf("second hit: %+v, want the store's refusal, locked for 15m", r)
	}
	now = now.Add(10 * time.Minute) // ten windows later
	if r := decide1(c, h); r.Allowed || !r.Local || r.RetryAfter != 5*time.Minute {
		t.Fatalf("10m later: %+v, want the cache's refusal for the lock's 5m left", r)
	}
	now = now.Add(5 * time.Minute)
	if r := decide1(c, h); !r.Allowed || r.Local {
		t.Fatalf("at the lock's end: %+v, want allowed by the store", r)
	}
	if r := decide1(c, h); r.Allowed || r.Local || !r.Locked {
		t.Fatalf("locked again: %+v", r)
	}
	refund := h
	refund.Cost = -1
	if r := decide1(c, refund); !r.Allowed {
		t.Fatalf("refund: %+v", r)
	}
	if r := decide1(c, h); !r.Allowed || r.Local || c.Len() != 0 {
		t.Fatalf("after the refund: %+v (%d entries), want allowed by the store", r, c.Len())
	}
}
