package storetest

import (
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// bucketCases are the token bucket's own.
func bucketCases() []testCase { return []testCase{aboveBurstCase(), refillCase()} }

// aboveBurstCase: cost above the burst.
func aboveBurstCase() testCase {
	return testCase{
		name: "cost above the burst", algs: []limits.Algorithm{limits.TokenBucket},
		n: 4, period: s, burst: 6,
		steps: []step{
			{cost: 7, want: all(no(6, 0, 0))},
			{cost: 6, want: all(ok(0, 1500*ms))},
			{wait: 500 * ms, cost: 7, want: all(no(2, 0, s))},
			{cost: 2, want: all(ok(0, 1500*ms))},
		},
	}
}

// refillCase: bucket refills after waiting.
// 10 per second: a token every 100 ms.
func refillCase() testCase {
	return testCase{
		name: "bucket refills after waiting", algs: []limits.Algorithm{limits.TokenBucket},
		n: 10, period: s,
		steps: append(drain(10, s), []step{
			{cost: 1, want: all(no(0, 100*ms, s))},
			{wait: 350 * ms, cost: 1, want: all(ok(2, 750*ms))},
			{cost: 1, want: all(ok(1, 850*ms))},
			{cost: 1, want: all(ok(0, 950*ms))},
			{cost: 1, want: all(no(0, 50*ms, 950*ms))},
			{wait: beforeRetry, cost: 1, want: all(no(0, us, 900*ms+us))},
			{wait: us, cost: 1, want: all(ok(0, s))},
			{wait: 10 * s, cost: 0, want: all(ok(10, 0))},
		}...),
	}
}

// drain is n hits of cost 1 on a full bucket of n per T.
func drain(n int64, T time.Duration) []step {
	steps := make([]step, 0, n)
	for i := range n {
		steps = append(steps, step{cost: 1, want: all(ok(n-1-i, time.Duration(i+1)*T/time.Duration(n)))})
	}
	return steps
}
