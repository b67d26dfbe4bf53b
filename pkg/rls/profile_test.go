package rls

import (
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// wholeSecondReset at fixed instants: any wait rounded up to whole seconds,
// a fixed window's always the rest of its window, whatever the store said.
func TestWholeSecondReset(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 30, 15, 250_000_000, time.UTC) // 15.25 s into a minute
	fixed := limits.Limit{Algorithm: limits.FixedWindow, Requests: 5, Period: time.Minute}
	sliding := limits.Limit{Algorithm: limits.SlidingWindow, Requests: 5, Period: time.Minute}
	for _, tt := range []struct {
		name string
		l    limits.Limit
		wait time.Duration
		want time.Duration
	}{
		{"sliding, a fraction", sliding, 1500 * time.Millisecond, 2 * time.Second},
		{"sliding, whole", sliding, 3 * time.Second, 3 * time.Second},
		{"sliding, none", sliding, 0, 0},
		{"sliding, below zero", sliding, -time.Second, 0},
		{"fixed, nothing counted yet", fixed, 0, 45 * time.Second},
		{"fixed, the store's wait", fixed, 10 * time.Second, 45 * time.Second},
		{"fixed, never fits", fixed, 2 * time.Minute, 45 * time.Second},
	} {
		if got := wholeSecondReset(tt.l, tt.wait, at); got != tt.want {
			t.Errorf("%s: wholeSecondReset(%v) = %v, want %v", tt.name, tt.wait, got, tt.want)
		}
	}
	// A calendar month's fixed window ends at the month's real end, in its
	// zone (2027-01-01 00:00 in Berlin, 2026-12-31T23:00Z), not 30 days
	// from the epoch.
	berlin, err := limits.LoadZone("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	month := limits.Limit{Algorithm: limits.FixedWindow, Requests: 5, Period: limits.CalendarMonth.Nominal(),
		Calendar: limits.Calendar{Unit: limits.CalendarMonth, Zone: berlin}}
	if got, want := wholeSecondReset(month, 0, at), 30*24*time.Hour+12*time.Hour+29*time.Minute+45*time.Second; got != want {
		t.Errorf("calendar month in Berlin: wholeSecondReset = %v, want %v (to the month's end)", got, want)
	}
	if got := ExactReset(fixed, 1500*time.Millisecond); got != 1500*time.Millisecond {
		t.Errorf("ExactReset = %v, want the wait itself", got)
	}
}

// The decision reads each of the profile's values on its own: a profile
// made of one of envoyproxy/ratelimit's parts changes that part alone.
func TestProfileParts(t *testing.T) {
	t.Run("reset", func(t *testing.T) {
		seven := func(limits.Limit, time.Duration) time.Duration { return 7 * time.Second }
		f := newFixture(t, nil, Options{Profile: Profile{Reset: seven}})
		st := f.call(t, desc("remote_address", "r")).Statuses[0]
		if got := st.GetDurationUntilReset().AsDuration(); got != 7*time.Second {
			t.Errorf("duration_until_reset %v, want the profile's 7s", got)
		}
	})
	t.Run("global shadow", func(t *testing.T) {
		f := newFixture(t, nil, Options{ShadowMode: true, Profile: Profile{GlobalShadow: ShadowOverallCode}})
		ip := desc("remote_address", "s")
		for range 3 {
			f.call(t, ip)
		}
		resp := f.call(t, ip)
		if resp.OverallCode != ok || resp.Statuses[0].Code != over {
			t.Errorf("overall %v, status %v; want OK, OVER_LIMIT", resp.OverallCode, resp.Statuses[0].Code)
		}
	})
	t.Run("listings", func(t *testing.T) {
		f := newFixture(t, nil, Options{Profile: Profile{Listings: ListingsInOrder}})
		ip := func() *ratelimitv3.RateLimitDescriptor { return desc("remote_address", "l") }
		f.call(t, ip(), ip()) // 2 of 3
		resp := f.call(t, ip(), ip())
		if resp.Statuses[0].Code != ok || resp.Statuses[1].Code != over {
			t.Errorf("in order: %v, %v; want OK then OVER_LIMIT", resp.Statuses[0].Code, resp.Statuses[1].Code)
		}
		g := newFixture(t, nil, Options{})
		g.call(t, ip(), ip())
		resp = g.call(t, ip(), ip())
		if resp.Statuses[0].Code != over || resp.Statuses[1].Code != over {
			t.Errorf("together: %v, %v; want both OVER_LIMIT", resp.Statuses[0].Code, resp.Statuses[1].Code)
		}
	})
}

// The two profiles' limits defaults are the loader's: envoyproxy/ratelimit's
// makes a limit that says nothing a fixed window whose refused hits count.
func TestProfileLimits(t *testing.T) {
	const file = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 1}\n"
	for _, tt := range []struct {
		p            Profile
		algorithm    limits.Algorithm
		countRefused bool
	}{
		{NativeProfile, limits.SlidingWindow, false},
		{RatelimitProfile, limits.FixedWindow, true},
	} {
		d, err := tt.p.Limits.Apply(config.DefaultOptions()).Parse("d.yaml", []byte(file))
		if err != nil {
			t.Fatal(err)
		}
		l := d.Descriptors[0].Rules[0].Limit
		if l.Algorithm != tt.algorithm || l.CountRefused != tt.countRefused {
			t.Errorf("%s: %v count_refused=%v, want %v count_refused=%v", tt.p.Name, l.Algorithm, l.CountRefused, tt.algorithm, tt.countRefused)
		}
	}
}
