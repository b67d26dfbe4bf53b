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
		fmt.Printf("allowed=%v remaining=%d retry=%s reset=%s\n", d.Result.Allowed, d.Result.Remaining, d.Result.RetryAfter, d.Result.ResetAfter)
	}
	// Output:
	// allowed=true remaining=1 retry=0s reset=1s
	// allowed=true remaining=0 retry=0s reset=2s
	// allowed=false remaining=0 retry=1s reset=2s
}

// A leaky bucket shapes instead of refusing: a request that fits its queue
// is allowed after Delay, its turn; one that does not is refused at once,
// and so is one whose turn comes after the caller's deadline.
func ExampleDecideWithin() {
	l := limits.Limit{Algorithm: limits.LeakyBucket, Requests: 10, Period: time.Second, Burst: 2}
	now := int64(1_700_000_000_000_000) // microseconds
	var s limits.State
	for _, maxDelay := range []int64{0, 0, 150_000, 0, 0} {
		d := limits.DecideWithin(l, s, 1, now, maxDelay)
		if d.Changed {
			s = d.State
		}
		fmt.Printf("allowed=%v delay=%s remaining=%d retry=%s reset=%s\n", d.Result.Allowed, d.Result.Delay, d.Result.Remaining, d.Result.RetryAfter, d.Result.ResetAfter)
	}
	// Output:
	// allowed=true delay=0s remaining=2 retry=0s reset=0s
	// allowed=true delay=100ms remaining=1 retry=0s reset=100ms
	// allowed=false delay=0s remaining=1 retry=50ms reset=100ms
	// allowed=true delay=200ms remaining=0 retry=0s reset=200ms
	// allowed=false delay=0s remaining=0 retry=100ms reset=200ms
}
