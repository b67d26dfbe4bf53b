package redisstore

import (
	"context"
	"fmt"
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

// A batcher merges the script calls of concurrent Decide calls: a call
// queues its runs, and a flusher sends everything queued at once (one write,
// one read), up to max flushes in flight. On a single Redis that is one call
// of the batch script, so that Redis also runs one script, not one per run;
// on a cluster, where the keys of one script must share a slot, it is a
// pipeline of the runs' own scripts, which the client splits by node. A
// flusher wakes when a call queues and a slot is to spare, and goes on with
// whatever queued while its previous pipeline was out, until the queue is
// empty: no timer, so a call on an idle store goes out at once, and under
// load the batches grow with the time a round trip takes. A call that finds the queue
// empty and a flush to spare sends its own pipeline from its goroutine, as
// without batching, and hands its slot to a flusher if calls queued behind
// it.
type batcher struct {
	client     redisClient
	max        int
	cluster    bool
	onPipeline func(runs int)

	mu     sync.Mutex
	queue  []*batchCall
	busy   int // flush slots taken, by a call sending its own or a flusher
	closed bool
	wg     sync.WaitGroup // one per slot taken

	// wake hands a slot to one of the flusher goroutines, which live as
	// long as the batcher: a goroutine started per flush would grow its
	// stack through go-redis every time (runtime.newstack stood out in the
	// service's profile under load).
	wake    chan struct{}
	workers sync.WaitGroup
}

// batchCall is one Decide call waiting for its replies. The flusher only
// reads runs; it sets replies, one per run, then closes done, and the call
// reads replies only after that, and not at all if its context ended first.
type batchCall struct {
	ctx     context.Context
	runs    []run
	replies []reply
	done    chan struct{}
}

func newBatcher(client redisClient, max int, cluster bool, onPipeline func(int)) *batcher {
	if max <= 0 {
		max = DefaultFlushes
	}
	b := &batcher{client: client, max: max, cluster: cluster, onPipeline: onPipeline, wake: make(chan struct{}, max)}
	b.workers.Add(max)
	for range max {
		go func() {
			defer b.workers.Done()
			for range b.wake {
				b.flusher()
			}
		}()
	}
	return b
}

// do sends runs with the next flush and waits for their replies (one per
// run) or the end of ctx, whichever comes first; on the latter every reply
// has ctx's error (its scripts may still run in Redis, as after a timeout).
// It returns nil, having done nothing, once the batcher is closed.
func (b *batcher) do(ctx context.Context, runs []run) []reply {
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
		replies := b.exec(ctx, runs)[0]
		b.mu.Lock()
		if len(b.queue) > 0 {
			b.wake <- struct{}{} // never blocks: one token per slot at most
		} else {
			b.busy--
			b.wg.Done()
		}
		b.mu.Unlock()
		return replies
	}
	c := &batchCall{ctx: ctx, runs: runs, done: make(chan struct{})}
	b.queue = append(b.queue, c)
	if b.busy < b.max {
		b.busy++
		b.wg.Add(1)
		b.wake <- struct{}{}
	}
	b.mu.Unlock()

	select {
	case <-c.done:
		return c.replies
	case <-ctx.Done():
		replies := make([]reply, len(runs))
		for k := range replies {
			replies[k].err = ctx.Err()
		}
		return replies
	}
}

