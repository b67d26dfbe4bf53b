// Package redisstore is the Redis implementation of limits.Store, shared by
// every instance of the service.
//
// A hit on its own is decided with Redis's native commands, no script: a
// window (fixed_window, sliding_window) is a counter per window that INCRBY
// charges (window.go), a bucket (token_bucket, leaky_bucket) one integer
// that a BITFIELD moves in one atomic step (bucket.go), a sliding log a
// sorted set of one member per unit it counts, which ZADD charges and ZCARD
// counts (log.go). The decision itself is made here, with the Go algorithm
// of package limits, on the state Redis answered: the embedded store
// decides with the same functions, so both make identical decisions. A
// refused window or log hit is undone in a second round trip before Decide
// returns. A run of joint hits (the limits of one descriptor, whose keys
// share a hash tag) is one Lua script (lua/run.lua), so that it is charged
// all or nothing: its windows and log are Lua functions that mirror their
// Go functions operation for operation, its buckets the same BITFIELD
// operations as a lone hit's, undone if the run is refused. So a decision
// is atomic on a single Redis and on a Redis Cluster alike. On a single
// Redis, where keys need not share a slot, the commands of concurrent calls
// share one pipeline, so that Redis pays for one round trip for all of
// them.
//
// Native commands cannot read TIME: they take the instant from the store's
// estimate of the Redis server's clock (clock.go), which the TIME that a
// pipeline on a single Redis carries every 2 ms keeps within half a round
// trip; joint runs take the same instant. Instances with skewed clocks
// still agree.
//
// State is kept compactly, with a TTL no shorter than the time after which
// the state is equivalent to an absent key (rounded up to the millisecond):
//
//	fixed_window    a counter per window w = floor(now/T), under key@w,
//	                expiring at the window's end
//	sliding_window  the same, expiring at the end of the next window; a
//	                decision reads key@w and key@(w-1)
//	token_bucket    a BITFIELD of two u63: the instant in ns at which the
//	leaky_bucket    bucket is full again (the queue empty), and the latest
//	                instant a hit was decided at; expiring at the latest
//	                the first can be
//	sliding_log     a sorted set, one member per unit of cost counted,
//	                scored by its hit's instant in µs, named uniquely by the
//	                instance that added it; expiring T after the newest
//	                (a second at least)
//
// Members that have left a sliding log's window are removed when the key is
// next charged; a refund pops the newest members.
//
// A peek (cost 0) or a refused hit writes nothing (unless its limit counts
// refused hits; a refused window or log hit is counted, then undone); a
// state equivalent to an absent key is deleted, or left to expire.
//
// The store is tested on Redis 7.0 and later; PEXPIRE … NX needs 7.0,
// ZRANGE … BYSCORE REV LIMIT 6.2.
package redisstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// redisClient is the part of go-redis that the store uses, declared here so
// that a plain client and a cluster client both fit.
type redisClient interface {
	Pipeline() redis.Pipeliner
	Ping(ctx context.Context) *redis.StatusCmd
}

var (
	_ redisClient  = (*redis.Client)(nil)
	_ redisClient  = (*redis.ClusterClient)(nil)
	_ redisClient  = redis.UniversalClient(nil)
	_ limits.Store = (*Store)(nil)
)

var (
	//go:embed lua/prelude.lua
	preludeLua string
	//go:embed lua/run.lua
	runLua string
	//go:embed lua/single.lua
	singleLua string
	//go:embed lua/fixed_window.lua
	fixedWindowLua string
	//go:embed lua/sliding_window.lua
	slidingWindowLua string
	//go:embed lua/bucket.lua
	bucketLua string
	//go:embed lua/sliding_log.lua
	slidingLogLua string
	//go:embed lua/give_back.lua
	giveBackLua string
)

// script is a composed Lua source and its SHA1 for EVALSHA.
type script struct {
	src string
	sha string
}

