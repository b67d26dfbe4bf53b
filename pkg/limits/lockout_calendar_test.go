package limits_test

import (
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// TestLockoutCalendar: a lockout on a calendar window keeps the window's
// count beside the lock, to the calendar's boundary: once a one-hour lock
// ends, the same day's count still refuses (and locks again), and the next
// day, in the zone, allows.
func TestLockoutCalendar(t *testing.T) {
	zone, err := limits.LoadZone("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	l := limits.Limit{Algorithm: limits.FixedWindow, Requests: 1, Period: 24 * time.Hour,
		Calendar: limits.Calendar{Unit: limits.CalendarDay, Zone: zone}, BlockFor: time.Hour}
	if err := l.Validate(); err != nil {
		t.Fatal(err)
	}
	// 2024-03-31, the day Berlin's clocks go forward (23 hours), at 01:00 local.
	now := time.Date(2024, 3, 31, 1, 0, 0, 0, zone).UnixMicro()
	var m model
	hit := func(at int64) limits.Result { return m.decide(l, 1, at, 0).Result }
	if r := hit(now); !r.Allowed {
		t.Fatalf("first hit: %+v", r)
	}
	if r := hit(now); r.Allowed || !r.Locked || r.RetryAfter != time.Hour {
		t.Fatalf("second hit: %+v, want locked for an hour", r)
	}
	later := now + 2*time.Hour.Microseconds()
	if r := hit(later); r.Allowed || !r.Locked || r.RetryAfter != time.Hour {
		t.Fatalf("past the lock, the same day: %+v, want refused by the day's count, and locked again", r)
	}
	nextDay := time.Date(2024, 4, 1, 0, 0, 0, 0, zone).UnixMicro()
	if r := hit(nextDay); !r.Allowed {
		t.Fatalf("the next day in Berlin: %+v, want allowed", r)
	}
}
