package limits

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// A calendar limit counts in the windows of a calendar, in a time zone: the
// day, the ISO week (from Monday 00:00), the month or the year, as a
// subscription's quota is sold, rather than in periods of fixed length from
// the epoch. Its windows have real lengths: a day is 23 or 25 hours across
// a DST change (23.5 or 24.5 in Australia/Lord_Howe), a month 28 to 31 days,
// a year 365 or 366. Everything a window limit needs from its period, the
// index of the window an instant falls in and that window's bounds, comes
// from Frame, so that the window algorithms and both stores count calendar
// windows exactly as they count periods.

// CalendarUnit is the calendar window a calendar limit counts in; zero is
// none (a window of fixed length).
type CalendarUnit uint8

// The calendar units.
const (
	NoCalendar CalendarUnit = iota
	CalendarDay
	CalendarWeek
	CalendarMonth
	CalendarYear
)

var calendarNames = [...]string{"", "day", "week", "month", "year"}

// String returns the unit's name in a limits file.
func (u CalendarUnit) String() string {
	if int(u) < len(calendarNames) {
		return calendarNames[u]
	}
	return fmt.Sprintf("calendar(%d)", uint8(u))
}

// Nominal is the period a calendar unit stands for where one length is
// needed (the limits file's unit: a month of 30 days, a year of 365): the
// Period of a calendar limit, which decisions do not use.
func (u CalendarUnit) Nominal() time.Duration {
	switch u {
	case CalendarDay:
		return 24 * time.Hour
	case CalendarWeek:
		return 7 * 24 * time.Hour
	case CalendarMonth:
		return 30 * 24 * time.Hour
	case CalendarYear:
		return 365 * 24 * time.Hour
	}
	return 0
}

// Calendar makes a window limit count in calendar windows. Its zero value is
// no calendar. It is comparable: zones come from LoadZone, which hands out
// one *time.Location per name, so that two limits of the same calendar are
// equal.
type Calendar struct {
	Unit CalendarUnit
	Zone *time.Location
}

// On reports whether the limit counts in calendar windows.
func (c Calendar) On() bool { return c.Unit != NoCalendar && c.Zone != nil }

// String reads "calendar month Europe/Berlin", or "" for no calendar.
func (c Calendar) String() string {
	if !c.On() {
		return ""
	}
	return "calendar " + c.Unit.String() + " " + c.Zone.String()
}

// appendKey appends the calendar's part of a store key: a calendar's
// windows are numbered apart from floor(now/T), and differ by zone, so
// that its key reads "@month@Europe/Berlin" after the period.
func (c Calendar) appendKey(dst []byte) []byte {
	if !c.On() {
		return dst
	}
	dst = append(dst, '@')
	dst = append(dst, c.Unit.String()...)
	dst = append(dst, '@')
	return append(dst, c.Zone.String()...)
}

var zones sync.Map // name → *time.Location

// LoadZone is time.LoadLocation, with one *time.Location per name for the
// life of the process (see Calendar). "" and "UTC" are UTC.
func LoadZone(name string) (*time.Location, error) {
	if name == "" {
		name = "UTC"
	}
	if z, ok := zones.Load(name); ok {
		return z.(*time.Location), nil
	}
	if strings.EqualFold(name, "local") {
		// The host's zone differs between instances: they would disagree
		// on every boundary.
		return nil, fmt.Errorf("%q is the host's zone, which instances may not share: name an IANA zone such as Europe/Berlin", name)
	}
	z, err := time.LoadLocation(name)
	if err != nil {
		return nil, err
	}
	actual, _ := zones.LoadOrStore(name, z)
	return actual.(*time.Location), nil
}

// Frame is the window an instant falls in: its index W, which a store keys
// the window's count by, and its bounds, all in microseconds since the
// epoch. Next is the end of window W+1, where a sliding window's count of
// W stops mattering. For a limit of period T, W is floor(now/T) and the
// windows are [W·T, (W+1)·T); for a calendar limit W numbers the calendar's
// windows (days since 1970-01-01, ISO weeks since the Monday before it,
// months since year 0, years) and the bounds are their real instants.
// A window that no instant falls in (Pacific/Apia skipped 2011-12-30) has
// its index, and the window before it has Next equal to End.
type Frame struct {
	W, Start, End, Next int64
}

// Len is the window's real length in microseconds.
func (f Frame) Len() int64 { return f.End - f.Start }

// NextLen is the length of the window after it.
func (f Frame) NextLen() int64 { return f.Next - f.End }

// WindowFrame is the frame of instant now (µs) for a window limit l. It is
// a pure function of its arguments: every store calls it with the instant
// it decides at, and the stores' counts of the same window share an index.
func WindowFrame(l Limit, now int64) Frame {
	if !l.Calendar.On() {
		t := l.PeriodMicros()
		w := floorDiv(now, t)
		return Frame{W: w, Start: w * t, End: (w + 1) * t, Next: (w + 2) * t}
	}
	return calendarFrame(l.Calendar, now)
}