// newScript composes the prelude, the given algorithms, decide_run and the
// tail.
func newScript(tail string, algorithms ...string) script {
	parts := append(append([]string{preludeLua}, algorithms...), runLua, tail)
	src := strings.Join(parts, "\n")
	return script{src: src, sha: redis.NewScript(src).Hash()}
}

var (
	// jointScript decides a run of joint hits, whatever their algorithms:
	// the windows and the sliding log in Lua, the buckets with their
	// native operations (bucket.lua).
	jointScript = newScript(singleLua, fixedWindowLua, slidingWindowLua, slidingLogLua, bucketLua)
	// giveBackScript takes units back from a window's counter.
	giveBackScript = script{src: giveBackLua, sha: redis.NewScript(giveBackLua).Hash()}
)

// Options tune a Store. The zero value is what production uses.
type Options struct {
	// Clock, when set, supplies the instant of every decision in
	// microseconds since the epoch, in place of Redis's clock. It exists for
	// tests, which need fixed instants to compare the store with the Go
	// algorithms. Nil means the Redis server's clock (TIME, as the store
	// measures it), as production must: instances with skewed clocks then
	// still agree.
	Clock func() int64
	// Batching chooses whether concurrent calls share pipelines (see
	// Batching); the zero value merges them, per master on a cluster.
	Batching Batching
	// Flushes bounds the merged pipelines in flight at once; zero means
	// DefaultFlushes.
	Flushes int
	// OnPipeline, if set, is told how many runs (hits on their own, and
	// joint runs) each pipeline sent to Redis carried (a metric of how well
	// calls are merged). It must be fast and safe for concurrent use.
	OnPipeline func(runs int)
}

// Store decides hits in Redis. It is safe for concurrent use by many
// goroutines, as is the client it wraps.
type Store struct {
	members    *logMembers // names of the sliding log members this store adds
	client     redisClient
	cluster    bool
	clock      func() int64  // Options.Clock
	redisClock redisClock    // Redis's clock, estimated, when clock is nil
	batch      *batcher      // nil: one pipeline per call, or per master (nodes)
	nodes      *nodeBatchers // a cluster's batchers, one per master; nil on one Redis or without batching
	onPipeline func(runs int)
	expiries   *expirySeen // the window counters seen with their TTL set
	prevs      *prevCounts // the final counts of sliding windows' previous windows
	// probing is set while a cluster's clock sample is out (probeAside),
	// probes counts those goroutines for Close.
	probing atomic.Bool
	probes  sync.WaitGroup
	// asking holds a token while a call asks Redis's TIME for want of an
	// estimate (now).
	asking chan struct{}
}

// New returns a Store on client: a *redis.Client, a *redis.ClusterClient or
// the client NewClient builds. The Store does not own the client; the caller
// closes it, after Close.
func New(client redisClient, opts Options) *Store {
	onPipeline := opts.OnPipeline
	if onPipeline == nil {
		onPipeline = func(int) {}
	}
	_, cluster := client.(*redis.ClusterClient)
	s := &Store{members: newLogMembers(), client: client, cluster: cluster, clock: opts.Clock, onPipeline: onPipeline,
		expiries: newExpirySeen(), prevs: newPrevCounts(), asking: make(chan struct{}, 1)}
	switch {
	case opts.Batching == BatchOff:
	case cluster:
		s.nodes = newNodeBatchers(s, client.(*redis.ClusterClient), opts.Flushes)
	default:
		s.batch = newBatcher(s, opts.Flushes)
	}
	return s
}

// Close waits for the merged pipelines in flight; calls after it send
// pipelines of their own. It does not close the client.
func (s *Store) Close() {
	if s.batch != nil {
		s.batch.close()
	}
	if s.nodes != nil {
		s.nodes.close()
	}
	s.probes.Wait()
}

// Ping reports whether Redis answers, for health checks. On a cluster it asks
// one node.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.client.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redisstore: ping: %w", err)
	}
	return nil
}

