package config

import (
	"testing"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// TestCalendarLoads checks what calendar and time_zone make of a limit: the
// unit's calendar windows in the zone, UTC by default, with the unit's
// nominal period, for both window algorithms.
func TestCalendarLoads(t *testing.T) {
	for _, tc := range []struct {
		body string
		want limits.CalendarUnit
		zone string
		alg  limits.Algorithm
	}{
		{"{unit: month, requests_per_unit: 10000, calendar: true, time_zone: Europe/Berlin}", limits.CalendarMonth, "Europe/Berlin", limits.SlidingWindow},
		{"{unit: day, requests_per_unit: 5, calendar: true, algorithm: fixed_window}", limits.CalendarDay, "UTC", limits.FixedWindow},
		{"{unit: week, requests_per_unit: 5, unit_multiplier: 1, calendar: true, time_zone: Australia/Lord_Howe}", limits.CalendarWeek, "Australia/Lord_Howe", limits.SlidingWindow},
		{"{unit: year, requests_per_unit: 5, calendar: true, time_zone: UTC}", limits.CalendarYear, "UTC", limits.SlidingWindow},
		{"{unit: year, requests_per_unit: 0, calendar: true, time_zone: Asia/Kolkata}", limits.CalendarYear, "Asia/Kolkata", limits.SlidingWindow},
	} {
		d, err := Parse("x.yaml", []byte("domain: a\ndescriptors:\n  - key: k\n    rate_limit: "+tc.body+"\n"))
		if err != nil {
			t.Fatalf("%s: %v", tc.body, err)
		}
		l := d.Descriptors[0].Rules[0].Limit
		if l.Calendar.Unit != tc.want || l.Calendar.Zone.String() != tc.zone || l.Algorithm != tc.alg || l.Period != tc.want.Nominal() {
			t.Errorf("%s: got %s, want calendar %s in %s, %s", tc.body, l, tc.want, tc.zone, tc.alg)
		}
	}
	// calendar: false is a plain window.
	d, err := Parse("x.yaml", []byte("domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: month, requests_per_unit: 1, calendar: false}\n"))
	if err != nil || d.Descriptors[0].Rules[0].Limit.Calendar.On() {
		t.Fatalf("calendar: false: %v, %+v", err, d)
	}
}

// TestCalendarLimitsDiffer: a calendar window and a plain one of the same
// period count differently, so a list may hold both; the same calendar
// twice is a duplicate.
func TestCalendarLimitsDiffer(t *testing.T) {
	_, err := Parse("x.yaml", []byte("domain: a\ndescriptors:\n  - key: k\n    rate_limits:\n      - {unit: month, requests_per_unit: 10}\n      - {unit: month, requests_per_unit: 10, calendar: true}\n      - {unit: month, requests_per_unit: 10, calendar: true, time_zone: Europe/Berlin}\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Parse("x.yaml", []byte("domain: a\ndescriptors:\n  - key: k\n    rate_limits:\n      - {unit: month, requests_per_unit: 10, calendar: true, time_zone: Europe/Berlin}\n      - {unit: month, requests_per_unit: 10, calendar: true, time_zone: Europe/Berlin}\n"))
	checkError(t, "Parse", err, "x.yaml:6: rate_limits: duplicate limit sliding_window 10/720h0m0s calendar month Europe/Berlin, first at line 5 (the limits of a list must differ in algorithm, requests_per_unit, period or burst)")
}

func TestCalendarBad(t *testing.T) {
	const head = "domain: a\ndescriptors:\n  - key: k\n    rate_limit:\n"
	for _, tc := range []struct {
		name, body, want string
	}{
		{"unit too short", "      unit: hour\n      requests_per_unit: 1\n      calendar: true\n",
			"x.yaml:5: unit: calendar: true counts in calendar days, weeks, months or years, not hours: want day, week, month or year"},
		{"multiplier", "      unit: day\n      unit_multiplier: 2\n      requests_per_unit: 1\n      calendar: true\n",
			"x.yaml:6: unit_multiplier: must be 1 with calendar: true (a window is one calendar day; for several, use a longer unit)"},
		{"token bucket", "      unit: day\n      requests_per_unit: 1\n      algorithm: token_bucket\n      calendar: true\n",
			"x.yaml:7: algorithm: calendar: true is for fixed_window and sliding_window only, not token_bucket"},
		{"sliding log", "      unit: day\n      requests_per_unit: 1\n      algorithm: sliding_log\n      calendar: true\n",
			"x.yaml:7: algorithm: calendar: true is for fixed_window and sliding_window only, not sliding_log"},
		{"zone without calendar", "      unit: day\n      requests_per_unit: 1\n      time_zone: Europe/Berlin\n",
			"x.yaml:7: time_zone: time_zone without calendar: true (a time zone only moves calendar windows)"},
		{"unknown zone, case", "      unit: day\n      requests_per_unit: 1\n      calendar: true\n      time_zone: america/new york\n",
			`x.yaml:8: time_zone: unknown time zone "america/new york" (want an IANA name such as Europe/Berlin or America/New_York), did you mean America/New_York?`},
		{"unknown zone, typo", "      unit: day\n      requests_per_unit: 1\n      calendar: true\n      time_zone: Europe/Berln\n",
			`x.yaml:8: time_zone: unknown time zone "Europe/Berln" (want an IANA name such as Europe/Berlin or America/New_York), did you mean Europe/Berlin?`},
		{"unknown zone", "      unit: day\n      requests_per_unit: 1\n      calendar: true\n      time_zone: Mars/Olympus\n",
			`x.yaml:8: time_zone: unknown time zone "Mars/Olympus" (want an IANA name such as Europe/Berlin or America/New_York)`},
		{"host zone", "      unit: day\n      requests_per_unit: 1\n      calendar: true\n      time_zone: Local\n",
			`x.yaml:8: time_zone: "Local" is the host's zone, which instances may not share: name an IANA zone such as Europe/Berlin`},
		{"empty zone", "      unit: day\n      requests_per_unit: 1\n      calendar: true\n      time_zone: ''\n",
			"x.yaml:8: time_zone: empty: want an IANA zone name such as Europe/Berlin, or leave time_zone out for UTC"},
		{"calendar not a bool", "      unit: day\n      requests_per_unit: 1\n      calendar: monthly\n",
			`x.yaml:7: calendar: want true or false, got "monthly"`},
		{"misspelt field", "      unit: day\n      requests_per_unit: 1\n      calender: true\n",
			"x.yaml:7: calender: unknown field in a rate limit, did you mean calendar?"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("x.yaml", []byte(head+tc.body))
			checkError(t, "Parse", err, tc.want)
		})
	}
	_, err := Parse("x.yaml", []byte("domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, calendar: true}\n"))
	checkError(t, "Parse", err, "x.yaml:4: calendar: unlimited with calendar")
}
