package hotkey

import (
	"context"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/memory"
)

// BenchmarkDecide measures one hit of a hot key through the layer, from
// every core at once, with the mode (most hits answered from the share)
// and without it (every hit to the store behind); store-hits/op is what
// the store behind saw per decision.
func BenchmarkDecide(b *testing.B) {
	for _, mode := range []struct {
		name string
		si   time.Duration
	}{{"sync_interval=10ms", 10 * time.Millisecond}, {"plain", 0}} {
		b.Run(mode.name, func(b *testing.B) {
			mem := memory.New(memory.Options{})
			defer mem.Close()
			c := &counted{Store: mem}
			s := New(c, Options{})
			l := limits.Limit{Algorithm: limits.FixedWindow, Requests: 1 << 32, Period: time.Hour, SyncInterval: mode.si}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				hits := []limits.Hit{{Key: "hot", Limit: l, Cost: 1}}
				res := make([]limits.Result, 1)
				for pb.Next() {
					s.Decide(context.Background(), hits, res)
					if res[0].Err != nil || !res[0].Allowed {
						b.Errorf("got %+v, want allowed", res[0])
						return
					}
				}
			})
			b.ReportMetric(float64(c.hits.Load())/float64(b.N), "store-hits/op")
		})
	}
}