// Decide implements limits.Store. All hits go out in one pipeline, which a
// cluster client splits into one round trip per node; with batching, that
// pipeline also carries the hits of concurrent calls, and a call whose ctx
// ends first returns at once, its hits failed with ctx's error.
//
// A window hit on its own is decided with native commands (window.go); a
// refused one gives its cost back in a second round trip before Decide
// returns. Any other hit on its own runs its algorithm's script; a run of
// joint hits (Hit.Joint chains a hit to the next, up to the first hit
// without it) runs the joint script once, with all its keys, which decides
// every limit of the run and charges all of them or, if any refuses, only
// those that count refused hits. The scripts go with EVALSHA; those whose
// node answers NOSCRIPT (a restarted or flushed Redis) are sent again with
// EVAL, which also loads the script for the next calls.
//
// The hits of one call are decided in order: a hit on a key that an earlier
// hit of the call names goes in a later round trip, after the earlier one
// has been decided (and its cost given back), with the same instant.
//
// The keys of a joint run must share a hash tag (Redis Cluster refuses the
// script otherwise) and differ: a run that repeats a key is not sent, every
// hit of it failed with limits.ErrRepeatedKey, as the embedded store does.
//
// Each result carries its own error, so a failure of one command (its node
// down, a key of the wrong type) leaves the others decided; a failed joint
// run sets the error on every hit of the run, and so does an invalid limit in
// it, since the run cannot be decided without it. Hits beyond len(results)
// are not decided.
func (s *Store) Decide(ctx context.Context, hits []limits.Hit, results []limits.Result) {
	if len(results) < len(hits) {
		hits = hits[:len(results)]
	}
	if len(hits) == 0 {
		return
	}
	now, err := s.now(ctx)
	if err != nil {
		for i := range hits {
			results[i] = limits.Result{Err: err}
		}
		return
	}
	dl, ok := ctx.Deadline()
	s.prevs.observe(dl, ok, time.Now())
	for first := 0; first < len(hits); {
		first = s.decideRound(ctx, hits, results, first, now)
	}
}

