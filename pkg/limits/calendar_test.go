package limits_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// The calendar tests check WindowFrame against a model that knows nothing
// of how it is computed: the label of an instant is the calendar period its
// wall clock reads in the zone (the day, the Monday of its ISO week, the
// month, the year), and a window's bounds are where the label changes,
// found by bisection on the time line. The zones have DST of an hour, of
// half an hour (Australia/Lord_Howe), none (Asia/Kolkata, UTC), a day that
// never was (Pacific/Apia, 2011-12-30) and a midnight that never was
// (America/Sao_Paulo until 2019).

var calendarZones = []string{"Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata", "Pacific/Apia", "America/Sao_Paulo", "UTC"}

var calendarUnits = []limits.CalendarUnit{limits.CalendarDay, limits.CalendarWeek, limits.CalendarMonth, limits.CalendarYear}

func calendarLimit(t testing.TB, a limits.Algorithm, n int64, u limits.CalendarUnit, zone string) limits.Limit {
	t.Helper()
	z, err := limits.LoadZone(zone)
	if err != nil {
		t.Fatal(err)
	}
	l := limits.Limit{Algorithm: a, Requests: n, Period: u.Nominal(), Calendar: limits.Calendar{Unit: u, Zone: z}}
	if err := l.Validate(); err != nil {
		t.Fatal(err)
	}
	return l
}

// label is the model's name of the calendar period instant us falls in.
func label(u limits.CalendarUnit, z *time.Location, us int64) string {
	lt := time.UnixMicro(us).In(z)
	switch u {
	case limits.CalendarWeek:
		y, w := lt.ISOWeek()
		return fmt.Sprintf("%d-W%02d", y, w)
	case limits.CalendarMonth:
		return lt.Format("2006-01")
	case limits.CalendarYear:
		return lt.Format("2006")
	}
	return lt.Format("2006-01-02")
}

// modelBounds are the first instant of us's label and the first of the
// next, by bisection (labels never go back in these zones).
func modelBounds(u limits.CalendarUnit, z *time.Location, us int64) (start, end int64) {
	l := label(u, z, us)
	same := func(t int64) bool { return label(u, z, t) == l }
	const far = 400 * 24 * 3600 * 1_000_000
	return bisect(us-far, us, same), bisect(us, us+far, func(t int64) bool { return !same(t) })
}

