package rls

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// storeDeadlines bounds store calls by -store-timeout without a timer per
// call. context.WithTimeout for every request (a timer set, and stopped by
// cancel) is a measurable share of the service's CPU on the Redis path
// (BenchmarkStoreDeadline; BENCHMARKS.md has the figures), so calls that
// start within one tick of each other share one context: the first call of
// a tick opens it, ending timeout after that call started; the calls after
// it, up to a tick later, get the same end. A store call is thus given at
// most -store-timeout and at least one tick less, never more.
//
// The shared context does not end with the request's: a request cancelled
// by its client leaves its store call to finish or time out, as a request
// that outlives its store call would. A request whose own deadline comes
// first keeps its own context (Service.decide), as Envoy's 20 ms does.
type storeDeadlines struct {
	timeout, tick time.Duration
	current       atomic.Pointer[sharedDeadline]

	mu sync.Mutex // taken to open a tick
}

type sharedDeadline struct {
	opened time.Time // the start of the first call of the tick
	ctx    context.Context
	// cancel is never called while calls may hold ctx: the context ends at
	// its deadline, which releases its timer.
	cancel context.CancelFunc
}

// maxDeadlineTick bounds how much shorter than -store-timeout a call's bound
// may be.
const maxDeadlineTick = time.Millisecond

func newStoreDeadlines(timeout time.Duration) *storeDeadlines {
	return &storeDeadlines{timeout: timeout, tick: min(timeout/20, maxDeadlineTick)}
}

// context returns a context that ends between timeout-tick and timeout after
// now, the start of the caller's store call.
func (d *storeDeadlines) context(now time.Time) context.Context {
	if c := d.current.Load(); c != nil && d.within(c, now) {
		return c.ctx
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if c := d.current.Load(); c != nil && d.within(c, now) {
		return c.ctx
	}
	ctx, cancel := context.WithDeadline(context.Background(), now.Add(d.timeout))
	d.current.Store(&sharedDeadline{opened: now, ctx: ctx, cancel: cancel})
	return ctx
}

// within reports whether a call that starts at now may share c: c opened
// no later than now and less than a tick before.
func (d *storeDeadlines) within(c *sharedDeadline, now time.Time) bool {
	since := now.Sub(c.opened)
	return since >= 0 && since < d.tick
}
