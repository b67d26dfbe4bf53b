package rlqs

import (
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// periodSeconds is the period a limit's rate is taken over, N per it:
// limits.WindowLen at now: T, or, for a limit whose modifier makes it
// count in windows of real lengths, the length of its window now (a month
// of 28 to 31 days, a day of 23 or 25 hours across DST), so that the rate
// divided is N over the window it counts in. An Envoy's token bucket
// refills at that rate whatever is left of the window: such a quota
// divided by RLQS is a rate, not the quota's remaining count.
func periodSeconds(l limits.Limit, now time.Time) float64 {
	return limits.WindowLen(l, now.UnixMicro()).Seconds()
}
