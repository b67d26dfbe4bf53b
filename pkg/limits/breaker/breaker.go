// Package breaker stops waiting on a store that is down. A rate limiter sits
// on every request's path: when Redis dies, each call would otherwise wait
// for its timeout (50 ms by default, more than Envoy's 20 ms deadline)
// before the failure mode applies. After a few calls in a row find the store
// unavailable, the breaker opens and answers at once with ErrOpen; every
// Cooldown it lets one call through to probe, and the first success closes
// it again.
package breaker

import (
	"context"
	"errors"
	"fmt"
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
	// to open the breaker. Zero means 3.
	Failures int
	// Cooldown is how long the breaker stays open before it lets one call
	// probe the store. Zero means 500 ms, so that a store that is back is
	// used again within a second.
	Cooldown time.Duration
	// OnChange, if set, is called (outside the lock) when the breaker opens
	// (true) or closes (false).
	OnChange func(open bool)
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Breaker wraps a store. It is safe for concurrent use.
type Breaker struct {
	inner    limits.Store
	failures int
	cooldown time.Duration
	onChange func(bool)
	now      func() time.Time

	mu        sync.Mutex
	failed    int       // consecutive calls that found the store unavailable
	open      bool      // failing fast
	openUntil time.Time // when the next probe may go
	probing   bool      // a probe is in flight
}

var _ limits.Store = (*Breaker)(nil)

// New wraps inner.
func New(inner limits.Store, opts Options) *Breaker {
	if opts.Failures <= 0 {
		opts.Failures = 3
	}
	if opts.Cooldown <= 0 {
		opts.Cooldown = 500 * time.Millisecond
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Breaker{inner: inner, failures: opts.Failures, cooldown: opts.Cooldown, onChange: opts.OnChange, now: opts.Now}
}

// Open reports whether the breaker is failing fast.
func (b *Breaker) Open() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.open
}

// Decide implements limits.Store.
func (b *Breaker) Decide(ctx context.Context, hits []limits.Hit, results []limits.Result) {
	probe, ok := b.admit()
	if !ok {
		for i := range results[:len(hits)] {
			results[i] = limits.Result{Err: ErrOpen}
		}
		return
	}
	b.inner.Decide(ctx, hits, results)
	b.record(probe, unavailable(ctx, results[:len(hits)]))
}

// admit reports whether a call may reach the store, and whether it is the
// probe of an open breaker.
func (b *Breaker) admit() (probe, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case !b.open:
		return false, true
	case b.probing || b.now().Before(b.openUntil):
		return false, false
	}
	b.probing = true
	return true, true
}

func (b *Breaker) record(probe, down bool) {
	b.mu.Lock()
	changed := false
	if probe {
		b.probing = false
	}
	switch {
	case !down:
		b.failed = 0
		changed = b.open
		b.open = false
	case probe || b.open:
		b.openUntil = b.now().Add(b.cooldown)
	default:
		b.failed++
		if b.failed >= b.failures {
			b.open, changed = true, true
			b.openUntil = b.now().Add(b.cooldown)
		}
	}
	open := b.open
	b.mu.Unlock()
	if changed && b.onChange != nil {
		b.onChange(open)
	}
}

// unavailable reports whether a call found the store down: every hit failed
// with limits.ErrUnavailable. A reply error (a key of the wrong type) means
// the store answered; a partial failure (one cluster node down) is left to
// the per-hit failure modes, not held against the whole store. A call whose
// own context ended first proves nothing either way.
func unavailable(ctx context.Context, results []limits.Result) bool {
	if len(results) == 0 {
		return false
	}
	for _, r := range results {
		if r.Err == nil || !errors.Is(r.Err, limits.ErrUnavailable) {
			return false
		}
	}
	return ctx.Err() == nil || !errors.Is(ctx.Err(), context.Canceled)
}
