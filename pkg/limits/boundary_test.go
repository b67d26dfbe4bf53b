package limits_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// TestBoundaryBurst is the pitfall the seeds warn about: with N = 100 per
// minute, N requests in the last second of a window and N in the first
// second of the next. A fixed window lets 2N through; the others hold the
// burst near N. The leaky bucket's queue is B = N − 1, so that an idle bucket
// takes N at once as the others do (one in service, N − 1 waiting, the last
// of them delayed (N − 1)·T/N = 59.4 s).
func TestBoundaryBurst(t *testing.T) {
	const n = 100
	minute := int64(time.Minute / time.Microsecond)
	boundary := base + minute // base is aligned to the minute
	cases := []struct {
		limit limits.Limit
		want  int
		why   string
	}{
		{limits.Limit{Algorithm: limits.FixedWindow}, 2 * n, "the counter restarts at the boundary"},
		{limits.Limit{Algorithm: limits.SlidingWindow}, n + 1, "the previous window still weighs 100 × (T − e)/T; one more fits from e = 0.6 s"},
		{limits.Limit{Algorithm: limits.SlidingLog}, n, "exact: all N are inside (t − T, t]"},
		{limits.Limit{Algorithm: limits.TokenBucket, Burst: n}, n + 3, "B = N, plus the N/T refill of 2 s, 3.3 tokens"},
		{limits.Limit{Algorithm: limits.LeakyBucket, Burst: n - 1}, n + 3, "B = N − 1 queued; 3 places drain in 2 s, one every 0.6 s"},
	}
	var table strings.Builder
	table.WriteString("| algorithm | allowed of 2N |\n|---|---|\n")
	for _, c := range cases {
		l := c.limit
		l.Requests, l.Period = n, time.Minute
		var m model
		allowed := 0
		// 10 ms apart: the last second of one window, then the first second
		// of the next.
		for _, start := range []int64{boundary - sec, boundary} {
			for i := range int64(n) {
				if m.decide(l, 1, start+i*10*ms, 0).Result.Allowed {
					allowed++
				}
			}
		}
		if allowed != c.want {
			t.Errorf("%s: allowed got %d of %d, want %d (%s)", l, allowed, 2*n, c.want, c.why)
		}
		fmt.Fprintf(&table, "| `%s` | %d |\n", l.Algorithm, allowed)
	}
	t.Logf("N = %d per minute, %d requests 10 ms apart in the last second of a window and %d in the first second of the next:\n\n%s", n, n, n, table.String())
}