// decideRound decides the runs of hits from first on, up to the first run
// that names a key an earlier one of the round names, and returns where it
// stopped.
func (s *Store) decideRound(ctx context.Context, hits []limits.Hit, results []limits.Result, first int, now int64) int {
	wk := &work{}
	var windows []*windowHit
	var buckets []*bucketHit
	var logs []*logHit
	end := first
	for end < len(hits) {
		last := end
		for last < len(hits)-1 && hits[last].Joint {
			last++
		}
		if end > first && repeats(hits[first:end], hits[end:last+1]) {
			break
		}
		r := run{first: end, last: last}
		end = last + 1
		if err := r.validate(hits); err != nil {
			for i := r.first; i <= r.last; i++ {
				results[i] = limits.Result{Err: err}
			}
			continue
		}
		if r.first == r.last {
			h := &hits[r.first]
			switch h.Limit.Algorithm {
			case limits.FixedWindow, limits.SlidingWindow:
				windows = append(windows, newWindowHit(ctx, r.first, h, now, s.expiries, s.prevs, wk))
			case limits.TokenBucket, limits.LeakyBucket:
				buckets = append(buckets, newBucketHit(ctx, r.first, h, now, wk))
			default:
				logs = append(logs, newLogHit(ctx, r.first, h, now, s.members, wk))
			}
			continue
		}
		// A joint run decides at the instant its windows' keys were
		// chosen for.
		r.prepare(hits, strconv.FormatInt(now, 10), s.members)
		wk.runs = append(wk.runs, r)
	}
	wk.decisions = len(windows) + len(buckets) + len(logs) + len(wk.runs)
	if wk.decisions == 0 {
		return end
	}
	s.send(ctx, wk)
	if wk.err != nil {
		s.expiries.forget()
		// The call stopped waiting: its commands may still be running, and
		// their replies are not for it to read.
		for k := range wk.runs {
			wk.runs[k].fail(hits, results, wk.err)
		}
		fail := func(i int, l limits.Limit) { results[i] = limits.Result{Err: storeError(l.Algorithm.String(), wk.err)} }
		for _, h := range windows {
			fail(h.i, h.limit)
		}
		for _, h := range buckets {
			fail(h.i, h.limit)
		}
		for _, h := range logs {
			fail(h.i, h.limit)
		}
		return end
	}
	for k := range wk.runs {
		wk.runs[k].results(hits, results, now)
	}
	s.decideBuckets(ctx, hits, results, buckets)
	// back gives refused window hits their cost back and takes refused log
	// hits' members out, then reads what their answers need.
	back := &work{}
	for _, wh := range windows {
		res, giveBack, err := wh.decide()
		if err != nil {
			s.expiries.forget()
			results[wh.i] = limits.Result{Err: storeError(wh.limit.Algorithm.String(), err)}
			continue
		}
		wh.checkExpiry(ctx, s.expiries, back)
		results[wh.i] = res
		if giveBack {
			back.script(&giveBackScript, []string{wh.cur}, wh.cost, noCap)
		}
	}
	var later []func()
	for _, lh := range logs {
		res, after, err := lh.decide(ctx, back)
		switch {
		case err != nil:
			results[lh.i] = limits.Result{Err: storeError(lh.limit.Algorithm.String(), err)}
		case after == nil:
			results[lh.i] = res
		default:
			later = append(later, func() {
				res, err := after()
				if err != nil {
					res = limits.Result{Err: storeError(lh.limit.Algorithm.String(), err)}
				}
				results[lh.i] = res
			})
		}
	}
	if len(back.scripts) == 0 && len(back.cmds) == 0 {
		return end
	}
	if ctx.Err() != nil {
		// The caller is gone: undo all the same, without waiting for it. A
		// give-back that fails (Redis gone) leaves the cost counted until
		// the window ends: stricter, never looser.
		go s.send(context.WithoutCancel(ctx), back)
		for _, lh := range logs {
			if lh.newest != nil && lh.own != nil {
				results[lh.i] = limits.Result{Err: storeError(lh.limit.Algorithm.String(), ctx.Err())}
			}
		}
		return end
	}
	s.send(ctx, back)
	if back.err != nil {
		for _, lh := range logs {
			if lh.newest != nil && lh.own != nil {
				results[lh.i] = limits.Result{Err: storeError(lh.limit.Algorithm.String(), back.err)}
			}
		}
		return end
	}
	for _, f := range later {
		f()
	}
	return end
}

// decideBuckets decides the bucket hits of a round from their replies, and
// sends again those that must go again at the later instant their key has
// seen (bucketHit.decide), at most twice, until Redis and the algorithm
// agree.
func (s *Store) decideBuckets(ctx context.Context, hits []limits.Hit, results []limits.Result, buckets []*bucketHit) {
	for attempt := 0; len(buckets) > 0; attempt++ {
		var again []*bucketHit
		wk := &work{}
		for _, bh := range buckets {
			res, later, err := bh.decide()
			switch {
			case err != nil:
				res = limits.Result{Err: storeError(bh.limit.Algorithm.String(), err)}
			case later > 0 && attempt < 2:
				again = append(again, newBucketHit(ctx, bh.i, &hits[bh.i], later, wk))
				continue
			case later > 0:
				res = limits.Result{Err: storeError(bh.limit.Algorithm.String(), fmt.Errorf("%w: a hit at the key's latest instant, refused again", errDisagree))}
			}
			results[bh.i] = res
		}
		if len(again) == 0 || ctx.Err() != nil {
			for _, bh := range again {
				results[bh.i] = limits.Result{Err: storeError(bh.limit.Algorithm.String(), context.Cause(ctx))}
			}
			return
		}
		wk.decisions = len(again)
		s.send(ctx, wk)
		if wk.err != nil {
			for _, bh := range again {
				results[bh.i] = limits.Result{Err: storeError(bh.limit.Algorithm.String(), wk.err)}
			}
			return
		}
		buckets = again
	}
}

