package share

import (
	"math"
	"time"
)

// Bucket is a token bucket as Envoy enforces it: it refills continuously at
// TokensPerFill per FillInterval (Envoy makes a fill rate of the two), up to
// MaxTokens; a new bucket starts full. MaxTokens is free of the fill: it
// may be less than TokensPerFill.
type Bucket struct {
	MaxTokens     uint32
	TokensPerFill uint32
	// FillInterval is always a whole number of seconds, at least one:
	// Envoy cuts it to whole seconds and divides by zero below a second.
	FillInterval time.Duration
}

// Shape bounds what a Bucket may be made of.
type Shape struct {
	// Burst is how much of the share a full bucket holds, as time at the
	// share's rate, rounded down and at least one token. A bucket that is
	// replaced starts full, so each replacement lets one client exceed its
	// share by at most Burst of it (or one token), and a fleet whose
	// buckets are all replaced at once exceeds the limit by at most that
	// much of the limit. It does not grow with the fill interval: Envoy
	// refills continuously, so a long fill (3 s for 33.3 a second, 100
	// tokens) needs no room for a whole fill.
	Burst time.Duration
	// MaxFill caps FillInterval for tiny shares.
	MaxFill time.Duration
}

// DefaultShape holds one second of the share and fills at most once a day.
var DefaultShape = Shape{Burst: time.Second, MaxFill: 24 * time.Hour}

// Tokens returns the bucket that enforces rate (requests per second). The
// fill interval is the shortest whole number of seconds that holds at
// least one token and loses under 1 % of the rate to rounding down, tried
// up to ten times the shortest; tokens are rounded down so that a fleet's
// buckets never add up to more than the rates they were made from. A rate
// that is not positive has no bucket: ok is false and the caller denies.
func (s Shape) Tokens(rate float64) (_ Bucket, ok bool) {
	if !(rate > 0) || math.IsInf(rate, 0) {
		return Bucket{}, false
	}
	maxFill := int64(s.MaxFill / time.Second)
	if maxFill < 1 {
		maxFill = 1
	}
	first := int64(math.Ceil(1 / rate))
	if first < 1 {
		first = 1
	}
	if first > maxFill {
		first = maxFill
	}
	best, bestLoss := first, 2.0
	for f := first; f <= first*10 && f <= maxFill; f++ {
		exact := rate * float64(f)
		loss := 1 - math.Floor(exact)/exact
		if loss < bestLoss {
			best, bestLoss = f, loss
		}
		if loss < 0.01 {
			break
		}
	}
	perFill := clampTokens(math.Floor(rate * float64(best)))
	burst := clampTokens(math.Floor(rate * s.Burst.Seconds()))
	return Bucket{MaxTokens: burst, TokensPerFill: perFill, FillInterval: time.Duration(best) * time.Second}, true
}

// clampTokens keeps a token count within Envoy's uint32 and at least one:
// a share below one token per MaxFill still gets one.
func clampTokens(v float64) uint32 {
	switch {
	case v < 1:
		return 1
	case v > math.MaxUint32:
		return math.MaxUint32
	}
	return uint32(v)
}

// TTL is how long an assignment lasts: want rounded up to whole seconds
// (Envoy reads only the seconds), and always more than two report
// intervals, so that one lost or late report does not drop the bucket back
// to its no-assignment behaviour.
func TTL(want, reportInterval time.Duration) time.Duration {
	floor := 2*reportInterval + time.Second
	if want < floor {
		want = floor
	}
	return (want + time.Second - 1).Truncate(time.Second)
}
