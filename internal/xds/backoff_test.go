package xds

import (
	"testing"
	"time"
)

func TestBackoffWait(t *testing.T) {
	s := time.Second
	for _, tc := range []struct {
		name string
		b    Backoff
		r    float64
		want []time.Duration
	}{
		{"doubling up to max", Backoff{Initial: s, Max: 10 * s, Factor: 2}, 0.9, []time.Duration{s, 2 * s, 4 * s, 8 * s, 10 * s, 10 * s}},
		{"jitter at the low end", Backoff{Initial: s, Max: 10 * s, Factor: 2, Jitter: true}, 0, []time.Duration{s, s, s, s}},
		{"jitter half way", Backoff{Initial: s, Max: 10 * s, Factor: 2, Jitter: true}, 0.5, []time.Duration{s, 1500 * time.Millisecond, 2500 * time.Millisecond, 4500 * time.Millisecond, 8500 * time.Millisecond, 10 * s}},
		// envoyproxy/ratelimit's defaults: a factor below 1 keeps every
		// wait at the initial one, jitter or not.
		{"upstream defaults", Backoff{Initial: 10 * s, Max: 60 * s, Factor: 0.5, Jitter: true}, 0.7, []time.Duration{10 * s, 10 * s, 10 * s}},
		{"factor 1", Backoff{Initial: s, Max: 10 * s, Factor: 1, Jitter: true}, 0.7, []time.Duration{s, s}},
		{"max equal to initial", Backoff{Initial: 3 * s, Max: 3 * s, Factor: 2}, 0, []time.Duration{3 * s, 3 * s}},
		{"overflow is max", Backoff{Initial: s, Max: time.Hour, Factor: 1e6}, 0, []time.Duration{s, time.Hour, time.Hour, time.Hour}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for n, want := range tc.want {
				if got := tc.b.wait(n, tc.r); got != want {
					t.Errorf("wait(%d): got %v, want %v", n, got, want)
				}
			}
		})
	}
}

func TestBackoffCheck(t *testing.T) {
	for _, tc := range []struct {
		b    Backoff
		want string
	}{
		{Backoff{Max: 1, Factor: 2}, "backoff: Initial must be positive"},
		{Backoff{Initial: 2, Max: 1, Factor: 2}, "backoff: Max must be at least Initial"},
		{Backoff{Initial: 1, Max: 1}, "backoff: Factor must be a positive number"},
	} {
		if err := tc.b.check(); err == nil || err.Error() != tc.want {
			t.Errorf("%+v: got %v, want %s", tc.b, err, tc.want)
		}
	}
	if err := DefaultBackoff.check(); err != nil {
		t.Errorf("DefaultBackoff: %v", err)
	}
}

func TestThrottle(t *testing.T) {
	at := time.Unix(1000, 0)
	th := throttle{every: 5 * time.Second}
	steps := []struct {
		after    time.Duration
		ok       bool
		wantHeld int
	}{
		{0, true, 0},
		{time.Second, false, 0},
		{4 * time.Second, false, 0},
		{5 * time.Second, true, 2},
		{6 * time.Second, false, 0},
		{20 * time.Second, true, 1},
	}
	for _, s := range steps {
		held, ok := th.allow(at.Add(s.after))
		if ok != s.ok || held != s.wantHeld {
			t.Errorf("at +%v: got (%d, %v), want (%d, %v)", s.after, held, ok, s.wantHeld, s.ok)
		}
	}
}
