package breaker

import (
	"sync"
	"sync/atomic"
	"time"
)

// Circuit is the state machine of a breaker, apart from what it guards:
// the Breaker keeps one for a whole store, and the Redis store one for each
// master of a cluster. It opens, probes and closes on the terms of the
// package doc. It is safe for concurrent use.
type Circuit struct {
	failures int
	timeout  time.Duration
	cooldown time.Duration
	now      func() time.Time

	// These are written under mu and read without it: a closed circuit
	// whose calls succeed, and an open one that refuses, take no lock.
	// down is set while the latest call that told found its target
	// unavailable; open implies down. probeAt (Unix nanoseconds) is stored
	// before open is set, and before probing is cleared.
	open    atomic.Bool
	down    atomic.Bool
	probing atomic.Bool  // a probe is in flight
	probeAt atomic.Int64 // when the next probe may go

	mu          sync.Mutex
	failed      int           // calls in a row that found the target unavailable
	firstFailed time.Time     // when the first of them was recorded
	wait        time.Duration // the wait after the next failed probe
}

// NewCircuit returns a closed circuit with the Failures, Timeout, Cooldown
// and Now of opts (their defaults where zero); the callbacks are the
// Breaker's, not the circuit's.
func NewCircuit(opts Options) *Circuit {
	if opts.Failures <= 0 {
		opts.Failures = 3
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 50 * time.Millisecond
	}
	if opts.Cooldown <= 0 {
		opts.Cooldown = 500 * time.Millisecond
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Circuit{failures: opts.Failures, timeout: opts.Timeout, cooldown: max(opts.Cooldown, opts.Timeout), now: opts.Now}
}

// Open reports whether the circuit is failing fast.
func (c *Circuit) Open() bool { return c.open.Load() }

// Down reports whether the latest call that told found the target
// unavailable.
func (c *Circuit) Down() bool { return c.down.Load() }

// Admit reports whether a call may reach the target, and whether it is the
// probe of an open circuit, whose outcome Record must then be given. It
// takes no lock: during an outage every call comes here, and each must be
// refused at once.
func (c *Circuit) Admit() (probe, ok bool) {
	if !c.open.Load() {
		return false, true
	}
	if c.probing.Load() || c.now().UnixNano() < c.probeAt.Load() {
		return false, false
	}
	if !c.probing.CompareAndSwap(false, true) {
		return false, false // another call took the probe
	}
	// A call held up between the loads above and the swap may have read
	// probeAt before the last probe failed and moved it.
	if c.now().UnixNano() < c.probeAt.Load() {
		c.probing.Store(false)
		return false, false
	}
	return true, true
}

// Outcome is what one call tells of the target.
type Outcome uint8

const (
	Answered Outcome = iota // the target answered
	Down                    // the target was unavailable
	Unknown                 // the call proves nothing either way
)

// Record tells the circuit what a call it admitted found, and reports
// whether its state may have changed (the hot path, a closed circuit whose
// call was answered, reports false).
func (c *Circuit) Record(probe bool, o Outcome) bool {
	if !probe && (o == Unknown || o == Answered && !c.down.Load()) {
		return false // closed, and nothing to reset: the hot path
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch o {
	case Answered:
		c.reset()
	case Down:
		c.down.Store(true)
		now := c.now()
		switch {
		case probe && c.open.Load():
			c.probeAt.Store(now.Add(c.wait).UnixNano())
			c.wait = min(2*c.wait, c.cooldown)
		case c.open.Load():
			// A call let through before the circuit opened: it says
			// nothing the opening did not, and must not delay the probe.
		default:
			c.failed++
			if c.failed == 1 {
				c.firstFailed = now
			}
			if c.failed >= c.failures && now.Sub(c.firstFailed) >= c.timeout {
				c.probeAt.Store(now.Add(c.timeout).UnixNano())
				c.wait = min(2*c.timeout, c.cooldown)
				c.open.Store(true)
			}
		}
	}
	if probe {
		c.probing.Store(false)
	}
	return true
}

// Heard closes the circuit on news from elsewhere that the target answers
// (a PING of its own), as an answered call would.
func (c *Circuit) Heard() {
	if !c.down.Load() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reset()
}

// reset forgets the failures; c.mu is held.
func (c *Circuit) reset() {
	c.failed = 0
	c.open.Store(false)
	c.down.Store(false)
}
