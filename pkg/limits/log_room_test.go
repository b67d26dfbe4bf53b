package limits_test

import (
	"slices"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// TestSlidingLogKeepsTheOldState: a decision appends in place when the log
// has room, yet the state it started from reads as before, as a store
// that keeps the old state after a refused joint run needs.
func TestSlidingLogKeepsTheOldState(t *testing.T) {
	l := limits.Limit{Algorithm: limits.SlidingLog, Requests: 100, Period: time.Second}
	var s limits.State
	now := int64(base)
	for range 10 {
		s = limits.Decide(l, s, 1, now).State
		now += 1000
	}
	before := slices.Clone(s.Log)
	next := limits.Decide(l, s, 2, now)
	if !slices.Equal(s.Log, before) || s.Count != 10 {
		t.Fatalf("the old state changed: %v (count %d), want %v (count 10)", s.Log, s.Count, before)
	}
	if got := next.State.Log; len(got) != 11 || got[10] != (limits.LogEntry{At: now, Cost: 2}) || next.State.Count != 12 {
		t.Fatalf("new state %v (count %d), want the old entries and {%d 2}, count 12", got, next.State.Count, now)
	}
}

// TestSlidingLogRoomIsBounded: whatever the traffic, a log's array holds a
// bounded multiple of its live entries (LogRoom, which the embedded store
// counts), and a decision copies entries only now and then.
func TestSlidingLogRoomIsBounded(t *testing.T) {
	l := limits.Limit{Algorithm: limits.SlidingLog, Requests: 1000, Period: time.Second}
	var s limits.State
	now := int64(base)
	check := func(phase string) {
		t.Helper()
		if room, n := s.LogRoom(), len(s.Log); room > 4*n {
			t.Fatalf("%s: room %d for %d live entries, want at most 4n", phase, room, n)
		}
	}
	// A burst to the limit, then a steady trickle that replaces the burst
	// one entry at a time, then a rate well below it.
	for range 1000 {
		s = limits.Decide(l, s, 1, now).State
		check("burst")
	}
	for _, gap := range []int64{1000, 1000, 50_000, 200_000} {
		for range 2000 {
			now += gap
			s = limits.Decide(l, s, 1, now).State
			check("trickle")
		}
	}
	if s.Count != int64(len(s.Log)) {
		t.Errorf("count %d for %d entries of cost 1", s.Count, len(s.Log))
	}
}
