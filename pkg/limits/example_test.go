package limits_test

import (
	"fmt"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// Decide is a pure function of state, limit, cost and time: a store keeps
// the state and supplies the clock.
func ExampleDecide() {
	l := limits.Limit{Algorithm: limits.TokenBucket, Requests: 1, Period: time.Second, Burst: 2}
	now := int64(1_700_000_000_000_000) // microseconds
	var s limits.State
	for i := 0; i < 3; i++ {
		d := limits.Decide(l, s, 1, now)
		if d.Changed {
			s = d.State
		}
		fmt.Printf("allowed=%v remaining=%d reset=%s\n", d.Result.Allowed, d.Result.Remaining, d.Result.Reset)
	}
	// Output:
	// allowed=true remaining=1 reset=1s
	// allowed=true remaining=0 reset=2s
	// allowed=false remaining=0 reset=1s
}
