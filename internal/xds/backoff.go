package xds

import (
	"errors"
	"math"
	"time"
)

// Backoff is how long the client waits before each new attempt to reach
// the server, after a failed one: Initial before the first retry, then
// Initial × Factor^n before the n-th, never more than Max. With Jitter,
// each wait is drawn uniformly between Initial and that figure, so that
// many instances that lost the server together do not come back together.
//
// These are the meanings envoyproxy/ratelimit gives its
// XDS_CLIENT_BACKOFF_* variables (its RANDOM_FACTOR is this Factor, the
// growth of the wait, despite its name). A Factor of 1 or less keeps every
// wait at Initial, as its default of 0.5 does.
type Backoff struct {
	Initial, Max time.Duration
	Factor       float64
	Jitter       bool
}

// DefaultBackoff is the client's Backoff when Options leave it zero.
var DefaultBackoff = Backoff{Initial: time.Second, Max: time.Minute, Factor: 2, Jitter: true}

// check reports a Backoff that cannot work, naming the field.
func (b Backoff) check() error {
	switch {
	case b.Initial <= 0:
		return errors.New("backoff: Initial must be positive")
	case b.Max < b.Initial:
		return errors.New("backoff: Max must be at least Initial")
	case b.Factor <= 0 || math.IsNaN(b.Factor) || math.IsInf(b.Factor, 0):
		return errors.New("backoff: Factor must be a positive number")
	}
	return nil
}

// wait is the wait before retry n (0 for the first), with r a uniform
// draw in [0, 1) for the jitter.
func (b Backoff) wait(n int, r float64) time.Duration {
	lo := float64(b.Initial)
	d := lo * math.Pow(b.Factor, float64(n))
	if b.Jitter && d > lo {
		d = lo + r*(d-lo)
	}
	switch {
	case d < lo:
		return b.Initial
	case d >= float64(b.Max):
		return b.Max
	}
	return time.Duration(d)
}
