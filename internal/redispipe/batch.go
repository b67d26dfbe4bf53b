package redispipe

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// farFlushes is how many times its flushes a batcher may have in flight on
// a far Redis (see limit), within half the connections of the client's
// pool.
const farFlushes = 4

// minStall is the least time a flush is out before another may start
// beside it (see batcher).
const minStall = 500 // µs

// maxStall is the most time a flush is out before another may start beside
// it, however long the round trip: on a far Redis (a round trip of several
// ms) a call that arrives while a flush is out waits at most this long for
// one of its own, not the rest of that round trip and then the next one's.
// A near Redis's four round trips (under 500 µs each) stay under it and
// govern.
const maxStall = 2000 // µs

// maxBatchRuns bounds the decisions of one merged pipeline; what is left
// goes with the next flush.
const maxBatchRuns = 512

// A batcher merges the work of concurrent calls: a call queues its
// work, and a flusher sends everything queued at once (one write, one
// read): the native commands of every call. One flush is in flight at a
// time, so that everything that queues while it is out goes in the next:
// Redis then reads and answers many decisions per round trip, where its
// cost is the syscalls of the round trip. A second flush (up to max) starts
// beside it only once the newest in flight has been out for longer than
// four round trips (at least minStall, at most maxStall), so that a
// connection that stalls (a lost packet, a slow reply) holds the calls
// behind it up no longer than that, and on a far Redis, where a round trip
// is mostly the network's and a pipeline more in flight costs Redis
// little, a call waits for a flush of its own at most maxStall. The
// flush's pipeline carries every call's native commands, charges and undos
// alike; on a cluster the client splits it by node. A flusher wakes when a
// call queues and a slot is to spare, and goes on with whatever queued
// while its previous pipeline was out, until the queue is empty: no timer,
// so a call on an idle store goes out at once, and under load the batches
// grow with the time a round trip takes. A call that finds the queue empty
// and a flush to spare sends its own pipeline from its goroutine, with the
// calls that queued while it yielded once (sendFirst), and hands its slot
// to a flusher if calls queued behind it.
type batcher struct {
	pipes *Pipes
	max   int // the flushes in flight on a near Redis
	far   int // the flushes in flight on a far one, at the most (limit)

	mu     sync.Mutex
	queue  []*batchCall
	busy   int // flush slots taken, by a call sending its own or a flusher
	closed bool
	wg     sync.WaitGroup // one per slot taken
	// started is when the newest flush in flight started, rtt the moving
	// average of a flush's round trip, both in µs of the monotonic clock.
	started, rtt int64
	// watch fires once a flush has been out too long, so that calls queued
	// behind a stalled one go out even if no other call arrives to start
	// one.
	watch *time.Timer

	// wake hands a slot to one of the flusher goroutines, which live as
	// long as the batcher: a goroutine started per flush would grow its
	// stack through go-redis every time (runtime.newstack stood out in the
	// service's profile under load).
	wake    chan struct{}
	workers sync.WaitGroup
	// answered is when (LocalMicros) a pipeline last came back, 0 before
	// the first (answeredWithin).
	answered atomic.Int64
}

// batchCall is one call waiting for its work to be done. The flusher
// fills the work's commands and replies, then closes done; the call reads
// them only after that, and not at all if its context ended first.
type batchCall struct {
	ctx  context.Context
	work *Work
	done chan struct{}
}

func newBatcher(p *Pipes, flushes int) *batcher {
	if flushes <= 0 {
		flushes = DefaultFlushes
	}
	far := flushes
	if pool := p.poolSize(); pool > 0 {
		far = max(min(farFlushes*flushes, pool/2), flushes)
	}
	b := &batcher{pipes: p, max: flushes, far: far, wake: make(chan struct{}, far)}
	b.workers.Add(far)
	for range far {
		go func() {
			defer b.workers.Done()
			for range b.wake {
				b.flusher()
			}
		}()
	}
	return b
}

// do sends wk with the next flush and waits until it is done or ctx ends,
// whichever comes first; on the latter it sets wk.Err to ctx's error (its
// commands may still run in Redis, as after a timeout). It returns false,
// having done nothing, once the batcher is closed.
func (b *batcher) do(ctx context.Context, wk *Work) bool {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return false
	}
	if len(b.queue) == 0 && b.canStart() {
		// Nothing to merge with: send at once from this goroutine, in the
		// slot of a flusher, which starts if calls queue meanwhile.
		b.busy++
		b.wg.Add(1)
		start := b.start()
		b.mu.Unlock()
		b.sendFirst(ctx, wk)
		b.mu.Lock()
		b.done(start)
		if len(b.queue) > 0 {
			b.wake <- struct{}{} // never blocks: one token per slot at most
		} else {
			b.busy--
			b.wg.Done()
		}
		b.mu.Unlock()
		return true
	}
	c := &batchCall{ctx: ctx, work: wk, done: make(chan struct{})}
	b.queue = append(b.queue, c)
	if b.canStart() {
		b.busy++
		b.wg.Add(1)
		b.wake <- struct{}{}
	}
	b.mu.Unlock()

	select {
	case <-c.done:
	case <-ctx.Done():
		wk.Err = ctx.Err()
	}
	return true
}

