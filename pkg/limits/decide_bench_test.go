package limits_test

import (
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// BenchmarkDecide is one decision of each algorithm, plain and with a
// lock, on the state the last one left: what the choice of an algorithm
// and of its modifiers costs on the hot path, beside the algorithm itself.
func BenchmarkDecide(b *testing.B) {
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC).UnixMicro()
	for _, a := range []limits.Algorithm{limits.SlidingWindow, limits.FixedWindow, limits.TokenBucket, limits.LeakyBucket, limits.SlidingLog, limits.Concurrency} {
		for _, block := range []time.Duration{0, time.Minute} {
			l := limits.Limit{Algorithm: a, Requests: 1 << 30, Period: time.Hour, Burst: 1 << 20}
			if a == limits.SlidingLog || a == limits.Concurrency {
				l.Requests, l.Burst = 1000, 0
			}
			name := a.String()
			if block > 0 {
				if a == limits.LeakyBucket || a == limits.Concurrency {
					continue
				}
				l.BlockFor, name = block, name+"+block_for"
			}
			b.Run(name, func(b *testing.B) {
				var s limits.State
				for i := range b.N {
					d := limits.DecideWithin(l, s, 1, now+int64(i)*1000, 0)
					if d.Changed {
						s = d.State
					}
				}
			})
		}
	}
}
