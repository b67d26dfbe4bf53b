package overlimit

import (
	"context"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/breaker"
	"github.com/envoy-rls/envoy-rls/pkg/limits/memory"
)

// TestResetForgetsRefusal: a reset through the stack the server builds
// (cache, breaker, store) forgets the cached refusal and the store's
// state, so that the next hit is asked of the store and allowed.
func TestResetForgetsRefusal(t *testing.T) {
	mem := memory.New(memory.Options{SweepInterval: -1})
	defer mem.Close()
	c := New(breaker.New(mem, breaker.Options{Timeout: time.Second}), Options{})
	h := limits.Hit{Key: "k", Limit: limits.Limit{Algorithm: limits.FixedWindow, Requests: 1, Period: time.Hour}, Cost: 1}
	want := []bool{true, false, false}
	for i, w := range want {
		if r := decide1(c, h); r.Allowed != w || r.Err != nil {
			t.Fatalf("hit %d: got %+v, want allowed %v", i, r, w)
		}
	}
	if c.LocalAnswers() != 1 || c.Len() != 1 {
		t.Fatalf("got %d local answers and %d entries, want the third hit answered from the cache", c.LocalAnswers(), c.Len())
	}
	if err := c.Reset(context.Background(), []limits.Hit{h}); err != nil {
		t.Fatal(err)
	}
	if r := decide1(c, h); !r.Allowed || r.Local || c.Len() != 0 {
		t.Fatalf("after the reset got %+v (%d entries), want allowed by the store", r, c.Len())
	}
}