// repeats reports whether a hit of run names a key that a hit of before
// names, where either of the two is a hit on its own, decided with native
// commands: those run before the scripts of the pipeline, and a refused
// one is undone only after it, so that a later hit on its key would see
// it. Joint runs are decided in order, one script after the other, so two
// of them on one key need no second round. Calls are a few hits long:
// comparing each pair costs less than a map.
func repeats(before, run []limits.Hit) bool {
	native := func(hits []limits.Hit, i int) bool {
		return !hits[i].Joint && (i == 0 || !hits[i-1].Joint)
	}
	for i := range run {
		for j := range before {
			if before[j].Key == run[i].Key && (native(run, i) || native(before, j)) {
				return true
			}
		}
	}
	return false
}

// now is the instant of a call: Options.Clock's, or Redis's clock as
// estimated from the TIME of earlier pipelines. Without an estimate, or
// with one grown too uncertain (a long idle time), it asks Redis first.
func (s *Store) now(ctx context.Context) (int64, error) {
	if s.clock != nil {
		return s.clock(), nil
	}
	if now, u, ok := s.redisClock.now(); ok && u <= maxClockUncertainty {
		return now, nil
	}
	// One call at a time asks: those that arrive meanwhile take its sample,
	// which is as good as one of their own, rather than each sending a TIME
	// (on a cluster, each to a master, however slow).
	asked := localMicros()
	select {
	case s.asking <- struct{}{}:
	case <-ctx.Done():
		return 0, storeError("clock", ctx.Err())
	}
	defer func() { <-s.asking }()
	if s.redisClock.sampledSince(asked) {
		now, _, _ := s.redisClock.now()
		return now, nil
	}
	if err := s.askClock(ctx); err != nil {
		return 0, storeError("clock", err)
	}
	now, _, _ := s.redisClock.now()
	return now, nil
}

// maxClockUncertainty is how far the estimate of Redis's clock may be off
// before a call asks for TIME instead of using it: reached only after more
// than a minute without a pipeline (maxDrift).
const maxClockUncertainty = int64(10 * time.Millisecond / time.Microsecond)

// storeError wraps err, what a command or script for what answered, as the
// store reports it: unavailable for a store that is down.
func storeError(what string, err error) error {
	var re redis.Error
	switch {
	case errors.Is(err, errMalformed), errors.Is(err, errReply), errors.Is(err, errDisagree):
		return fmt.Errorf("redisstore: %s: %w", what, err)
	case errors.As(err, &re) && strings.Contains(err.Error(), "not an integer"):
		return fmt.Errorf("redisstore: %s: %w: %w", what, errMalformed, err)
	case unavailable(err):
		return fmt.Errorf("redisstore: %s: %w: %w", what, limits.ErrUnavailable, err)
	}
	return fmt.Errorf("redisstore: %s: %w", what, err)
}

// send runs wk, merged with the work of concurrent calls if batching is
// on.
func (s *Store) send(ctx context.Context, wk *work) {
	switch {
	case ctx.Err() != nil:
	case s.batch != nil && s.batch.do(ctx, wk):
		return
	case s.nodes != nil && s.nodes.do(ctx, wk):
		return
	}
	s.exec(ctx, wk)
}

// reply is what Redis answered to one run: a value, or an error.
type reply struct {
	val any
	err error
}

func replyOf(cmd *redis.Cmd) reply { return reply{cmd.Val(), cmd.Err()} }

// argsPerHit is the number of ARGV fields of each hit in a run's own script,
// after now (see lua/run.lua).
const argsPerHit = 8

// run is one script call: hits[first..last], a single hit or a joint run.
type run struct {
	first, last int
	hits        []runHit // of hits[first..last]
	now         string   // the store's clock, or "" for Redis's TIME
	script      *script
	keys        []string
	reply       reply
}