// exec decides the runs of every group on ctx and returns their replies,
// group by group. On a single Redis, a lone run goes with its own script and
// more go with the batch script, as EVALSHA, and again as EVAL if Redis does
// not have it. On a cluster each run goes with its own script, in one
// pipeline; a NOSCRIPT reply is left to the caller.
func (b *batcher) exec(ctx context.Context, groups ...[]run) [][]reply {
	n := 0
	for _, g := range groups {
		n += len(g)
	}
	b.onPipeline(n)
	flat := make([]reply, n)
	out := make([][]reply, len(groups))
	for i, at := 0, 0; i < len(groups); i++ {
		out[i] = flat[at : at+len(groups[i]) : at+len(groups[i])]
		at += len(groups[i])
	}
	if b.cluster {
		for i, cmd := range evalEach(ctx, b.client, groups...) {
			flat[i] = replyOf(cmd)
		}
		return out
	}
	if n == 1 {
		// One call of one run (every call has a run at least).
		r := &groups[0][0]
		flat[0] = b.call(ctx, r.script, r.keys, r.args())
		return out
	}
	keys, args := batchArgs(groups)
	rep := b.call(ctx, &batchScript, keys, args)
	vals, ok := rep.val.([]any)
	switch {
	case rep.err == nil && (!ok || len(vals) != n):
		rep.err = fmt.Errorf("%w: %d runs, %v", errReply, n, rep.val)
		fallthrough
	case rep.err != nil:
		for i := range flat {
			flat[i].err = rep.err
		}
	default:
		for i, v := range vals {
			if err, ok := v.(error); ok {
				flat[i].err = err
			} else {
				flat[i].val = v
			}
		}
	}
	return out
}

// batchArgs lays out the runs of groups as lua/batch.lua reads them: KEYS,
// the keys of every run in order; ARGV, the number of distinct limits, five
// fields per limit (algorithm, N, T in microseconds, B, count_refused), then
// for each run its now ("": Redis's TIME), its number of hits and three
// fields per hit (its limit's index from 1, cost, the longest delay in
// microseconds). A limit's fields go once per flush rather than once per
// hit: in a flush of many hits on few limits, Redis parses five arguments
// fewer per decision, and the client boxes none of them.
func batchArgs(groups [][]run) ([]string, []any) {
	nkeys, nruns := 0, 0
	for _, g := range groups {
		nruns += len(g)
		for k := range g {
			nkeys += len(g[k].hits)
		}
	}
	keys := make([]string, 0, nkeys)
	index := make(map[scriptLimit]int, 4)
	var distinct []scriptLimit
	runArgs := make([]any, 0, 2*nruns+3*nkeys)
	for _, g := range groups {
		for k := range g {
			r := &g[k]
			keys = append(keys, r.keys...)
			runArgs = append(runArgs, r.now, len(r.hits))
			for _, h := range r.hits {
				i, ok := index[h.limit]
				if !ok {
					distinct = append(distinct, h.limit)
					i = len(distinct)
					index[h.limit] = i
				}
				runArgs = append(runArgs, i, h.cost, h.maxDelay)
			}
		}
	}
	args := make([]any, 0, 1+5*len(distinct)+len(runArgs))
	args = append(args, len(distinct))
	for _, l := range distinct {
		args = append(args, l.algorithm.ShortName(), l.n, l.t, l.b, l.countRefusedArg())
	}
	return keys, append(args, runArgs...)
}

// call runs sc on keys and args with EVALSHA, and with EVAL if Redis
// answers NOSCRIPT (a restarted or flushed Redis), which loads it again.
func (b *batcher) call(ctx context.Context, sc *script, keys []string, args []any) reply {
	pipe := b.client.Pipeline()
	cmd := pipe.EvalSha(ctx, sc.sha, keys, args...)
	// Exec's error is also the command's.
	_, _ = pipe.Exec(ctx)
	if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
		pipe = b.client.Pipeline()
		cmd = pipe.Eval(ctx, sc.src, keys, args...)
		_, _ = pipe.Exec(ctx)
	}
	return replyOf(cmd)
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

// flush sends the runs of batch as one script call and hands each call its
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
	groups := make([][]run, len(live))
	for i, c := range live {
		groups[i] = c.runs
	}
	replies := b.exec(ctx, groups...)
	for i, c := range live {
		c.replies = replies[i]
		close(c.done)
	}
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
	b.mu.Unlock()
	b.wg.Wait()
	close(b.wake)
	b.workers.Wait()
}