// sendFirst sends wk, the work of a call that found no flush in flight,
// from its own goroutine, together with whatever queued behind it while it
// yielded the processor once. Under load, callers arrive in bursts (the
// replies of one pipeline go out together, and their callers come back
// together), and the first of a burst would otherwise go alone, followed
// by a pipeline of the rest: a round trip for one decision. The yield costs
// nothing on an idle service (no other goroutine is waiting to run), and
// under load it lasts as long as the goroutines ready before this one take
// to reach their next wait, which is how those of a burst get here.
func (b *batcher) sendFirst(ctx context.Context, wk *Work) {
	runtime.Gosched()
	b.mu.Lock()
	behind := b.take()
	b.mu.Unlock()
	if behind == nil {
		b.exec(ctx, wk)
		return
	}
	own := &batchCall{ctx: ctx, work: wk, done: make(chan struct{})}
	b.flush(append([]*batchCall{own}, behind...))
	select {
	case <-own.done:
	default: // flush left it out: its context had ended
		wk.Err = ctx.Err()
	}
}

// canStart reports whether a flush may start now: none is in flight, or
// the newest has been out too long and a slot is to spare; b.mu is held.
func (b *batcher) canStart() bool {
	switch {
	case b.busy == 0:
		return true
	case b.busy >= b.limit():
		return false
	}
	return LocalMicros()-b.started > b.stall()
}

// limit is how many flushes may be in flight now; b.mu is held. On a near
// Redis, max: four round trips of a flush every stall are well under a
// millisecond. On a far one, a flush may start every maxStall, and as many
// are then out as fit in a round trip: with only max of them, a call that
// found them all out waited for the first to come back, most of a round
// trip more (at 40 ms and 16 callers, p99 was two round trips). The far
// bound keeps them within the client's pool.
func (b *batcher) limit() int {
	return min(max(b.max, int(b.rtt/maxStall)+1), b.far)
}

// stall is how long, in µs, the newest flush is out before another may
// start beside it: four round trips, within minStall and maxStall; b.mu is
// held.
func (b *batcher) stall() int64 {
	return min(max(minStall, 4*b.rtt), maxStall)
}

// start records that a flush starts, and returns when; b.mu is held.
func (b *batcher) start() int64 {
	b.started = LocalMicros()
	d := time.Duration(b.stall()+1) * time.Microsecond
	if b.watch == nil {
		b.watch = time.AfterFunc(d, b.unstall)
	} else {
		b.watch.Reset(d)
	}
	return b.started
}

// unstall starts a flush beside those in flight if calls are queued and
// canStart allows it.
func (b *batcher) unstall() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed && b.busy > 0 && len(b.queue) > 0 && b.canStart() {
		b.busy++
		b.wg.Add(1)
		b.wake <- struct{}{}
	}
}

// done records the round trip of a flush that started at start; b.mu is
// held.
func (b *batcher) done(start int64) {
	b.rtt += (LocalMicros() - start - b.rtt) / 8
}

// flusher sends what is queued until the queue is empty.
func (b *batcher) flusher() {
	defer b.wg.Done()
	for {
		b.mu.Lock()
		batch := b.take()
		if batch == nil {
			b.busy--
			b.mu.Unlock()
			return
		}
		start := b.start()
		b.mu.Unlock()
		b.flush(batch)
		b.mu.Lock()
		b.done(start)
		b.mu.Unlock()
	}
}

// take removes from the queue the calls of the next flush, at least one and
// about maxBatchRuns decisions; b.mu is held.
func (b *batcher) take() []*batchCall {
	if len(b.queue) == 0 {
		return nil
	}
	n, runs := 0, 0
	for n < len(b.queue) && (n == 0 || runs+b.queue[n].work.Decisions <= maxBatchRuns) {
		runs += b.queue[n].work.Decisions
		n++
	}
	batch := make([]*batchCall, n)
	copy(batch, b.queue)
	rest := copy(b.queue, b.queue[n:])
	clear(b.queue[rest:])
	b.queue = b.queue[:rest]
	return batch
}

// flush sends the work of batch as one pipeline and tells each call it is
// done. Calls whose context has ended are left out. The pipeline's
// context has the latest deadline of the calls (none if one has none, which
// leaves the client's socket timeouts), so that no command is given less time
// than its own call would have given it.
func (b *batcher) flush(batch []*batchCall) {
	var deadline time.Time
	bounded := true
	live := batch[:0:0]
	for _, c := range batch {
		if c.ctx.Err() != nil {
			continue // its call has returned, or is returning
		}
		live = append(live, c)
		d, ok := c.ctx.Deadline()
		switch {
		case !ok:
			bounded = false
		case d.After(deadline):
			deadline = d
		}
	}
	if len(live) == 0 {
		return
	}
	ctx := context.Background()
	if bounded {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	groups := make([]*Work, len(live))
	for i, c := range live {
		groups[i] = c.work
	}
	b.exec(ctx, groups...)
	for _, c := range live {
		close(c.done)
	}
}

// exec sends groups (Pipes.exec), and notes when Redis answered
// (answeredWithin).
func (b *batcher) exec(ctx context.Context, groups ...*Work) {
	if b.pipes.exec(ctx, groups...) {
		b.answered.Store(LocalMicros())
	}
}

// answeredWithin reports whether a pipeline of the batcher came back
// within the last d, however late for its calls: on a cluster, whether
// its master is slow rather than down (outcomeOn).
func (b *batcher) answeredWithin(d time.Duration) bool {
	at := b.answered.Load()
	return at != 0 && LocalMicros()-at <= d.Microseconds()
}

// close makes do refuse new calls, waits for the flushes in flight, and
// ends the flusher goroutines.
func (b *batcher) close() {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.closed = true
	if b.watch != nil {
		b.watch.Stop()
	}
	b.mu.Unlock()
	b.wg.Wait()
	close(b.wake)
	b.workers.Wait()
}
