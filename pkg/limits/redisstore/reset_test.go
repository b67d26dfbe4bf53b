package redisstore

import (
	"context"
	"fmt"
	"testing"

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
