package redisstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// calendarCases are calendar limits of both window algorithms in zones with
// DST of an hour and of half an hour, none, and a day skipped.
func calendarCases(t *testing.T) []eqCase {
	t.Helper()
	cal := func(a limits.Algorithm, n int64, u limits.CalendarUnit, zone string, countRefused bool) eqCase {
		z, err := limits.LoadZone(zone)
		if err != nil {
			t.Fatal(err)
		}
		return eqCase{limit: limits.Limit{Algorithm: a, Requests: n, Period: u.Nominal(), CountRefused: countRefused,
			Calendar: limits.Calendar{Unit: u, Zone: z}}}
	}
	fw, sw := limits.FixedWindow, limits.SlidingWindow
	return []eqCase{
		cal(fw, 3, limits.CalendarDay, "Europe/Berlin", false),
		cal(sw, 3, limits.CalendarDay, "Europe/Berlin", false),
		cal(sw, 7, limits.CalendarDay, "Australia/Lord_Howe", false),
		cal(fw, 5, limits.CalendarWeek, "America/New_York", false),
		cal(sw, 5, limits.CalendarWeek, "America/New_York", true),
		cal(fw, 10, limits.CalendarMonth, "Asia/Kolkata", true),
		cal(sw, 10, limits.CalendarMonth, "Europe/Berlin", false),
		cal(sw, 4, limits.CalendarYear, "Pacific/Apia", false),
		cal(fw, 4, limits.CalendarYear, "UTC", false),
	}
}

// TestCalendarEquivalence runs calendar limits through the equivalence
// harness: the same decisions from the Go functions, the embedded store
// and this store's native commands at every step, the same counts under
// the windows' keys (a calendar's index, limits.WindowFrame's W), and TTLs
// no shorter than the windows' real ends.
func TestCalendarEquivalence(t *testing.T) {
	steps := iterations(t)
	var now int64
	s, c, _ := setup(t, Options{Clock: func() int64 { return now }})
	cases := calendarCases(t)
	for i, ec := range cases {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Log(ec)
			seqs := []*sequence{{key: fmt.Sprintf("cal:%d", i), c: ec}}
			runSequences(t, s, c, &now, seqs, steps, 3000+uint64(i), singles)
		})
	}
	t.Run("batched", func(t *testing.T) {
		var seqs []*sequence
		for i, ec := range cases {
			seqs = append(seqs, &sequence{key: fmt.Sprintf("calb:%d", i), c: ec})
		}
		runSequences(t, s, c, &now, seqs, steps, 3100, singles)
	})
}

// TestCalendarKeyExpiry: a calendar window's counter lives until the
// window's real end (fixed) or the next window's (sliding), as Redis's TTL
// shows: 23 h before the end of Berlin's 23-hour day, not 24.
func TestCalendarKeyExpiry(t *testing.T) {
	z, err := limits.LoadZone("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2024, 3, 31, 0, 0, 0, 0, z).UnixMicro()
	s, c, _ := setup(t, Options{Clock: func() int64 { return now }})
	for _, tc := range []struct {
		a    limits.Algorithm
		want time.Duration
	}{{limits.FixedWindow, 23 * time.Hour}, {limits.SlidingWindow, 47 * time.Hour}} {
		l := limits.Limit{Algorithm: tc.a, Requests: 5, Period: 24 * time.Hour, Calendar: limits.Calendar{Unit: limits.CalendarDay, Zone: z}}
		key := "calttl:" + tc.a.String()
		res := make([]limits.Result, 1)
		s.Decide(t.Context(), []limits.Hit{{Key: key, Limit: l, Cost: 1}}, res)
		if res[0].Err != nil || !res[0].Allowed {
			t.Fatalf("%s: %+v", tc.a, res[0])
		}
		w := limits.WindowFrame(l, now).W
		ttl, err := c.PTTL(t.Context(), windowKey(key, w)).Result()
		if err != nil {
			t.Fatal(err)
		}
		// The TTL counts on Redis's clock from when the PEXPIRE ran: a
		// little less than the test's instant says, never more.
		if ttl > tc.want || ttl < tc.want-time.Minute {
			t.Errorf("%s: TTL %s, want %s", tc.a, ttl, tc.want)
		}
	}
}

// TestMemoryUsageCalendar reports what a calendar limit's counter costs in
// Redis (MEMORY USAGE), with a key as the service builds it: the figure in
// the sizing table beside the plain windows'. A calendar window is a
// counter like any window; its key is longer by its unit and zone.
func TestMemoryUsageCalendar(t *testing.T) {
	z, err := limits.LoadZone("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, z).UnixMicro()
	s, c, _ := setup(t, Options{Clock: func() int64 { return now }})
	for _, a := range []limits.Algorithm{limits.FixedWindow, limits.SlidingWindow} {
		l := limits.Limit{Algorithm: a, Requests: 10000, Period: 30 * 24 * time.Hour, Calendar: limits.Calendar{Unit: limits.CalendarMonth, Zone: z}}
		key := descriptors.Key(descriptors.KeyInput{
			Domain:  "api",
			Entries: []descriptors.Entry{{Key: "user", Value: "alice"}, {Key: "path", Value: "/v1/orders"}},
			Limit:   l,
		})
		res := make([]limits.Result, 1)
		s.Decide(t.Context(), []limits.Hit{{Key: key, Limit: l, Cost: 1}}, res)
		if res[0].Err != nil || !res[0].Allowed {
			t.Fatalf("%s: %+v", l, res[0])
		}
		counter := windowKey(key, limits.WindowFrame(l, now).W)
		n, err := c.MemoryUsage(t.Context(), counter, 0).Result()
		if err != nil {
			t.Fatalf("MEMORY USAGE %s: %v", counter, err)
		}
		t.Logf("%-14s calendar month, one counter (%d-byte name): %4d bytes", a, len(counter), n)
	}
}
