package storetest

import (
	"context"
	"sync"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// Recording is a store that remembers the key of every hit it is asked to
// decide, then decides with Store: for tests of what reaches a store (key
// layout, which descriptors are sent at all).
type Recording struct {
	limits.Store

	mu   sync.Mutex
	keys []string
}

// Decide records the keys of hits and passes the call to r.Store.
func (r *Recording) Decide(ctx context.Context, hits []limits.Hit, results []limits.Result) {
	r.mu.Lock()
	for _, h := range hits {
		r.keys = append(r.keys, h.Key)
	}
	r.mu.Unlock()
	r.Store.Decide(ctx, hits, results)
}

// Take returns the keys recorded since the last Take, in order, and forgets
// them.
func (r *Recording) Take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := r.keys
	r.keys = nil
	return k
}