// runHit is what a script needs of one hit, copied from the caller's hits: a
// flusher may still read it after a call whose context ended has returned,
// and its caller has reused its hits.
type runHit struct {
	lim      limits.Limit
	limit    scriptLimit
	cost     int64
	maxDelay int64  // microseconds, 0: no bound
	op       string // a bucket's native operation (luaOp), "" for the others
}

// scriptLimit is what the joint script needs of a limit.
type scriptLimit struct {
	algorithm    limits.Algorithm
	n, t, b      int64 // N, T in microseconds, limits.Limit.Capacity
	countRefused bool
}

// validate checks the run's limits and keys before anything is sent.
func (r *run) validate(hits []limits.Hit) error {
	joint := r.last > r.first
	if k := limits.RepeatedKey(hits[r.first : r.last+1]); k >= 0 {
		return fmt.Errorf("redisstore: joint run of %d hits: hit %d (%s): %w", r.last-r.first+1, k, hits[r.first+k].Key, limits.ErrRepeatedKey)
	}
	for i := r.first; i <= r.last; i++ {
		l := hits[i].Limit
		err := l.Validate()
		if err == nil && !l.Algorithm.Implemented() {
			err = fmt.Errorf("%w: %s", errNoScript, l.Algorithm)
		}
		switch {
		case err != nil && joint:
			return fmt.Errorf("redisstore: joint run of %d hits: hit %d (%s): %w", r.last-r.first+1, i-r.first, hits[i].Key, err)
		case err != nil:
			return fmt.Errorf("redisstore: %w", err)
		}
	}
	return nil
}

// prepare copies what the joint script needs of the run's hits, decided at
// now, sliding log members named after members.
func (r *run) prepare(hits []limits.Hit, now string, members *logMembers) {
	r.script = &jointScript
	n := r.last - r.first + 1
	r.now = now
	r.keys = make([]string, n)
	r.hits = make([]runHit, n)
	us, _ := strconv.ParseInt(now, 10, 64)
	for i, h := range hits[r.first : r.last+1] {
		l := h.Limit
		r.keys[i] = h.Key
		r.hits[i] = runHit{
			lim:      l,
			limit:    scriptLimit{l.Algorithm, l.Requests, l.PeriodMicros(), l.Capacity(), l.CountRefused},
			cost:     h.Cost,
			maxDelay: h.MaxDelayMicros(),
		}
		switch {
		case isBucket(l.Algorithm):
			r.hits[i].op = luaOp(l, h.Cost, us, r.hits[i].maxDelay)
		case l.Algorithm == limits.SlidingLog:
			r.hits[i].op = members.prefix + strconv.FormatUint(members.next.Add(1), 36) + "."
		}
	}
}

// isBucket reports whether a is a token or leaky bucket.
func isBucket(a limits.Algorithm) bool {
	return a == limits.TokenBucket || a == limits.LeakyBucket
}

// args returns the ARGV of the joint script: now, then argsPerHit fields
// per hit (lua/run.lua's argv_hit).
func (r *run) args() []any {
	args := make([]any, 0, 1+argsPerHit*len(r.hits))
	args = append(args, r.now)
	for _, h := range r.hits {
		args = append(args, h.limit.algorithm.ShortName(), h.limit.n, h.limit.t, h.limit.b,
			h.cost, h.maxDelay, h.limit.countRefusedArg(), h.op)
	}
	return args
}

// countRefusedArg is count_refused as the scripts read it.
func (l scriptLimit) countRefusedArg() int {
	if l.countRefused {
		return 1
	}
	return 0
}

// errNoScript is returned for an algorithm that package limits implements
// but this store does not (yet).
var errNoScript = errors.New("no Redis script for algorithm")

// errReply is returned for a script reply that is not replyPerHit integers
// per hit;
// it means the script in Redis is not the one this build sent.
var errReply = errors.New("unexpected script reply")