// WindowLen is the length of the window l counts in at instant now (µs):
// its Period, or for a calendar limit the real length of the calendar
// window now falls in (a December of 31 days, a February of 28 or 29, a
// day of 23 or 25 hours across DST). It is what every report of a
// window's length says (RateLimit-Policy's w, explain, an RLQS bucket's
// rate), never the calendar unit's Nominal period.
func WindowLen(l Limit, now int64) time.Duration {
	if !l.Calendar.On() {
		return l.Period
	}
	return micros(WindowFrame(l, now).Len())
}

// lastFrames keeps, per calendar, the last frame computed: every instant
// of a window has the same frame, so the decisions of one window (a day,
// a month) find it with a load instead of the few time.Date calls that
// make it (1.5 µs). One entry per calendar a config names.
var lastFrames sync.Map // Calendar → *atomic.Pointer[Frame]

// calendarFrame is WindowFrame of a calendar limit, from lastFrames when
// now is in the frame kept there.
func calendarFrame(c Calendar, now int64) Frame {
	if p, ok := lastFrames.Load(c); ok {
		if f := p.(*atomic.Pointer[Frame]).Load(); f != nil && f.Start <= now && now < f.End {
			return *f
		}
	}
	f := computeFrame(c, now)
	p, _ := lastFrames.LoadOrStore(c, new(atomic.Pointer[Frame]))
	p.(*atomic.Pointer[Frame]).Store(&f)
	return f
}

// computeFrame finds the calendar window that holds now.
func computeFrame(c Calendar, now int64) Frame {
	local := time.UnixMicro(now).In(c.Zone)
	y, m, d := local.Date()
	first := periodFirst(c.Unit, y, m, d)
	start := dayStart(first, c.Zone)
	// The day an instant reads in its zone and the window it belongs to
	// differ only where a clock changes around midnight (it skips it, or
	// goes back across it): windows are [start of first day, start of the
	// next period's first day), so that they tile the time line.
	for start > now {
		first = periodAdd(c.Unit, first, -1)
		start = dayStart(first, c.Zone)
	}
	nextFirst := periodAdd(c.Unit, first, 1)
	end := dayStart(nextFirst, c.Zone)
	for end <= now {
		first, start = nextFirst, end
		nextFirst = periodAdd(c.Unit, first, 1)
		end = dayStart(nextFirst, c.Zone)
	}
	next := dayStart(periodAdd(c.Unit, nextFirst, 1), c.Zone)
	return Frame{W: periodIndex(c.Unit, first), Start: start, End: end, Next: next}
}

// civil is a calendar date, normalised as time.Date normalises.
type civil struct {
	y int
	m time.Month
	d int
}

func (c civil) utc() time.Time { return time.Date(c.y, c.m, c.d, 0, 0, 0, 0, time.UTC) }

func civilOf(t time.Time) civil {
	y, m, d := t.Date()
	return civil{y, m, d}
}

// periodFirst is the first day of the window that day (y, m, d) is in.
func periodFirst(u CalendarUnit, y int, m time.Month, d int) civil {
	switch u {
	case CalendarWeek:
		// ISO weeks begin on Monday.
		back := (int(civil{y, m, d}.utc().Weekday()) + 6) % 7
		return civilOf(civil{y, m, d - back}.utc())
	case CalendarMonth:
		return civil{y, m, 1}
	case CalendarYear:
		return civil{y, 1, 1}
	}
	return civil{y, m, d}
}

// periodAdd moves a window's first day by k windows.
func periodAdd(u CalendarUnit, c civil, k int) civil {
	switch u {
	case CalendarWeek:
		return civilOf(civil{c.y, c.m, c.d + 7*k}.utc())
	case CalendarMonth:
		return civilOf(civil{c.y, c.m + time.Month(k), 1}.utc())
	case CalendarYear:
		return civil{c.y + k, 1, 1}
	}
	return civilOf(civil{c.y, c.m, c.d + k}.utc())
}

// periodIndex numbers the window whose first day is c.
func periodIndex(u CalendarUnit, c civil) int64 {
	days := floorDiv(c.utc().Unix(), 86400)
	switch u {
	case CalendarWeek:
		// 1970-01-01 was a Thursday: its week began on 1969-12-29, day -3.
		return floorDiv(days+3, 7)
	case CalendarMonth:
		return int64(c.y)*12 + int64(c.m-1)
	case CalendarYear:
		return int64(c.y)
	}
	return days
}

// dayStart is the first instant, in µs, whose wall clock in zone reads day
// c or later: its midnight, or, where the clock skips midnight, the instant
// it jumps over it (the end of the zone period that time.Date placed the
// missing midnight in).
func dayStart(c civil, zone *time.Location) int64 {
	t := time.Date(c.y, c.m, c.d, 0, 0, 0, 0, zone)
	for range 3 {
		if !civilOf(t.In(zone)).before(c) {
			break
		}
		_, end := t.ZoneBounds()
		if end.IsZero() || !end.After(t) {
			break
		}
		t = end
	}
	return t.UnixMicro()
}

func (c civil) before(o civil) bool { return c.utc().Before(o.utc()) }
