package storetest

import (
	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// logCases are the sliding log's own.
func logCases() []testCase { return []testCase{slidingLogCase()} }

// slidingLogCase: each hit leaves the log T after it came.
func slidingLogCase() testCase {
	return testCase{
		name: "log frees hits one by one", algs: []limits.Algorithm{limits.SlidingLog}, n: 3, period: s,
		steps: []step{
			{cost: 1, want: all(ok(2, s))},
			{wait: 300 * ms, cost: 1, want: all(ok(1, s))},
			{wait: 300 * ms, cost: 1, want: all(ok(0, s))},
			// The first leaves at start + 1 s.
			{cost: 1, want: all(no(0, 400*ms, s))},
			{cost: 0, want: all(no(0, 400*ms, s))},
			{wait: beforeRetry, cost: 1, want: all(no(0, us, 600*ms+us))},
			{wait: us, cost: 1, want: all(ok(0, s))},
			// Cost 2 waits for the hits of start + 300 ms and + 600 ms.
			{cost: 2, want: all(no(0, 600*ms, s))},
			{wait: untilRetry, cost: 2, want: all(ok(0, s))},
			{wait: 2 * s, cost: 0, want: all(ok(3, 0))},
		},
	}
}

// The leaky bucket cases: 10 per second is one turn every I = 100 ms; B = 2
// places in the queue besides the request in service.
