package storetest

import (
	"time"
	// The suite's zones, whatever the host has installed.
	_ "time/tzdata"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// calendarIn sets a limit's calendar: unit's windows in zone (which the
// embedded database always has; were it missing, the limit would count in
// plain windows and the case fail on its hand-worked values).
func calendarIn(unit limits.CalendarUnit, zone string) func(*limits.Limit) {
	z, err := limits.LoadZone(zone)
	return func(l *limits.Limit) {
		if err == nil {
			l.Calendar = limits.Calendar{Unit: unit, Zone: z}
		}
	}
}

// until is the wait from Start to the wall-clock instant s
// ("2006-01-02 15:04") in zone.
func until(zone, s string) time.Duration {
	z, _ := limits.LoadZone(zone)
	t, _ := time.ParseInLocation("2006-01-02 15:04", s, z)
	return t.Sub(time.UnixMicro(Start))
}

// calendarCases are the cases of a limit that counts in a calendar's
// windows (limits.Limit.Calendar).
func calendarCases() []testCase { return []testCase{calendarDayCase(), calendarMonthCase()} }

// calendarDayCase is a daily quota in Europe/Berlin on 2024-03-31, the
// 23-hour day when clocks go forward: the window ends 23 h after its
// midnight, a fixed window starts over exactly then, and a sliding window
// weighs the day's count by the fraction of the next day (24 h) left.
func calendarDayCase() testCase {
	day := calendarIn(limits.CalendarDay, "Europe/Berlin")
	h := time.Hour
	return testCase{
		name: "calendar day across DST", algs: []limits.Algorithm{limits.FixedWindow, limits.SlidingWindow},
		n: 2, period: 24 * h,
		steps: []step{
			{wait: until("Europe/Berlin", "2024-03-31 00:00"), cost: 1, with: day, want: per{fw: ok(1, 23*h), sw: ok(1, 47*h)}},
			{cost: 1, with: day, want: per{fw: ok(0, 23*h), sw: ok(0, 47*h)}},
			// The sliding window: the next day, 12 h in, weighs the 2 at 1.
			{cost: 1, with: day, want: per{fw: no(0, 23*h, 23*h), sw: no(0, 35*h, 47*h)}},
			{wait: 23*h - us, cost: 1, with: day, want: per{fw: no(0, us, us), sw: no(0, 12*h+us, 24*h+us)}},
			// 2024-04-01 00:00 CEST: a fixed window's reset.
			{wait: us, cost: 0, with: day, want: per{fw: ok(2, 0), sw: no(0, 12*h, 24*h)}},
			{cost: 1, with: day, want: per{fw: ok(1, 24*h), sw: no(0, 12*h, 24*h)}},
			// A reset clears the calendar's windows, this one and the
			// one before it.
			{reset: true, with: day},
			{cost: 0, with: day, want: all(ok(2, 0))},
		},
	}
}

// calendarMonthCase is a monthly quota in America/New_York on 2024-02-29,
// the leap day, at noon: February ends 12 h later, and March, the next
// month, is 31 days less the hour DST takes (743 h).
func calendarMonthCase() testCase {
	month := calendarIn(limits.CalendarMonth, "America/New_York")
	h := time.Hour
	return testCase{
		name: "calendar month on a leap day", algs: []limits.Algorithm{limits.FixedWindow, limits.SlidingWindow},
		n: 3, period: 30 * 24 * h,
		steps: []step{
			{wait: until("America/New_York", "2024-02-29 12:00"), cost: 3, with: month, want: per{fw: ok(0, 12*h), sw: ok(0, 755*h)}},
			// A third of March in, the 3 of February weigh 2: 247 h 40 min.
			{cost: 1, with: month, want: per{fw: no(0, 12*h, 12*h), sw: no(0, 259*h+40*time.Minute, 755*h)}},
			{wait: 12 * h, cost: 1, with: month, want: per{fw: ok(2, 743*h), sw: no(0, 247*h+40*time.Minute, 743*h)}},
		},
	}
}
