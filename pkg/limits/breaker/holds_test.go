package breaker

import (
	"context"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/memory"
)

// TestHeldPassesThrough: the breaker reads holds from the store it wraps,
// open or not.
func TestHeldPassesThrough(t *testing.T) {
	mem := memory.New(memory.Options{SweepInterval: -1})
	defer mem.Close()
	b := New(mem, Options{})
	h := limits.Hit{
		Key: "k", Limit: limits.Limit{Algorithm: limits.TokenBucket, Requests: 10, Period: time.Second}, Cost: 4,
		Hold: limits.Hold{ID: "r1", Lease: time.Minute},
	}
	res := make([]limits.Result, 1)
	b.Decide(context.Background(), []limits.Hit{h}, res)
	if res[0].Hold != limits.HoldReserved {
		t.Fatalf("reserve: %+v", res[0])
	}
	b.circuit.open.Store(true)
	if r := decide(b); r.Err == nil {
		t.Fatalf("open breaker answered %+v, want ErrOpen", r)
	}
	if cost, n, err := limits.Held(context.Background(), b, h); err != nil || cost != 4 || n != 1 {
		t.Fatalf("Held: %d in %d, %v; want 4 in 1", cost, n, err)
	}
}
