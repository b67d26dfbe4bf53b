package redisstore

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// A master of a cluster that hangs (a paused process, a host that stopped
// answering) holds every call on its keys for the store timeout, until its
// replica is promoted or it answers again: each such call costs its caller
// the whole timeout. So each master has a gate, which the calls for its
// keys pass on their way to its batcher. Once calls have kept timing out on
// it, the gate shuts, and a call for its keys fails at once, unavailable,
// without waiting; one call is let through now and then to probe, and the
// first that is answered opens the gate again, as does a reload of the
// map whose PING the master answers. A key whose slot moves to another
// master goes through that master's gate. The other masters' gates, and so
// their keys, are untouched.
//
// The gate shuts on the terms of pkg/limits/breaker, for the same reason:
// calls in flight when a master stalls for a moment all time out together,
// and counting them as failures in a row would shut the gate on a stall
// that is over. It shuts once shutAfter calls in a row have failed on the
// master, the latest recorded at least a store timeout after the first:
// a call made after the first failure was known failed too. A master that
// hangs thus costs the calls of about two store timeouts their full wait,
// and later ones nothing. The first probe goes a store timeout after the
// gate shuts; each failed probe doubles the wait, up to maxProbeWait.

// shutAfter is how many calls in a row must fail on a master, spanning a
// store timeout, to shut its gate.
const shutAfter = 2

// maxProbeWait is the longest wait between two probes of a shut gate: a
// master that answers again after a long hang is used again within about
// that much (or the next reload of the map, if sooner).
const maxProbeWait = 500 * time.Millisecond

// errMasterDown is the error of a call refused by a shut gate; the store
// reports it unavailable, so the failure mode applies.
var errMasterDown = errors.New("cluster master not answering: failing fast until a probe is answered")

// gate is one master's. The path of a call while the master answers reads
// two atomic flags and takes no lock.
type gate struct {
	timeout time.Duration

	shut    atomic.Bool
	down    atomic.Bool  // the latest call that told failed; shut implies down
	probeAt atomic.Int64 // Unix ns: when the next probe may go, while shut

	mu      sync.Mutex
	probing bool          // a probe is in flight
	failed  int           // calls in a row that failed on the master
	first   time.Time     // when the first of them was recorded
	wait    time.Duration // the wait after the next failed probe
}

func newGate(timeout time.Duration) *gate {
	return &gate{timeout: timeout}
}

// admit reports whether a call may go to the master, and whether it is the
// probe of a shut gate, which must be recorded (or released).
func (g *gate) admit() (probe, ok bool) {
	if !g.shut.Load() {
		return false, true
	}
	if time.Now().UnixNano() < g.probeAt.Load() {
		return false, false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case !g.shut.Load():
		return false, true // opened meanwhile
	case g.probing || time.Now().UnixNano() < g.probeAt.Load():
		return false, false
	}
	g.probing = true
	return true, true
}

// record tells the gate what a call it admitted found.
func (g *gate) record(probe bool, o outcome) {
	if !probe && (o == unknown || o == answered && !g.down.Load()) {
		return // open, and nothing to reset: the hot path
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if probe {
		g.probing = false
	}
	now := time.Now()
	switch {
	case o == answered:
		g.open()
	case o == unknown:
	case probe && g.shut.Load():
		g.probeAt.Store(now.Add(g.wait).UnixNano())
		g.wait = min(2*g.wait, maxProbeWait)
	case g.shut.Load():
		// A call admitted before the gate shut: it tells nothing the
		// shutting did not, and must not delay the probe.
	default:
		g.down.Store(true)
		g.failed++
		if g.failed == 1 {
			g.first = now
		}
		if g.failed >= shutAfter && now.Sub(g.first) >= g.timeout {
			g.probeAt.Store(now.Add(g.timeout).UnixNano())
			g.wait = min(2*g.timeout, maxProbeWait)
			g.shut.Store(true)
		}
	}
}

// heard opens the gate: the master answered a reload's PING.
func (g *gate) heard() {
	if !g.down.Load() {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open()
}

// open forgets the failures; g.mu is held.
func (g *gate) open() {
	g.failed = 0
	g.shut.Store(false)
	g.down.Store(false)
}

// outcome is what one call tells of a master.
type outcome uint8

const (
	answered outcome = iota // the master answered
	down                    // the call timed out, or could not reach it
	unknown                 // the call proves nothing either way
)

// outcomeOf tells what wk, sent with ctx to one master, found: down when
// it stopped waiting at its deadline or every command failed to reach the
// node, unknown when its caller gave up (or it sent nothing).
func outcomeOf(ctx context.Context, wk *work) outcome {
	if errors.Is(context.Cause(ctx), context.Canceled) {
		return unknown
	}
	if wk.err != nil {
		if errors.Is(wk.err, context.DeadlineExceeded) {
			return down
		}
		return unknown
	}
	for _, c := range wk.cmds {
		if !failedOn(c.Err()) {
			return answered
		}
	}
	if len(wk.cmds) == 0 {
		return unknown
	}
	return down
}
