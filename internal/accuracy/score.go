package accuracy

import (
	"math"
	"sort"
)

// Figures are Cloudflare's four figures for one algorithm on one trace,
// with the counts they come from. The truth each request is measured
// against is an exact sliding log over the algorithm's own admitted
// requests: a request should be allowed if and only if fewer than N
// requests were admitted in the trailing period before it.
type Figures struct {
	Requests, Allowed int64
	// WrongAllowed counts requests allowed although the trailing period
	// already held N admitted ones; WrongRefused, requests refused although
	// it held fewer.
	WrongAllowed, WrongRefused int64
	// Sources is how many sources sent; FalseNegative how many had a
	// request wrongly allowed, FalsePositive how many had one wrongly
	// refused.
	Sources, FalseNegative, FalsePositive int64
	// WorstOver is the most admitted requests any trailing period held
	// above N, over all sources.
	WorstOver int64
	// Periods counts the whole periods scored (a source's first left
	// out); WorstPeriodOver is the most any held above N. LeastUsed is
	// the fewest admitted in one of the SaturatedPeriods, those whose
	// offered requests reached N: the "share of the limit used".
	Periods, WorstPeriodOver, SaturatedPeriods, LeastUsed int64
	// N is the threshold, for the shares.
	N int64
	// rateErr sums each request's relative rate error, over rateN requests.
	rateErr float64
	rateN   int64
}

// DiffShare is the share of requests decided differently from the truth.
func (f Figures) DiffShare() float64 { return ratio(f.WrongAllowed+f.WrongRefused, f.Requests) }

// AllowedShare is the share of requests allowed.
func (f Figures) AllowedShare() float64 { return ratio(f.Allowed, f.Requests) }

// MeanRateError is the mean, over requests, of |believed − real| / real,
// where real is the admitted requests in the trailing period (this one
// included if admitted) and believed is N − Remaining, the limit's own
// count.
func (f Figures) MeanRateError() float64 {
	if f.rateN == 0 {
		return 0
	}
	return f.rateErr / float64(f.rateN)
}

// WorstPeriodOvershoot is WorstPeriodOver as a share of N: the most over
// the limit in any whole period (a second, at 1,000 a second).
func (f Figures) WorstPeriodOvershoot() float64 { return ratio(f.WorstPeriodOver, f.N) }

// LeastUsedShare is LeastUsed as a share of N, or −1 when no period was
// offered N.
func (f Figures) LeastUsedShare() float64 {
	if f.SaturatedPeriods == 0 {
		return -1
	}
	return ratio(f.LeastUsed, f.N)
}

// WorstOvershoot is WorstOver as a share of N.
func (f Figures) WorstOvershoot() float64 { return ratio(f.WorstOver, f.N) }

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// add merges g into f.
func (f *Figures) add(g Figures) {
	f.Requests += g.Requests
	f.Allowed += g.Allowed
	f.WrongAllowed += g.WrongAllowed
	f.WrongRefused += g.WrongRefused
	f.Sources += g.Sources
	f.FalseNegative += g.FalseNegative
	f.FalsePositive += g.FalsePositive
	f.WorstOver = max(f.WorstOver, g.WorstOver)
	if g.SaturatedPeriods > 0 && (f.SaturatedPeriods == 0 || g.LeastUsed < f.LeastUsed) {
		f.LeastUsed = g.LeastUsed
	}
	f.Periods += g.Periods
	f.SaturatedPeriods += g.SaturatedPeriods
	f.WorstPeriodOver = max(f.WorstPeriodOver, g.WorstPeriodOver)
	f.rateErr += g.rateErr
	f.rateN += g.rateN
	f.N = g.N
}

// score measures one source's outcomes against the exact sliding log of
// its admitted requests, with threshold n per period t (microseconds). A
// request's admitted instant is its decision's plus its Delay: a leaky
// bucket's request reaches the backend at its turn. queue is scratch space
// for the admitted instants; score returns it for reuse.
func score(n, t int64, at []int64, out []Outcome, queue []int64) (Figures, []int64) {
	f := Figures{Requests: int64(len(at)), Sources: 1, N: n}
	q, head := queue[:0], 0
	for i, now := range at {
		for head < len(q) && q[head] <= now-t {
			head++
		}
		// Admitted and not yet out of the trailing period: for a leaky
		// bucket this includes the queued requests still to be served.
		c := int64(len(q) - head)
		o := out[i]
		real := c
		switch {
		case o.Allowed:
			f.Allowed++
			a := now + o.Delay
			// Admitted instants never decrease (a leaky bucket serves in
			// order), so those in (a − t, a] are a suffix of the queue.
			in := int64(len(q)-head-sort.Search(len(q)-head, func(j int) bool { return q[head+j] > a-t })) + 1
			if in > n {
				f.WrongAllowed++
				f.WorstOver = max(f.WorstOver, in-n)
			}
			q = append(q, a)
			real = c + 1
		case c+1 <= n:
			f.WrongRefused++
		}
		if real > 0 {
			f.rateErr += math.Abs(float64(n-o.Remaining)-float64(real)) / float64(real)
			f.rateN++
		}
	}
	if f.WrongAllowed > 0 {
		f.FalseNegative = 1
	}
	if f.WrongRefused > 0 {
		f.FalsePositive = 1
	}
	return f, q
}

// periods adds to f the figures of whole periods (aligned to the epoch,
// as a fixed window's are): the most admitted above n in one, and the
// fewest admitted in one whose offered requests reached n. The first
// period of a trace is left out: a token bucket starts full and may
// rightly admit up to 2n in it.
func periods(f *Figures, n, t int64, at []int64, out []Outcome) {
	if len(at) == 0 {
		return
	}
	first := at[0] / t
	var cur, offered, admitted int64 = first, 0, 0
	flush := func() {
		if cur == first {
			return
		}
		f.Periods++
		f.WorstPeriodOver = max(f.WorstPeriodOver, admitted-n)
		if offered >= n {
			f.SaturatedPeriods++
			if f.SaturatedPeriods == 1 || admitted < f.LeastUsed {
				f.LeastUsed = admitted
			}
		}
	}
	for i, now := range at {
		if p := now / t; p != cur {
			flush()
			cur, offered, admitted = p, 0, 0
		}
		offered++
		if out[i].Allowed {
			admitted++
		}
	}
	flush()
}
