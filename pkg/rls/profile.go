package rls

import (
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// A Profile is what answering as one rate limit service rather than
// another changes, chosen once at start-up and handed to the service
// (Options.Profile): envoy-rls's own (NativeProfile), or
// envoyproxy/ratelimit's (RatelimitProfile), which the drop-in runs. The
// decision has one path; where the two differ it reads the profile's
// values and calls its functions, and never asks which profile it has.
//
// What stays a choice of its own in both profiles is not here: the header
// dialects an answer carries (Options.Headers; the drop-in turns
// envoyproxy/ratelimit's on from LIMIT_RESPONSE_HEADERS_ENABLED, under
// names whose defaults are the same in both), the service-wide shadow and
// quota modes themselves, and which metric families count
// (envoyproxy/ratelimit's with -prometheus-addr, in either profile).
//
// The zero Profile is NativeProfile.
type Profile struct {
	// Name names the profile, in the server's start-up log and in tests.
	Name string
	// Reset turns the wait a verdict found on limit l (docs/semantics.md:
	// until the same request would be allowed, or until the limit is
	// whole again) into the duration_until_reset the answer reports, and
	// the headers after it. Nil means ExactReset.
	Reset func(l limits.Limit, wait time.Duration) time.Duration
	// GlobalShadow says what the service-wide shadow mode
	// (Options.ShadowMode) turns to OK.
	GlobalShadow ShadowScope
	// Listings says how descriptors of one request that count on the same
	// counters are decided.
	Listings Listings
	// Limits are what a limit that does not say gets: its algorithm and
	// whether its refused hits count. They are the loader's
	// (config.Options), not the service's: the drop-in takes its defaults
	// of -default-algorithm and -count-refused from RatelimitProfile's, and
	// those flags still change them.
	Limits LimitDefaults
}

// ShadowScope is what the service-wide shadow mode turns to OK.
type ShadowScope uint8

const (
	// ShadowStatuses turns each descriptor's OVER_LIMIT to OK, as a
	// limit's own shadow_mode does, and so the overall code too.
	ShadowStatuses ShadowScope = iota
	// ShadowOverallCode leaves every status as decided and turns only the
	// overall code to OK, as envoyproxy/ratelimit's SHADOW_MODE does; each
	// request it lets through is counted as global_shadow_mode.
	ShadowOverallCode
)

// Listings says how the descriptors of one request that count on the same
// counters (one descriptor listed twice, or values that share_threshold
// puts under one counter) are decided.
type Listings uint8

const (
	// ListingsTogether decides them as one hit whose cost is theirs added
	// up, so that they are allowed or refused together: a refused request
	// never consumes quota through an earlier listing of the same counter.
	ListingsTogether Listings = iota
	// ListingsInOrder decides each listing on its own, in request order,
	// as envoyproxy/ratelimit does: an earlier listing can consume what
	// refuses a later one.
	ListingsInOrder
)

// LimitDefaults are what a limit that names no algorithm, or does not set
// count_refused, gets.
type LimitDefaults struct {
	Algorithm    limits.Algorithm
	CountRefused bool
}

// Apply returns o with d as its defaults.
func (d LimitDefaults) Apply(o config.Options) config.Options {
	o.DefaultAlgorithm, o.CountRefused = d.Algorithm, d.CountRefused
	return o
}

// NativeProfile is envoy-rls's own: resets to the microsecond, listings of
// one counter decided together, the service-wide shadow mode acting on
// each status as shadow_mode does, sliding windows, and refused hits that
// do not count.
var NativeProfile = Profile{
	Name:         "envoy-rls",
	Reset:        ExactReset,
	GlobalShadow: ShadowStatuses,
	Listings:     ListingsTogether,
	Limits:       LimitDefaults{Algorithm: limits.SlidingWindow},
}

// RatelimitProfile is envoyproxy/ratelimit's, where the two differ in
// what an answer says: resets in whole seconds (WholeSecondReset), each
// listing decided on its own, the service-wide shadow mode turning only
// the overall code to OK; and, for the loader, fixed windows whose refused
// hits count, so that a limits file means what it means there.
var RatelimitProfile = Profile{
	Name:         "envoyproxy/ratelimit",
	Reset:        WholeSecondReset,
	GlobalShadow: ShadowOverallCode,
	Listings:     ListingsInOrder,
	Limits:       LimitDefaults{Algorithm: limits.FixedWindow, CountRefused: true},
}

// ExactReset reports the wait as the store found it.
func ExactReset(_ limits.Limit, wait time.Duration) time.Duration { return wait }

// WholeSecondReset reports the wait as envoyproxy/ratelimit does, from a
// clock of whole seconds (wholeSecondReset, at the present instant).
func WholeSecondReset(l limits.Limit, wait time.Duration) time.Duration {
	return wholeSecondReset(l, wait, time.Now())
}

// wholeSecondReset is wait in whole seconds, rounded up; for a fixed
// window, whatever wait says, the time from now to the end of the window,
// which is what envoyproxy/ratelimit reports for every status of one. (Its
// own form reports a peek on a new key as 0, the wait until it is full
// again, and a hit that can never fit as a whole period.)
func wholeSecondReset(l limits.Limit, wait time.Duration, now time.Time) time.Duration {
	if l.Algorithm == limits.FixedWindow && l.Period > 0 {
		// The window's end in the frame the stores count in
		// (limits.WindowFrame): the real one, not the unit's nominal
		// period from the epoch.
		us := now.UnixMicro()
		wait = time.Duration(limits.WindowFrame(l, us).End-us) * time.Microsecond
	}
	return time.Duration(ceilSeconds(wait)) * time.Second
}