// bisect is the first instant in (lo, hi] at which in holds, given that it
// does not at lo and does at hi, and changes once between.
func bisect(lo, hi int64, in func(int64) bool) int64 {
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if in(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// randomInstant is an instant between 1990 and 2040, half of them within
// a day of a zone change of z or of a new year.
func randomInstant(rng *rand.Rand, z *time.Location) int64 {
	from := time.Date(1990, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	to := time.Date(2040, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	us := from + rng.Int64N(to-from)
	if rng.IntN(2) == 0 {
		_, end := time.UnixMicro(us).In(z).ZoneBounds()
		if !end.IsZero() {
			us = end.UnixMicro() + rng.Int64N(2*86400_000_000) - 86400_000_000
		}
	}
	return us
}

// TestCalendarFrameModel: for random instants in every zone and unit, the
// frame is the model's window and the one after it, its index grows by one
// per window (by two across Apia's missing day), and the frames tile the
// time line: the frame at End starts there.
func TestCalendarFrameModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 0xca1^uint64(propertyIterations(t))))
	per := 40 * propertyIterations(t)
	for _, zone := range calendarZones {
		for _, u := range calendarUnits {
			l := calendarLimit(t, limits.FixedWindow, 1, u, zone)
			z := l.Calendar.Zone
			for range per {
				now := randomInstant(rng, z)
				f := limits.WindowFrame(l, now)
				start, end := modelBounds(u, z, now)
				if f.Start != start || f.End != end {
					t.Fatalf("%s %s at %s: frame [%s, %s), model [%s, %s)", zone, u, time.UnixMicro(now).In(z),
						time.UnixMicro(f.Start).In(z), time.UnixMicro(f.End).In(z), time.UnixMicro(start).In(z), time.UnixMicro(end).In(z))
				}
				g := limits.WindowFrame(l, f.End)
				if f.NextLen() == 0 {
					// A window that never was (Apia's 2011-12-30): the one
					// at End is the one after it.
					g.End = g.Start
				}
				if g.Start != f.End || g.End != f.Next {
					t.Fatalf("%s %s at %s: next frame [%d, %d), want [%d, %d)", zone, u, time.UnixMicro(now).In(z), g.Start, g.End, f.End, f.Next)
				}
				if step := g.W - f.W; step != 1 && !(step == 2 && zone == "Pacific/Apia" && u == limits.CalendarDay) {
					t.Fatalf("%s %s at %s: index %d then %d", zone, u, time.UnixMicro(now).In(z), f.W, g.W)
				}
				if last := limits.WindowFrame(l, f.End-1); last != f {
					t.Fatalf("%s %s: the frame's last instant has frame %+v, want %+v", zone, u, last, f)
				}
			}
		}
	}
}

// TestCalendarLengths pins the real lengths the model's tests rely on.
func TestCalendarLengths(t *testing.T) {
	at := func(zone, s string) int64 {
		z, _ := limits.LoadZone(zone)
		v, err := time.ParseInLocation("2006-01-02 15:04", s, z)
		if err != nil {
			t.Fatal(err)
		}
		return v.UnixMicro()
	}
	h := time.Hour
	for _, tc := range []struct {
		zone string
		u    limits.CalendarUnit
		at   string
		want time.Duration
	}{
		{"Europe/Berlin", limits.CalendarDay, "2024-03-31 12:00", 23 * h},
		{"Europe/Berlin", limits.CalendarDay, "2024-10-27 12:00", 25 * h},
		{"Europe/Berlin", limits.CalendarWeek, "2024-03-27 12:00", 167 * h},
		{"America/New_York", limits.CalendarDay, "2024-11-03 12:00", 25 * h},
		{"Australia/Lord_Howe", limits.CalendarDay, "2024-04-07 12:00", 24*h + 30*time.Minute},
		{"Australia/Lord_Howe", limits.CalendarDay, "2024-10-06 12:00", 23*h + 30*time.Minute},
		{"Asia/Kolkata", limits.CalendarMonth, "2024-02-10 12:00", 29 * 24 * h},
		{"UTC", limits.CalendarMonth, "2023-02-10 12:00", 28 * 24 * h},
		{"UTC", limits.CalendarYear, "2024-06-01 12:00", 366 * 24 * h},
		{"UTC", limits.CalendarYear, "2023-06-01 12:00", 365 * 24 * h},
		{"Pacific/Apia", limits.CalendarDay, "2011-12-29 12:00", 24 * h},
		{"America/Sao_Paulo", limits.CalendarDay, "2018-11-04 12:00", 23 * h},
	} {
		l := calendarLimit(t, limits.FixedWindow, 1, tc.u, tc.zone)
		f := limits.WindowFrame(l, at(tc.zone, tc.at))
		if got := time.Duration(f.Len()) * time.Microsecond; got != tc.want {
			t.Errorf("%s %s of %s: %s long, want %s", tc.zone, tc.u, tc.at, got, tc.want)
		}
	}
	// Apia skipped 2011-12-30: the 29th ends where the 31st begins.
	l := calendarLimit(t, limits.FixedWindow, 1, limits.CalendarDay, "Pacific/Apia")
	f := limits.WindowFrame(l, at("Pacific/Apia", "2011-12-29 12:00"))
	if f.End != at("Pacific/Apia", "2011-12-31 00:00") || f.NextLen() != 0 {
		t.Errorf("Apia 2011-12-29: %+v", f)
	}
}

// TestCalendarNeverAboveN drives calendar limits of both window algorithms
// through a one-key store model with random arrivals across DST changes and
// leap days, and checks that the costs allowed within one calendar window
// (the model's label) never add up above N, that a refusal's RetryAfter
// makes the same hit fit, and that ResetAfter of a fixed window ends
// exactly at the model's window end.
func TestCalendarNeverAboveN(t *testing.T) {
	for _, a := range []limits.Algorithm{limits.FixedWindow, limits.SlidingWindow} {
		for zi, zone := range calendarZones {
			for ui, u := range calendarUnits {
				seed := uint64(zi*10+ui) + propertySeed(t)
				t.Run(fmt.Sprintf("%s/%s/%s", a, u, zone), func(t *testing.T) {
					for it := range propertyIterations(t) {
						runCalendarSequence(t, calendarLimit(t, a, 1+int64(it%7), u, zone), seed*1000+uint64(it))
					}
				})
			}
		}
	}
}

func runCalendarSequence(t *testing.T, l limits.Limit, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0xca1e))
	z := l.Calendar.Zone
	now := randomInstant(rng, z)
	window := l.Calendar.Unit.Nominal().Microseconds()
	var m model
	used := map[string]int64{}
	ends := map[string]int64{} // the model's window end of each label seen
	for step := range 120 {
		switch p := rng.IntN(10); {
		case p < 5:
			now += rng.Int64N(window / (1 + l.Requests))
		case p < 8:
			now += rng.Int64N(window / 4)
		case p < 9:
			now += rng.Int64N(2 * window)
		default:
			// Onto the boundary, or just before it.
			now = boundary(l, ends, now) - rng.Int64N(2)
		}
		lab := label(l.Calendar.Unit, z, now)
		end := boundary(l, ends, now)
		cost := []int64{0, 1, 1, 1, 2, -1}[rng.IntN(6)]
		before := m
		d := m.decide(l, cost, now, 0)
		where := fmt.Sprintf("seed %d step %d, %s, cost %d at %s", seed, step, l, cost, time.UnixMicro(now).In(z))
		if d.Result.Allowed && cost > 0 {
			used[lab] += cost
			if used[lab] > l.Requests {
				t.Fatalf("%s: %d allowed in %s, above N", where, used[lab], lab)
			}
		}
		if cost < 0 && d.Result.Allowed {
			// A refund gives back what this window counted, never more.
			used[lab] = max(0, used[lab]+cost)
		}
		if l.Algorithm == limits.FixedWindow && d.Result.ResetAfter != 0 && now+d.Result.ResetAfter.Microseconds() != end {
			t.Fatalf("%s: reset after %s, the window ends in %s", where, d.Result.ResetAfter, time.Duration(end-now)*time.Microsecond)
		}
		if !d.Result.Allowed && d.Result.RetryAfter > 0 {
			probe := before
			wait := d.Result.RetryAfter.Microseconds()
			if got := probe.decide(l, max(cost, 1), now+wait, 0); !got.Result.Allowed {
				t.Fatalf("%s: refused with retry after %s, still refused then", where, d.Result.RetryAfter)
			}
			if l.Algorithm == limits.FixedWindow && now+wait != end {
				t.Fatalf("%s: a fixed window's retry at %s, its end at %s", where, time.UnixMicro(now+wait).In(z), time.UnixMicro(end).In(z))
			}
		}
	}
}

