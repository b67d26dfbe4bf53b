package limits

import (
	"testing"
	"time"
)

const t0 int64 = 1_700_000_000_000_000 // 20 s into a minute

// TestGiveBackWindows: a window gives a held cost back to the window of
// the reservation, as long as the state still counts that window.
func TestGiveBackWindows(t *testing.T) {
	fw := Limit{Algorithm: FixedWindow, Requests: 10, Period: time.Minute}
	sw := Limit{Algorithm: SlidingWindow, Requests: 10, Period: time.Minute}
	r := Reservation{Cost: 4, At: t0, Until: t0 + 600e6}
	w := WindowFrame(fw, t0).W
	for _, c := range []struct {
		name      string
		l         Limit
		s         State
		now       int64
		count     int64
		prev      int64
		unchanged bool
	}{
		{"fixed, same window", fw, State{Live: true, Window: w, Count: 7}, t0 + 10e6, 3, 0, false},
		{"fixed, never below zero", fw, State{Live: true, Window: w, Count: 2}, t0, 0, 0, false},
		{"fixed, next window", fw, State{Live: true, Window: w + 1, Count: 7}, t0 + 60e6, 0, 0, true},
		{"sliding, same window", sw, State{Live: true, Window: w, Count: 7, Prev: 2}, t0, 3, 2, false},
		{"sliding, as the previous window", sw, State{Live: true, Window: w + 1, Count: 1, Prev: 7}, t0 + 60e6, 1, 3, false},
		{"sliding, two windows on", sw, State{Live: true, Window: w + 2, Count: 1, Prev: 7}, t0 + 120e6, 0, 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := GiveBack(c.l, c.s, r, c.now)
			if c.unchanged {
				if d.Changed {
					t.Fatalf("got %+v, want nothing given back", d)
				}
				return
			}
			if !d.Changed || d.State.Count != c.count || d.State.Prev != c.prev || d.State.Window != c.s.Window {
				t.Fatalf("got %+v, want count %d prev %d in window %d", d.State, c.count, c.prev, c.s.Window)
			}
			if d.State.Live != (d.ExpireAt > c.now) {
				t.Fatalf("got %+v expiring at %d: live and expiry disagree", d.State, d.ExpireAt)
			}
		})
	}
}

// TestGiveBackEntries: a sliding log gives back from its entries of the
// reservation's instant alone, a concurrency limit frees the slots that
// expire at the hold's end alone.
func TestGiveBackEntries(t *testing.T) {
	sl := Limit{Algorithm: SlidingLog, Requests: 10, Period: time.Minute}
	s := State{Live: true, Count: 9, Log: []LogEntry{{At: t0 - 1, Cost: 2}, {At: t0, Cost: 4}, {At: t0 + 5, Cost: 3}}}
	d := GiveBack(sl, s, Reservation{Cost: 4, At: t0, Until: t0 + 1e9}, t0+10)
	if !d.Changed || d.State.Count != 5 || len(d.State.Log) != 2 || d.ExpireAt != t0+5+60e6 {
		t.Fatalf("log: got %+v, want the entry of t0 gone", d)
	}
	if s.Log[1].Cost != 4 {
		t.Fatalf("the state given was changed: %+v", s)
	}
	if d := GiveBack(sl, s, Reservation{Cost: 4, At: t0, Until: t0 + 1e9}, t0+60e6); d.Changed {
		t.Fatalf("log, the entry of t0 gone from the window: got %+v, want nothing given back", d)
	}
	cc := Limit{Algorithm: Concurrency, Requests: 10, Period: time.Minute}
	r := NewReservation(cc, 2, t0, 10*time.Second)
	if r.Until != t0+10e6 {
		t.Fatalf("concurrency reservation %+v, want it to end with the hold's lease", r)
	}
	slots := State{Live: true, Count: 5, Log: []LogEntry{{At: t0 + 10e6, Cost: 3}, {At: t0 + 60e6, Cost: 2}}}
	d = GiveBack(cc, slots, r, t0+1)
	if !d.Changed || d.State.Count != 3 || d.State.Log[0].Cost != 1 {
		t.Fatalf("concurrency: got %+v, want 2 of the slots ending at t0 + 10 s freed", d)
	}
}

// TestSettle: a settle gives back, then charges whether the cost fits or
// not, answering whether it did, with no delay.
func TestSettle(t *testing.T) {
	lb := Limit{Algorithm: LeakyBucket, Requests: 10, Period: time.Second, Burst: 5}
	s := DecideWithin(lb, State{}, 6, t0, 0).State
	d := Settle(lb, s, Reservation{Cost: 6, At: t0, Until: t0 + 1e9}, 3, t0+150e3)
	if !d.Result.Allowed || d.Result.Delay != 0 || d.Result.Remaining != 3 {
		t.Fatalf("leaky settle: got %+v, want allowed, no delay, 3 places left", d.Result)
	}
	fw := Limit{Algorithm: FixedWindow, Requests: 10, Period: time.Minute}
	s = State{Live: true, Window: WindowFrame(fw, t0).W, Count: 10}
	d = Settle(fw, s, Reservation{Cost: 2, At: t0, Until: t0 + 1e9}, 7, t0)
	if d.Result.Allowed || d.State.Count != 15 {
		t.Fatalf("fixed settle over the limit: got %+v, want refused and charged (15)", d)
	}
	cc := Limit{Algorithm: Concurrency, Requests: 10, Period: time.Minute}
	r := NewReservation(cc, 2, t0, time.Hour)
	s = DecideWithin(ReserveLimit(cc, time.Hour), State{}, 2, t0, 0).State
	d = Settle(cc, s, r, 50, t0+1)
	if !d.Result.Allowed || d.Result.Remaining != 10 || d.State.Live {
		t.Fatalf("concurrency settle: got %+v, want its slots freed and nothing charged", d)
	}
	if d := Unheld(cc, s, -1, t0+1, 0); d.Changed || !d.Result.Allowed || d.Result.Remaining != 8 {
		t.Fatalf("concurrency settle with no hold: got %+v, want nothing freed", d)
	}
}

// TestHoldsOnALockout: a settle on a locked key gives back and charges the
// algorithm's state and keeps the lock; a repeat starts none.
func TestHoldsOnALockout(t *testing.T) {
	l := Limit{Algorithm: FixedWindow, Requests: 4, Period: time.Minute, BlockFor: time.Hour}
	s := DecideWithin(l, State{}, 4, t0, 0).State
	if rep := Repeated(l, s, t0); !rep.Allowed || rep.Remaining != 0 {
		t.Fatalf("repeat on a full key: %+v, want allowed", rep)
	}
	locked := DecideWithin(l, s, 1, t0, 0)
	if !locked.Locks {
		t.Fatalf("want a lock: %+v", locked)
	}
	d := Settle(l, locked.State, Reservation{Cost: 4, At: t0, Until: t0 + 1e9}, 1, t0+1)
	if !d.Changed || d.State.Count != 1 || d.State.LockEnd != locked.State.LockEnd || d.ExpireAt < locked.State.LockEnd {
		t.Fatalf("settle on a locked key: got %+v, want count 1 and the lock kept", d)
	}
	if r := ReserveLimit(Limit{Algorithm: TokenBucket, CountRefused: true}, time.Minute); r.CountRefused {
		t.Fatalf("ReserveLimit kept count_refused: %+v", r)
	}
	if d := GiveBack(Limit{Algorithm: FixedWindow, Period: time.Minute}, State{Live: true, Count: 1}, Reservation{Cost: 1}, t0); d.Changed {
		t.Fatalf("a block rule gave back: %+v", d)
	}
}
