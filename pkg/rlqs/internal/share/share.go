// Package share divides one global rate among the clients that want it and
// turns each client's share into a token bucket that Envoy's
// rate_limit_quota filter can enforce.
//
// Everything here is pure arithmetic on rates (requests per second): no
// clock, no I/O. The service reads the reports, the store and the clock, and
// passes the numbers in.
package share

import (
	"math"
	"sort"
	"time"
)

// Demand is what one client asked for: Rate requests per second, allowed
// and denied together. Known is false for a client whose demand is not
// measured yet (its first report has no elapsed time); such a client is
// counted as wanting an equal share.
type Demand struct {
	Rate  float64
	Known bool
}

// Measure turns one report of a bucket into a demand. Envoy reports the
// first request of a new bucket at once with time_elapsed 0, so a zero or
// negative elapsed time yields an unknown demand rather than a division by
// zero. The two counts are added saturating: a report of 2^64−1 allowed
// and one denied is the largest demand there is, not zero.
func Measure(allowed, denied uint64, elapsed time.Duration) Demand {
	if elapsed <= 0 {
		return Demand{}
	}
	return Demand{Rate: float64(Requests(allowed, denied)) / elapsed.Seconds(), Known: true}
}

// Requests is allowed + denied, held at the largest uint64 where the sum
// would wrap: the counts come from the client, which may send anything.
func Requests(allowed, denied uint64) uint64 {
	if sum := allowed + denied; sum >= allowed {
		return sum
	}
	return math.MaxUint64
}

// Divide splits limit (requests per second) among the clients max-min
// fairly: a client asking for less than an equal share of what is left gets
// what it asks, the rest is split among the others, and whatever nobody
// asked for is spread evenly over everyone, so that a client whose demand
// grows between two reports is not held at its last demand. Shares are in
// the order of demands; their sum is limit (never more). A negative or NaN
// rate counts as zero.
//
// floor is the fraction of limit set aside for the clients that ask for
// little: each of the n clients' demand counts as at least floor × limit
// / n (see lowest), so that a client that asked for nothing still holds a
// token when its requests come back, and the others together keep at
// least 1 − floor of the limit.
func Divide(limit, floor float64, demands []Demand) []float64 {
	n := len(demands)
	shares := make([]float64, n)
	if n == 0 || !(limit > 0) {
		return shares
	}
	want := make([]float64, n)
	order := make([]int, n)
	least := lowest(limit, floor, n)
	for i, d := range demands {
		order[i] = i
		switch {
		case !d.Known:
			want[i] = limit / float64(n)
		case d.Rate > least:
			want[i] = d.Rate
		default:
			want[i] = least
		}
	}
	sort.SliceStable(order, func(a, b int) bool { return want[order[a]] < want[order[b]] })
	left := limit
	for k, i := range order {
		equal := left / float64(n-k)
		if want[i] >= equal {
			// Everyone from here on wants at least an equal share: split
			// what is left evenly and stop.
			for _, j := range order[k:] {
				shares[j] = equal
			}
			return shares
		}
		shares[i] = want[i]
		left -= want[i]
	}
	// Everyone is satisfied: the surplus goes to all alike.
	extra := left / float64(n)
	for i := range shares {
		shares[i] += extra
	}
	return shares
}

// lowest is the least demand each of n clients counts as: an equal part of
// floor × limit. A floor that is not positive sets nothing aside; one of 1
// or more divides equally.
func lowest(limit, floor float64, n int) float64 {
	if !(floor > 0) {
		return 0
	}
	return min(floor, 1) * limit / float64(n)
}

// Steady returns prev when next lies within band (a fraction, 0.05 for 5 %)
// of it, and next otherwise. Each change of strategy makes Envoy replace
// its bucket, which starts full, so small moves of a share are not passed
// on; the price is that the shares of a fleet may sum to up to (1+band)
// times the limit while they drift.
func Steady(prev, next, band float64) float64 {
	if prev > 0 && math.Abs(next-prev) <= band*prev {
		return prev
	}
	return next
}
