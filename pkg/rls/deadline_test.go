package rls

import (
	"testing"
	"time"
)

// Calls within a tick share a context, whose end is never later than
// -store-timeout after any of them started, nor more than a tick earlier.
func TestStoreDeadlinesShareATick(t *testing.T) {
	const timeout = 50 * time.Millisecond
	d := newStoreDeadlines(timeout)
	if d.tick != time.Millisecond {
		t.Fatalf("tick = %v, want 1ms for a 50ms timeout", d.tick)
	}
	t0 := time.Now()
	first := d.context(t0)
	for _, at := range []time.Duration{0, 100 * time.Microsecond, 999 * time.Microsecond} {
		now := t0.Add(at)
		ctx := d.context(now)
		if ctx != first {
			t.Errorf("a call %v into the tick got a context of its own", at)
		}
		end, ok := ctx.Deadline()
		if !ok {
			t.Fatal("the shared context has no deadline")
		}
		if left := end.Sub(now); left > timeout || left <= timeout-d.tick {
			t.Errorf("a call %v into the tick is given %v, want (%v, %v]", at, left, timeout-d.tick, timeout)
		}
	}
	next := d.context(t0.Add(time.Millisecond))
	if next == first {
		t.Error("a call a tick later shares the first context")
	}
	if end, _ := next.Deadline(); end.Sub(t0.Add(time.Millisecond)) != timeout {
		t.Errorf("the next tick's context ends %v after its first call, want %v", end.Sub(t0.Add(time.Millisecond)), timeout)
	}
	// A call that started before the tick opened (it raced with the one that
	// opened it) would be given more than the timeout: it gets its own.
	if d.context(t0.Add(500*time.Microsecond)) == next {
		t.Error("a call that started before the tick opened shares its context")
	}
}

// The shared context ends: a store that never answers is given up on.
func TestStoreDeadlinesEnd(t *testing.T) {
	d := newStoreDeadlines(20 * time.Millisecond)
	ctx := d.context(time.Now())
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the shared context did not end")
	}
	// A tiny timeout gets a tick of a twentieth of it.
	if tick := newStoreDeadlines(time.Millisecond).tick; tick != 50*time.Microsecond {
		t.Errorf("tick for 1ms = %v, want 50µs", tick)
	}
}
