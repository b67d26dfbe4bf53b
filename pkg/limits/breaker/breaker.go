package breaker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// ErrOpen is the error of every hit while the breaker is open. It wraps
// limits.ErrUnavailable: the store is as good as down.
var ErrOpen = fmt.Errorf("%w: circuit open after repeated failures", limits.ErrUnavailable)

// Options tune a Breaker. The zero value is usable.
type Options struct {
	// Failures is how many calls in a row must find the store unavailable
	// to open the breaker (as well as spanning Timeout). Zero means 3.
	Failures int
	// Timeout is the store's timeout (-store-timeout): how long failures
	// must span before the breaker opens, and how long it waits before its
	// first probe. Zero means 50 ms, the flag's default.
	Timeout time.Duration
	// Cooldown is the longest wait between probes of an open breaker: the
	// wait doubles from Timeout up to Cooldown while probes fail. Zero
	// means 500 ms, so that a store that is back after a long outage is
	// used again within about a second.
	Cooldown time.Duration
	// OnChange, if set, is called (outside the lock) when the breaker opens
	// (true) or closes (false). Calls are never concurrent, and the last
	// one always gives the state the breaker is in, though an opening
	// undone at once may go unreported.
	OnChange func(open bool)
	// OnStoreUp, if set, is called (outside the lock, on the same terms as
	// OnChange) when a call finds the store unavailable after calls found
	// it answering (false), or the other way round (true): the store's
	// state as the calls see it, at once, where the breaker waits for
	// sustained failures. A call that proves nothing (its caller gave up)
	// changes nothing.
	OnStoreUp func(up bool)
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Answering is what a store may tell the breaker besides its answers:
// whether it has had any reply from its backend within the last d (a
// round trip that came back, however late for its caller). It must be
// fast and safe for concurrent use.
type Answering interface {
	AnsweredWithin(d time.Duration) bool
}

// Breaker wraps a store. It is safe for concurrent use.
type Breaker struct {
	inner     limits.Store
	answering Answering // inner, if it tells; nil otherwise
	timeout   time.Duration
	circuit   *Circuit
	onChange  func(bool)
	onStoreUp func(bool)

	notifyMu     sync.Mutex // serializes the callbacks
	reportedOpen bool       // what OnChange last said
	reportedDown bool       // what OnStoreUp last said, negated
}

var (
	_ limits.Store      = (*Breaker)(nil)
	_ limits.Resetter   = (*Breaker)(nil)
	_ limits.HoldReader = (*Breaker)(nil)
)

// New wraps inner.
func New(inner limits.Store, opts Options) *Breaker {
	c := NewCircuit(opts)
	a, _ := inner.(Answering)
	return &Breaker{inner: inner, answering: a, timeout: c.timeout, circuit: c, onChange: opts.OnChange, onStoreUp: opts.OnStoreUp}
}

// Open reports whether the breaker is failing fast.
func (b *Breaker) Open() bool { return b.circuit.Open() }

// Decide implements limits.Store.
func (b *Breaker) Decide(ctx context.Context, hits []limits.Hit, results []limits.Result) {
	probe, ok := b.circuit.Admit()
	if !ok {
		for i := range results[:len(hits)] {
			results[i] = limits.Result{Err: ErrOpen}
		}
		return
	}
	b.inner.Decide(ctx, hits, results)
	o := outcomeOf(ctx, results[:len(hits)])
	if o == Down && b.answering != nil && timedOut(results[:len(hits)]) && b.answering.AnsweredWithin(b.timeout) {
		o = Unknown // slow, not down
	}
	if b.circuit.Record(probe, o) {
		b.notify()
	}
}

// notify reports the state to the callbacks if it differs from what they
// were last told. Reading the state under notifyMu, rather than passing
// each change along, keeps two changes made at once by two calls from
// reaching the callbacks in the wrong order.
func (b *Breaker) notify() {
	if b.onChange == nil && b.onStoreUp == nil {
		return
	}
	b.notifyMu.Lock()
	defer b.notifyMu.Unlock()
	if isDown := b.circuit.Down(); isDown != b.reportedDown {
		b.reportedDown = isDown
		if b.onStoreUp != nil {
			b.onStoreUp(!isDown)
		}
	}
	if open := b.circuit.Open(); open != b.reportedOpen {
		b.reportedOpen = open
		if b.onChange != nil {
			b.onChange(open)
		}
	}
}

// outcomeOf tells what a call found. The store is down when every hit
// failed with limits.ErrUnavailable. A reply error (a key of the wrong type)
// means the store answered; so does a partial failure (one cluster node
// down), which is left to the per-hit failure modes, not held against the
// whole store. A call whose own context was cancelled first, or that had no
// hits, proves nothing.
func outcomeOf(ctx context.Context, results []limits.Result) Outcome {
	if len(results) == 0 {
		return Unknown
	}
	for _, r := range results {
		if r.Err == nil || !errors.Is(r.Err, limits.ErrUnavailable) {
			return Answered
		}
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		return Unknown
	}
	return Down
}

// timedOut reports whether every hit failed by a timeout (its call's
// deadline, or a socket's): a store that refuses connections, or answers
// an error, is not slow.
func timedOut(results []limits.Result) bool {
	for _, r := range results {
		if !errors.Is(r.Err, context.DeadlineExceeded) && !errors.Is(r.Err, os.ErrDeadlineExceeded) {
			return false
		}
	}
	return true
}

// Reset passes the reset on to the store it wraps, open or not: an
// operator asked for it, and a store that is down fails it with an error.
func (b *Breaker) Reset(ctx context.Context, hits []limits.Hit) error {
	return limits.Reset(ctx, b.inner, hits)
}

// Slots passes the read on to the store it wraps, open or not, as Reset.
func (b *Breaker) Slots(ctx context.Context, h limits.Hit) ([]limits.LogEntry, int64, error) {
	return limits.Slots(ctx, b.inner, h)
}

// Held passes the read on to the store it wraps, open or not, as Reset.
func (b *Breaker) Held(ctx context.Context, h limits.Hit) (cost, holds int64, err error) {
	return limits.Held(ctx, b.inner, h)
}
