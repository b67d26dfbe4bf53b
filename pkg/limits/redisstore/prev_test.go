package redisstore

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// A sliding window's previous count is read from Redis with every hit
// until it is final (prevFinalAfter into the window, and twice the longest
// wait a call was given); from then on one read is kept, the hits send
// INCRBY alone, and they decide as a store that reads it would. A count
// that went down since (a give-back) leaves the kept one higher: stricter.
// A call without a deadline ends the keeping.
func TestPrevCountKept(t *testing.T) {
	const hour = int64(time.Hour / time.Microsecond)
	const start = int64(1_767_225_600_000_000) // an hour boundary
	var now atomic.Int64
	s, c, _ := setup(t, Options{Clock: now.Load})
	defer s.Close()
	l := hourly(limits.SlidingWindow, 100)
	decide := func(s *Store, cost int64, wait time.Duration) limits.Result {
		t.Helper()
		ctx, cancel := context.Background(), context.CancelFunc(func() {})
		if wait > 0 {
			ctx, cancel = context.WithTimeout(ctx, wait)
		}
		defer cancel()
		res := make([]limits.Result, 1)
		s.Decide(ctx, []limits.Hit{{Key: "prev", Limit: l, Cost: cost}}, res)
		if res[0].Err != nil {
			t.Fatal(res[0].Err)
		}
		return res[0]
	}
	gets := func(what string, want int, f func()) {
		t.Helper()
		if got := callsDuring(t, c, "get", f); got != want {
			t.Errorf("%s: %d GETs, want %d", what, got, want)
		}
	}
	now.Store(start - hour + 1000)
	for range 60 {
		decide(s, 1, time.Second)
	}
	// 1 s into the window the previous count may still change: a call may
	// wait a second, and the margin is twice that.
	now.Store(start + 1_000_000)
	gets("1 s into the window", 2, func() { decide(s, 1, time.Second); decide(s, 1, time.Second) })
	// 3 s in, the first hit reads it and the next ones do not.
	now.Store(start + 3_000_000)
	gets("3 s into the window", 1, func() {
		for range 3 {
			decide(s, 1, time.Second)
		}
	})
	// A peek reads the current count (GET) and, unless it is kept, the
	// previous one.
	var kept limits.Result
	gets("a peek once kept", 1, func() { kept = decide(s, 0, time.Second) })
	fresh := New(c, Options{Clock: now.Load})
	defer fresh.Close()
	if read := decide(fresh, 0, time.Second); kept != read {
		t.Errorf("with the count kept: %+v; a store that reads it: %+v", kept, read)
	}
	// A give-back lowered the previous count: the kept one is higher.
	if err := c.BitField(context.Background(), windowKey("prev", start/hour-1), "overflow", "sat", "incrby", "u63", 0, -30).Err(); err != nil {
		t.Fatal(err)
	}
	other := New(c, Options{Clock: now.Load})
	defer other.Close()
	if k, read := decide(s, 0, time.Second), decide(other, 0, time.Second); k.Remaining >= read.Remaining {
		t.Errorf("after a give-back: %d remaining with the count kept, %d read; want fewer kept", k.Remaining, read.Remaining)
	}
	// Calls of 20 ms (Envoy's default timeout) keep it from prevFinalAfter
	// into the window on, whatever the window's length: a per-second
	// window's from 250 ms into each second.
	short := New(c, Options{Clock: now.Load})
	defer short.Close()
	now.Store(start + prevFinalAfter - 1000)
	gets("20 ms calls, just before prevFinalAfter", 4, func() { decide(short, 0, 20*time.Millisecond); decide(short, 0, 20*time.Millisecond) })
	now.Store(start + prevFinalAfter)
	gets("20 ms calls, at prevFinalAfter", 3, func() { decide(short, 0, 20*time.Millisecond); decide(short, 0, 20*time.Millisecond) })
	now.Store(start + 3_000_000)
	// A longer wait moves the margin: 10 s calls make it 20 s.
	longer := New(c, Options{Clock: now.Load})
	defer longer.Close()
	gets("10 s calls, 3 s into the window", 4, func() { decide(longer, 0, 10*time.Second); decide(longer, 0, 10*time.Second) })
	now.Store(start + 21_000_000)
	gets("10 s calls, 21 s into the window", 3, func() { decide(longer, 0, 10*time.Second); decide(longer, 0, 10*time.Second) })
	// A call without a deadline could land its INCRBY at any time: nothing
	// is kept after it, even what was.
	gets("after a call without a deadline", 4, func() { decide(s, 0, 0); decide(s, 0, time.Second) })
}