// results reads the script's reply into results[first..last].
//
// A reply that arrived wins over the command's error: go-redis sets an error
// that strikes the whole pipeline (a deadline that expires while its cluster
// client retries the commands of a node that is down, a connection lost
// halfway through the replies) on every command without one, including those
// already answered. Those scripts ran and charged; their answers are the
// truth, and reporting them as failures would apply the failure mode to hits
// that were decided.
func (r *run) results(hits []limits.Hit, results []limits.Result, now int64) {
	out := results[r.first : r.last+1]
	ok, err := r.parseReply(r.reply.val, out, now)
	if ok {
		return
	}
	if err != nil {
		r.fail(hits, results, err)
		return
	}
	err = r.reply.err
	if err == nil {
		err = fmt.Errorf("%w: %v", errReply, r.reply.val)
	}
	r.fail(hits, results, err)
}

// fail sets err, as the run's failure, on every hit of the run.
func (r *run) fail(hits []limits.Hit, results []limits.Result, err error) {
	what := hits[r.first].Limit.Algorithm.String()
	if r.last > r.first {
		what = fmt.Sprintf("joint run of %d hits", r.last-r.first+1)
	}
	err = storeError(what, err)
	for i := r.first; i <= r.last; i++ {
		results[i] = limits.Result{Err: err}
	}
}

// unavailable tells a store that is down or unreachable (no connection, a
// timeout, a cluster without a master for the slot) from a reply error of a
// store that answered (a key of the wrong type).
func unavailable(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return true
	}
	for _, p := range []string{"CLUSTERDOWN", "LOADING", "MASTERDOWN", "TRYAGAIN", "BUSY", "NOAUTH", "WRONGPASS"} {
		if redis.HasErrorPrefix(err, p) {
			return true
		}
	}
	return false
}

// replyPerHit is the number of integers a script answers per hit (see
// lua/run.lua).
const replyPerHit = 5

// parseReply reads {allowed, remaining, retry_us, reset_us, delay_us} per hit
// into out, and reports whether the reply had that shape; out is untouched if
// not. A bucket's hit answers {allowed, the state as it found it, 0, 0, 0}
// instead, which it decides here with the Go algorithm at now, as a lone
// bucket hit is (bucket.go): an error if the script's verdict differs.
func (r *run) parseReply(v any, out []limits.Result, now int64) (bool, error) {
	vals, ok := v.([]any)
	if !ok || len(vals) != replyPerHit*len(out) {
		return false, nil
	}
	for i, v := range vals {
		if _, ok := v.(int64); !ok && !(i%replyPerHit == 1 && isBucket(r.hits[i/replyPerHit].limit.algorithm)) {
			return false, nil
		}
	}
	for i := range out {
		n := vals[replyPerHit*i:]
		h := &r.hits[i]
		if isBucket(h.limit.algorithm) {
			raw, _ := n[1].(string)
			var state limits.State
			if raw != "" {
				// Decided at the run's instant, as the script did.
				tat, _, ok := decodeBucket([]byte(raw))
				if !ok {
					return false, fmt.Errorf("%w under key %s", errMalformed, r.keys[i])
				}
				state = limits.State{Live: true, TAT: tat}
			}
			d := limits.DecideWithin(h.lim, state, h.cost, now, h.maxDelay)
			if d.Result.Allowed != (n[0].(int64) == 1) {
				return false, fmt.Errorf("%w: %s, cost %d in a joint run: the script allowed %v", errDisagree, h.lim, h.cost, !d.Result.Allowed)
			}
			out[i] = d.Result
			continue
		}
		out[i] = limits.Result{
			Allowed:    n[0].(int64) == 1,
			Remaining:  n[1].(int64),
			RetryAfter: time.Duration(n[2].(int64)) * time.Microsecond,
			ResetAfter: time.Duration(n[3].(int64)) * time.Microsecond,
			Delay:      time.Duration(n[4].(int64)) * time.Microsecond,
		}
	}
	return true, nil
}
