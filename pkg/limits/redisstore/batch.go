package redisstore

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Batching chooses whether concurrent Decide calls share pipelines.
type Batching int

const (
	// BatchAuto, the zero value, merges the calls on a single Redis and not
	// on a cluster: there one flush waits on its slowest node, so with a
	// master down the calls for the live masters would wait behind those for
	// the dead one, where each now fails on its own.
	BatchAuto Batching = iota
	// BatchOn merges the calls, on a cluster too (a cluster client splits a
	// merged pipeline by node, as it splits the pipeline of one call).
	BatchOn
	// BatchOff sends one pipeline per call.
	BatchOff
)

// DefaultFlushes is the number of merged pipelines in flight at once when
// Options.Flushes is zero.
const DefaultFlushes = 4

// maxBatchRuns bounds the script calls of one merged pipeline; what is left
// goes with the next flush.
const maxBatchRuns = 512

// A batcher merges the script calls of concurrent Decide calls into shared
// pipelines: a call queues its runs, and a flusher sends everything queued as
// one pipeline (one write, one read), up to max flushes in flight. A flusher
// starts when a call queues and one is to spare, and goes on with whatever
// queued while its previous pipeline was out, until the queue is empty: no
// timer, so a call on an idle store goes out at once, and under load the
// batches grow with the time a round trip takes. A call that finds the queue
// empty and a flush to spare sends its own pipeline from its goroutine, as
// without batching, and hands its slot to a flusher if calls queued behind
// it.
type batcher struct {
	client redisClient
	max    int

	mu     sync.Mutex
	queue  []*batchCall
	busy   int // flushers running
	closed bool
	wg     sync.WaitGroup
}

// batchCall is one Decide call waiting for its replies. The flusher only
// reads runs; it sets cmds, one per run, then closes done, and the call reads
// cmds only after that, and not at all if its context ended first.
type batchCall struct {
	ctx  context.Context
	runs []run
	cmds []*redis.Cmd
	done chan struct{}
}

func newBatcher(client redisClient, max int) *batcher {
	if max <= 0 {
		max = DefaultFlushes
	}
	return &batcher{client: client, max: max}
}

// do sends runs with the next flush and waits for their replies (a command
// per run) or the end of ctx, whichever comes first; on the latter every
// command has ctx's error (its scripts may still run in Redis, as after a
// timeout). It returns nil, having done nothing, once the batcher is closed.
func (b *batcher) do(ctx context.Context, runs []run) []*redis.Cmd {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	if len(b.queue) == 0 && b.busy < b.max {
		// Nothing to merge with: send at once from this goroutine, in the
		// slot of a flusher, which starts if calls queue meanwhile.
		b.busy++
		b.wg.Add(1)
		b.mu.Unlock()
		cmds := b.send(ctx, runs)
		b.mu.Lock()
		if len(b.queue) > 0 {
			go b.flusher()
		} else {
			b.busy--
			b.wg.Done()
		}
		b.mu.Unlock()
		return cmds
	}
	c := &batchCall{ctx: ctx, runs: runs, done: make(chan struct{})}
	b.queue = append(b.queue, c)
	if b.busy < b.max {
		b.busy++
		b.wg.Add(1)
		go b.flusher()
	}
	b.mu.Unlock()

	select {
	case <-c.done:
		return c.cmds
	case <-ctx.Done():
		cmds := make([]*redis.Cmd, len(runs))
		for k := range cmds {
			cmds[k] = redis.NewCmd(ctx)
			cmds[k].SetErr(ctx.Err())
		}
		return cmds
	}
}

// send sends runs as one pipeline on ctx.
func (b *batcher) send(ctx context.Context, runs []run) []*redis.Cmd {
	pipe := b.client.Pipeline()
	cmds := make([]*redis.Cmd, len(runs))
	for k := range runs {
		r := &runs[k]
		cmds[k] = pipe.EvalSha(ctx, r.script.sha, r.keys, r.args...)
	}
	// Exec's error is also set on each command it concerns.
	_, _ = pipe.Exec(ctx)
	return cmds
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
		b.mu.Unlock()
		b.flush(batch)
	}
}

// take removes from the queue the calls of the next flush, at least one and
// about maxBatchRuns runs; b.mu is held.
func (b *batcher) take() []*batchCall {
	if len(b.queue) == 0 {
		return nil
	}
	n, runs := 0, 0
	for n < len(b.queue) && (n == 0 || runs+len(b.queue[n].runs) <= maxBatchRuns) {
		runs += len(b.queue[n].runs)
		n++
	}
	batch := make([]*batchCall, n)
	copy(batch, b.queue)
	rest := copy(b.queue, b.queue[n:])
	clear(b.queue[rest:])
	b.queue = b.queue[:rest]
	return batch
}

// flush sends the runs of batch as one pipeline and hands each call its
// replies. Calls whose context has ended are left out. The pipeline's
// context has the latest deadline of the calls (none if one has none, which
// leaves the client's socket timeouts), so that no script is given less time
// than its own call would have given it.
func (b *batcher) flush(batch []*batchCall) {
	var deadline time.Time
	bounded := true
	live := batch[:0:0]
	for _, c := range batch {
		if c.ctx.Err() != nil {
			continue // its Decide has returned, or is returning
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
	pipe := b.client.Pipeline()
	cmds := make([][]*redis.Cmd, len(live))
	for i, c := range live {
		cmds[i] = make([]*redis.Cmd, len(c.runs))
		for k := range c.runs {
			r := &c.runs[k]
			cmds[i][k] = pipe.EvalSha(ctx, r.script.sha, r.keys, r.args...)
		}
	}
	// Exec's error is also set on each command it concerns.
	_, _ = pipe.Exec(ctx)
	for i, c := range live {
		c.cmds = cmds[i]
		close(c.done)
	}
}

// close makes do refuse new calls and waits for the flushers to finish.
func (b *batcher) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.wg.Wait()
}