// boundary is the model's end of the window of now, kept by label in ends.
func boundary(l limits.Limit, ends map[string]int64, now int64) int64 {
	lab := label(l.Calendar.Unit, l.Calendar.Zone, now)
	end, seen := ends[lab]
	if !seen {
		_, end = modelBounds(l.Calendar.Unit, l.Calendar.Zone, now)
		ends[lab] = end
	}
	return end
}

// TestCalendarSlidingWeight: a sliding window weighs the previous day's
// count by the real fraction of the current day that is left: 11.5 h into
// Berlin's 23-hour day is half of it.
func TestCalendarSlidingWeight(t *testing.T) {
	l := calendarLimit(t, limits.SlidingWindow, 10, limits.CalendarDay, "Europe/Berlin")
	z := l.Calendar.Zone
	var m model
	day := time.Date(2024, 3, 30, 20, 0, 0, 0, z).UnixMicro()
	if d := m.decide(l, 10, day, 0); !d.Result.Allowed {
		t.Fatalf("10 on 2024-03-30: %+v", d.Result)
	}
	// 2024-03-31 is 23 h long; 11.5 h into it (12:30 CEST) half is left.
	now := time.Date(2024, 3, 31, 12, 30, 0, 0, z).UnixMicro()
	d := m.decide(l, 0, now, 0)
	if d.Result.Remaining != 5 {
		t.Errorf("half-way through the 23-hour day: remaining %d, want 5", d.Result.Remaining)
	}
	// Reset: the previous count is gone at the day's end, 11.5 h later.
	if want := 23 * time.Hour / 2; d.Result.ResetAfter != want {
		t.Errorf("reset after %s, want %s", d.Result.ResetAfter, want)
	}
	// Five more fit now; the sixth waits until the weight has fallen by one:
	// 2.3 h, a tenth of the day.
	for range 5 {
		if d := m.decide(l, 1, now, 0); !d.Result.Allowed {
			t.Fatalf("refused at remaining 5: %+v", d.Result)
		}
	}
	d = m.decide(l, 1, now, 0)
	if want := 23 * time.Hour / 10; d.Result.Allowed || d.Result.RetryAfter != want {
		t.Errorf("sixth: %+v, want refused with retry after %s", d.Result, want)
	}
	// A count in the current window lives until the end of the next, which
	// is 24 h long: 11.5 h + 24 h.
	if want := 23*time.Hour/2 + 24*time.Hour; d.Result.ResetAfter != want {
		t.Errorf("reset after %s, want %s", d.Result.ResetAfter, want)
	}
}

