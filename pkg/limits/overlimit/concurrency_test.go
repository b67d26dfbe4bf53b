package overlimit

import (
	"context"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/memory"
)

// TestConcurrencyIsNeverCached: a concurrency key refused through the cache
// is allowed again as soon as a release reaches the store by another way
// (another instance), long before the oldest slot's expiry that the
// refusal's RetryAfter names.
func TestConcurrencyIsNeverCached(t *testing.T) {
	ctx := context.Background()
	now := int64(1_700_000_000_000_000)
	store := memory.New(memory.Options{Now: func() int64 { return now }})
	t.Cleanup(func() { _ = store.Close() })
	cache := New(store, Options{})
	l := limits.Limit{Algorithm: limits.Concurrency, Requests: 1, Period: time.Minute}
	hit := func(s limits.Store, cost int64) limits.Result {
		res := make([]limits.Result, 1)
		s.Decide(ctx, []limits.Hit{{Key: "k", Limit: l, Cost: cost}}, res)
		return res[0]
	}
	if r := hit(cache, 1); !r.Allowed {
		t.Fatalf("first acquire: %+v", r)
	}
	if r := hit(cache, 1); r.Allowed || r.RetryAfter != time.Minute {
		t.Fatalf("second acquire: %+v, want refused until the lease ends", r)
	}
	if r := hit(store, -1); !r.Allowed {
		t.Fatalf("release behind the cache: %+v", r)
	}
	if r := hit(cache, 1); !r.Allowed || r.Local {
		t.Fatalf("acquire after the release: %+v, want allowed by the store", r)
	}
	if cache.Len() != 0 {
		t.Fatalf("the cache holds %d keys, want none", cache.Len())
	}
}
