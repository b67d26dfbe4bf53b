package config

import (
	"strings"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// TestCalendarLoads checks what calendar and time_zone make of a limit: the
// unit's calendar windows in the zone, UTC by default, with the unit's
// nominal period, for both window algorithms; fixed_window when it names
// none.
func TestCalendarLoads(t *testing.T) {
	for _, tc := range []struct {
		body string
		want limits.CalendarUnit
		zone string
		alg  limits.Algorithm
	}{
		{"{unit: month, requests_per_unit: 10000, calendar: true, time_zone: Europe/Berlin}", limits.CalendarMonth, "Europe/Berlin", limits.FixedWindow},
		{"{unit: month, requests_per_unit: 10000, calendar: true, algorithm: sliding_window}", limits.CalendarMonth, "UTC", limits.SlidingWindow},
		{"{unit: day, requests_per_unit: 5, calendar: true, algorithm: fixed_window}", limits.CalendarDay, "UTC", limits.FixedWindow},
		{"{unit: week, requests_per_unit: 5, unit_multiplier: 1, calendar: true, time_zone: Australia/Lord_Howe}", limits.CalendarWeek, "Australia/Lord_Howe", limits.FixedWindow},
		{"{unit: year, requests_per_unit: 5, calendar: true, time_zone: UTC}", limits.CalendarYear, "UTC", limits.FixedWindow},
		{"{unit: year, requests_per_unit: 0, calendar: true, time_zone: Asia/Kolkata}", limits.CalendarYear, "Asia/Kolkata", limits.FixedWindow},
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
	checkError(t, "Parse", err, "x.yaml:6: rate_limits: duplicate limit fixed_window 10/720h0m0s calendar month Europe/Berlin, first at line 5 (the limits of a list must differ in algorithm, requests_per_unit, period or burst)")
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

// TestCalendarDefaultsToFixedWindow: a calendar quota that names no
// algorithm counts per calendar window and starts over at the zone's
// boundary, whatever the default of the limits that name none (envoy-rls's
// sliding_window, or another one of -default-algorithm). A daily quota of
// 2 in New York, used up by 07:27:12: the third request waits until New
// York's midnight, 59,568 s, not into the afternoon of the next day
// (102,768 s), as a sliding window would have it.
func TestCalendarDefaultsToFixedWindow(t *testing.T) {
	const file = "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: 2, calendar: true, time_zone: America/New_York}\n"
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 7, 7, 27, 12, 0, ny).UnixMicro()
	for _, o := range []Options{DefaultOptions(), {DefaultAlgorithm: limits.TokenBucket}, {DefaultAlgorithm: limits.SlidingLog}} {
		d, err := o.Parse("x.yaml", []byte(file))
		if err != nil {
			t.Fatalf("default %s: %v", o.DefaultAlgorithm, err)
		}
		l := d.Descriptors[0].Rules[0].Limit
		if l.Algorithm != limits.FixedWindow {
			t.Errorf("default %s: got %s, want fixed_window", o.DefaultAlgorithm, l)
		}
		var s limits.State
		for i := range 2 {
			dec := limits.Decide(l, s, 1, at-int64(time.Hour/time.Microsecond)*int64(2-i))
			if !dec.Result.Allowed {
				t.Fatalf("default %s: request %d refused", o.DefaultAlgorithm, i+1)
			}
			s = dec.State
		}
		dec := limits.Decide(l, s, 1, at)
		if want := 59568 * time.Second; dec.Result.Allowed || dec.Result.RetryAfter != want {
			t.Errorf("default %s: third request: allowed %t, retry after %s, want refused until New York's midnight, %s", o.DefaultAlgorithm, dec.Result.Allowed, dec.Result.RetryAfter, want)
		}
	}
}

// TestCalendarSlidingWarned: a sliding window on a calendar loads (a file
// that loaded before must not stop a server at its next start) and is
// warned of, with the file, line, limit and reason; a fixed one is not.
func TestCalendarSlidingWarned(t *testing.T) {
	d, err := Parse("x.yaml", []byte("domain: a\ndescriptors:\n  - key: k\n    rate_limits:\n      - {unit: day, requests_per_unit: 2, calendar: true}\n      - {unit: month, requests_per_unit: 20, calendar: true, algorithm: sliding_window}\n      - {unit: month, requests_per_unit: 20, algorithm: sliding_window}\n"))
	if err != nil {
		t.Fatal(err)
	}
	ws := (&Config{Domains: map[string]*Domain{d.Name: d}}).Warnings()
	if len(ws) != 1 || !strings.HasPrefix(ws[0], "x.yaml:6: a.k: algorithm: sliding_window with calendar: true weighs the last calendar window's count into this one") ||
		!strings.Contains(ws[0], "leave algorithm out (a calendar limit's default is fixed_window)") {
		t.Errorf("warnings %q, want one for x.yaml:6, the sliding calendar month", ws)
	}
}