// TestWindowLen: the length every report of a window says is the real
// length of the calendar window the instant falls in, never the unit's
// nominal period; a plain limit's is its period.
func TestWindowLen(t *testing.T) {
	at := func(zone string, y int, m time.Month, d, h int) int64 {
		z, err := limits.LoadZone(zone)
		if err != nil {
			t.Fatal(err)
		}
		return time.Date(y, m, d, h, 0, 0, 0, z).UnixMicro()
	}
	const day = 24 * time.Hour
	for _, tc := range []struct {
		name string
		unit limits.CalendarUnit
		zone string
		now  int64
		want time.Duration
	}{
		{"December", limits.CalendarMonth, "Europe/Berlin", at("Europe/Berlin", 2026, 12, 7, 15), 31 * day},
		{"February", limits.CalendarMonth, "America/New_York", at("America/New_York", 2027, 2, 14, 9), 28 * day},
		{"February of a leap year", limits.CalendarMonth, "UTC", at("UTC", 2028, 2, 29, 23), 29 * day},
		{"April", limits.CalendarMonth, "UTC", at("UTC", 2027, 4, 1, 0), 30 * day},
		{"a spring-forward day", limits.CalendarDay, "America/New_York", at("America/New_York", 2026, 3, 8, 12), 23 * time.Hour},
		{"a fall-back day", limits.CalendarDay, "America/New_York", at("America/New_York", 2026, 11, 1, 12), 25 * time.Hour},
		{"a plain day", limits.CalendarDay, "America/New_York", at("America/New_York", 2026, 11, 2, 12), day},
		{"a leap year", limits.CalendarYear, "UTC", at("UTC", 2028, 7, 1, 0), 366 * day},
	} {
		l := calendarLimit(t, limits.FixedWindow, 10, tc.unit, tc.zone)
		if got := limits.WindowLen(l, tc.now); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.name, got, tc.want)
		}
	}
	plain := limits.Limit{Algorithm: limits.FixedWindow, Requests: 10, Period: 30 * day}
	if got := limits.WindowLen(plain, at("UTC", 2026, 12, 7, 0)); got != 30*day {
		t.Errorf("a plain 30-day window in December: got %s, want 720h", got)
	}
}
