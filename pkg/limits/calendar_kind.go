package limits

import (
	"fmt"
	"strings"
	"time"
)

// calendarModifier is the calendar's entry in Modifiers: calendar: true
// counts in the calendar's windows of the unit (day, week, month or year,
// one of them: unit_multiplier 1) in time_zone (UTC when unset), for
// fixed_window (the default of a calendar limit) and sliding_window only;
// a sliding one is warned of. It counts differently from a plain window
// of the same period, and the windows it counts in have real lengths,
// which explain and check-config show.
var calendarModifier = Modifier{
	Name: "calendar",
	Fields: []Field{
		{
			Name: "calendar", Type: Bool, Noun: "calendar",
			Without: map[Algorithm]string{Concurrency: "it counts what is held now, in no window"},
		},
		{
			Name: "time_zone", Type: String, Noun: "a time_zone",
			Without: map[Algorithm]string{Concurrency: "it counts what is held now, in no window"},
		},
	},
	On:        func(l Limit) bool { return l.Calendar.On() },
	Build:     buildCalendar,
	Algorithm: calendarAlgorithm,
	Counts:    true,
	clear:     func(l *Limit) { l.Calendar = Calendar{} },
	Warning:   slidingCalendarWarning,
	Describe:  describeCalendar,
	Explain:   func(l Limit, now int64, e *ModifiersExplained) { e.Calendar = explainCalendar(l, now) },
	Text:      calendarText,
}

// validateCalendar checks a calendar that a limit was given other than
// from a limits file (buildCalendar checks those): on a window of the
// unit's nominal period, with its zone.
func (l Limit) validateCalendar() error {
	switch c := l.Calendar; {
	case c.On() && l.Algorithm != FixedWindow && l.Algorithm != SlidingWindow:
		return fieldErrorf("calendar", "is for fixed_window and sliding_window only, not %s", l.Algorithm)
	case c.On() && l.Period != c.Unit.Nominal():
		return fieldErrorf("unit_multiplier", "must be 1 with calendar: a window is one calendar %s", c.Unit)
	case c.Unit != NoCalendar && !c.On():
		return fieldErrorf("time_zone", "is missing")
	}
	return nil
}

// calendarAlgorithm is fixed_window for a calendar limit: a calendar
// quota is a calendar window, counted per window and starting over at the
// zone's boundary, whatever the default of the limits that name no
// algorithm.
func calendarAlgorithm(r RuleFields) (Algorithm, bool) {
	return FixedWindow, r.value("calendar").Bool
}

// parseCalendarUnit is the calendar unit a limits file's unit names, if
// it names one.
func parseCalendarUnit(name string) (CalendarUnit, bool) {
	for i, n := range calendarNames {
		if i > 0 && n == name {
			return CalendarUnit(i), true
		}
	}
	return NoCalendar, false
}

// buildCalendar sets l.Calendar from calendar and time_zone.
func buildCalendar(l *Limit, r RuleFields) error {
	tz, tzSet := r.Given("time_zone")
	if !r.value("calendar").Bool {
		if tzSet {
			return &FieldError{Field: "time_zone", AtName: true, Msg: "time_zone without calendar: true (a time zone only moves calendar windows)"}
		}
		return nil
	}
	unit, ok := parseCalendarUnit(r.Unit)
	switch {
	case !ok:
		return fieldErrorf("unit", "calendar: true counts in calendar days, weeks, months or years, not %ss: want day, week, month or year", r.Unit)
	case r.UnitMultiplier != 1:
		return fieldErrorf("unit_multiplier", "must be 1 with calendar: true (a window is one calendar %s; for several, use a longer unit)", r.Unit)
	case l.Algorithm != FixedWindow && l.Algorithm != SlidingWindow:
		field := "calendar"
		if r.AlgorithmSet {
			field = "algorithm"
		}
		return fieldErrorf(field, "calendar: true is for fixed_window and sliding_window only, not %s", l.Algorithm)
	}
	if tzSet && strings.TrimSpace(tz.String) == "" {
		return fieldErrorf("time_zone", "empty: want an IANA zone name such as Europe/Berlin, or leave time_zone out for UTC")
	}
	zone, err := LoadZone(tz.String)
	if err != nil {
		return fieldErrorf("time_zone", "%s", zoneProblem(tz.String, err))
	}
	l.Calendar = Calendar{Unit: unit, Zone: zone}
	return nil
}

// slidingCalendarWarning warns of a sliding window on a calendar. A
// warning, not an error: such a file loaded before the default of a
// calendar limit became fixed_window, and a refusal would stop a server
// that served it at its next start.
func slidingCalendarWarning(l Limit) string {
	if !l.Calendar.On() || l.Algorithm != SlidingWindow {
		return ""
	}
	return "algorithm: sliding_window with calendar: true weighs the last calendar window's count into this one, " +
		"so a key that used its quota is refused past the zone's boundary, up to a whole window more " +
		"(a daily quota used up in the morning is refused until the next day's afternoon); " +
		"for a quota that starts over at the boundary, leave algorithm out (a calendar limit's default is fixed_window) or set fixed_window"
}

// describeCalendar is the window l is in at now: "month in
// Europe/Berlin, now 2026-12-01T00:00:00+01:00 to
// 2027-01-01T00:00:00+01:00".
func describeCalendar(l Limit, now int64) string {
	c := l.Calendar
	f := WindowFrame(l, now)
	return fmt.Sprintf("%s in %s, now %s to %s", c.Unit, c.Zone, c.at(f.Start), c.at(f.End))
}

// at is instant us in the calendar's zone, RFC 3339.
func (c Calendar) at(us int64) string { return time.UnixMicro(us).In(c.Zone).Format(time.RFC3339) }

// ExplainedCalendar is the calendar window a calendar limit counts in at
// the instant explained: its bounds in the limit's zone. The stores decide
// on their own clock (Redis's, with Redis), which may differ from this
// instance's by its skew: within that of a boundary, the window shown may
// be the one either side.
type ExplainedCalendar struct {
	// Unit is day, week, month or year; TimeZone the IANA zone.
	Unit     string `json:"unit"`
	TimeZone string `json:"time_zone"`
	// Start and End bound the window, RFC 3339 in the zone; End is the next
	// boundary, where a fixed window starts over.
	Start string `json:"start"`
	End   string `json:"end"`
	// Length is the window's real length (a 23-hour day, a 29-day month).
	Length string `json:"length"`
}

// explainCalendar is l's calendar window at now.
func explainCalendar(l Limit, now int64) *ExplainedCalendar {
	c := l.Calendar
	f := WindowFrame(l, now)
	return &ExplainedCalendar{
		Unit:     c.Unit.String(),
		TimeZone: c.Zone.String(),
		Start:    c.at(f.Start),
		End:      c.at(f.End),
		Length:   micros(f.Len()).String(),
	}
}

// calendarText is a calendar limit's window line.
func calendarText(e ModifiersExplained) string {
	c := e.Calendar
	if c == nil {
		return ""
	}
	return fmt.Sprintf("window: calendar %s in %s, %s to %s (%s)", c.Unit, c.TimeZone, c.Start, c.End, c.Length)
}
