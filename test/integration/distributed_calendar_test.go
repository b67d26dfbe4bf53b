package integration

import (
	be "encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// soonZone writes, under a new directory for ZONEINFO, a time zone
// Test/Soon whose midnight is at the instant boundary: a TZif file of one
// fixed offset, read by Go's own loader as every zone is. No real zone has
// its midnight a few seconds from now; this one lets two processes cross a
// calendar day's boundary on Redis's clock (this host's, which Redis
// shares) within a test.
func soonZone(t *testing.T, boundary time.Time) (dir string, tzif []byte) {
	t.Helper()
	offset := int32((86400 - boundary.Unix()%86400) % 86400)
	if offset > 43200 {
		offset -= 86400
	}
	var b []byte
	b = append(b, "TZif"...)
	b = append(b, make([]byte, 16)...) // version 0, then unused bytes
	for _, n := range []uint32{0, 0, 0, 0, 1, 4} {
		// isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt
		b = be.BigEndian.AppendUint32(b, n)
	}
	b = be.BigEndian.AppendUint32(b, uint32(offset)) // the one type: utoff,
	b = append(b, 0, 0)                              // isdst, abbreviation index
	b = append(b, "TST\x00"...)
	dir = t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "Test"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "Test", "Soon"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, b
}

// TestDistributedCalendar: two processes on one Redis count one daily
// calendar quota, fixed and sliding, whose day ends a few seconds into the
// test. Before the boundary they allow exactly N between them and both
// report the reset at the boundary; after it, the fixed window allows N
// again and both report the next midnight, and the sliding window still
// refuses, the day before weighing almost all of it.
func TestDistributedCalendar(t *testing.T) {
	t.Parallel()
	const n = 5
	boundary := time.Now().Add(9 * time.Second).Truncate(time.Second)
	zoneinfo, tzif := soonZone(t, boundary)
	r := redistest.Start(t)
	config := writeConfig(t, `domain: cal
descriptors:
  - key: fixed
    rate_limit: {algorithm: fixed_window, unit: day, requests_per_unit: 5, calendar: true, time_zone: Test/Soon}
  - key: sliding
    rate_limit: {algorithm: sliding_window, unit: day, requests_per_unit: 5, calendar: true, time_zone: Test/Soon}
`)
	servers := make([]*server, 2)
	for i := range servers {
		servers[i] = startServerWith(t, func(grpcAddr, httpAddr string) ([]string, []string) {
			args := append(standardFlags(config, grpcAddr, httpAddr), "-redis-url", r.URL(), "-store-timeout", "2s", "-failure-mode", "error")
			return args, []string{"ZONEINFO=" + zoneinfo}
		})
	}
	if left := time.Until(boundary); left < 2*time.Second {
		t.Fatalf("the servers took until %s before the boundary to start: no time left to count before it", left)
	}
	day := 24 * time.Hour
	zone, err := time.LoadLocationFromTZData("Test/Soon", tzif)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: r.Addr()})
	defer c.Close()
	limitOf := func(key string) limits.Limit {
		alg := limits.FixedWindow
		if key == "sliding" {
			alg = limits.SlidingWindow
		}
		return limits.Limit{Algorithm: alg, Requests: n, Period: day, Calendar: limits.Calendar{Unit: limits.CalendarDay, Zone: zone}}
	}
	// counter is the Redis key of key's count in the window of now.
	counter := func(key string) string {
		l := limitOf(key)
		k := descriptors.Key(descriptors.KeyInput{Domain: "cal", Entries: []descriptors.Entry{{Key: key, Value: "acme"}}, Limit: l})
		return k + "#" + strconv.FormatInt(limits.WindowFrame(l, time.Now().UnixMicro()).W, 10)
	}
	// counted is key's count in Redis in the window of now (a BITFIELD
	// field, u63 at offset 0).
	counted := func(key string) int64 {
		v, err := c.BitField(t.Context(), counter(key), "get", "u63", 0).Result()
		if err != nil || len(v) != 1 {
			t.Fatalf("BITFIELD GET %s: %v %v", counter(key), v, err)
		}
		return v[0]
	}
	// Before the boundary: exactly N between the two, the reset at the
	// boundary (fixed) or a day after it (sliding: the count weighs on);
	// a sliding refusal waits until the count's weight has fallen by one,
	// a fifth into the next day.
	countCalendar(t, servers, "fixed", n, boundary, boundary, counted)
	countCalendar(t, servers, "sliding", n, boundary.Add(day), boundary.Add(day/n), counted)
	// The counters live until their windows' real ends: the boundary, and
	// a day after it for the sliding window's.
	for _, tc := range []struct {
		key string
		end time.Time
	}{{"fixed", boundary}, {"sliding", boundary.Add(day)}} {
		ttl, err := c.PTTL(t.Context(), counter(tc.key)).Result()
		if want := time.Until(tc.end); err != nil || ttl > want+time.Second || ttl < want-time.Second {
			t.Errorf("%s: PTTL %s = %s (%v), want %s", tc.key, counter(tc.key), ttl, err, want.Round(time.Millisecond))
		}
	}
	time.Sleep(time.Until(boundary.Add(500 * time.Millisecond)))
	// After it: the fixed window starts over, until the next midnight.
	countCalendar(t, servers, "fixed", n, boundary.Add(day), boundary.Add(day), counted)
	// The sliding window weighs yesterday's 5 by the 99.999% of today
	// left: nothing fits, on either instance, until it decays.
	countCalendar(t, servers, "sliding", 0, boundary.Add(day), boundary.Add(day/n), counted)
}

// countCalendar sends allowed requests for key through the servers in
// turn, each of which must be allowed and report its reset at okEnd, then
// one more to each server, which must be refused and report its wait until
// overEnd (within a second: the answer's time is from this host's clock).
// Before each refused request but the first, it waits until counted, the
// key's count in Redis, is back at allowed: a refusal's undo goes after
// its answer, and a refusal that counted the one before it would compute
// its wait from one more.
func countCalendar(t *testing.T, servers []*server, key string, allowed int, okEnd, overEnd time.Time, counted func(string) int64) {
	t.Helper()
	check := func(i int, s *server, wantOK bool) {
		t.Helper()
		resp := s.decide(t, request("cal", desc(key, "acme")))
		st := resp.GetStatuses()[0]
		if got := resp.GetOverallCode() == codeOK; got != wantOK {
			t.Fatalf("%s, request %d: overall %v, want OK %v", key, i, resp.GetOverallCode(), wantOK)
		}
		reset, end := st.GetDurationUntilReset().AsDuration(), okEnd
		if !wantOK {
			end = overEnd
		}
		if want := time.Until(end); reset > want+time.Second || reset < want-time.Second {
			t.Errorf("%s, request %d: duration_until_reset %s, want the boundary %s away", key, i, reset, want.Round(time.Millisecond))
		}
	}
	for i := range allowed {
		check(i, servers[i%len(servers)], true)
	}
	for i, s := range servers {
		if i > 0 && !poll(10*time.Second, func() bool { return counted(key) == int64(allowed) }) {
			t.Fatalf("%s: count %d in Redis 10 s after a refusal, want its undo back at %d", key, counted(key), allowed)
		}
		check(allowed+i, s, false)
	}
}
