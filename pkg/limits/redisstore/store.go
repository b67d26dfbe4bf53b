// Package redisstore is the Redis implementation of limits.Store, shared by
// every instance of the service.
//
// Every hit, on its own or in a joint run, of every algorithm, a refund
// too, is decided the same way: its native commands (BITFIELD, ZADD, GET)
// charge it in the call's pipeline, the service decides it in Go, with the
// algorithm of package limits, on the state Redis answered (so the
// embedded store, which decides with the same functions, makes identical
// decisions), and a hit whose run is refused has its charge undone, again
// with native commands, in a second round trip that Decide never waits
// for (sendBack): every answer is read from the first. A
// window (fixed_window, sliding_window) is a counter per window that a
// saturating BITFIELD INCRBY moves (window.go), a bucket (token_bucket,
// leaky_bucket) one integer that a BITFIELD moves in one atomic step, only
// if the hit fits (bucket.go), a sliding log a sorted set of one member per
// unit it counts (log.go). A run of joint hits (the limits of one
// descriptor, whose keys share a hash tag) is charged together, every hit
// in the same pipeline, and undone together: if any of its hits is
// refused, every charge of the run is undone, except those of limits that
// count refused hits, which keep what their decision charged.
//
// What holds, for every algorithm (docs/semantics.md says it for every
// store):
//
//   - No overshoot, under any concurrency and number of instances. Every
//     charge is one atomic command that answers the state it changed, and
//     the hit is decided on that state less its own charge: every allowed
//     hit saw a count that includes every charge that reached Redis before
//     it, undone later or not. A bucket's charge is conditional (it adds
//     only if the hit fits), so a refused bucket hit charges nothing.
//   - A charge that is undone was counted meanwhile: a concurrent request
//     can then be refused where it would have fitted, never allowed where
//     it would not. An undo never takes a count below zero (OVERFLOW SAT),
//     and never gives a bucket back time that a concurrent hit may have
//     clamped (bucket.go). An undo that fails (Redis gone, or the caller
//     gone and Redis slow) leaves the charge counted until the key
//     expires (counted in BackFailed, and logged); so does the charge of
//     a hit whose reply could not be read. Decide returns without waiting
//     for its undos: a charge is counted up to a round trip after it
//     returns.
//   - A refund (negative cost) is applied at once when its run cannot be
//     refused (alone, or with other refunds); in a run that can be, it
//     only reads in the first round trip and is applied after it, if the
//     run is allowed: a refund is never undone, since one taken back would
//     have let a concurrent hit in. A refund never takes a counter below
//     zero: one that comes in the next window, or gives back more than the
//     count, is no credit.
//   - count_refused limits keep their charge, refused or not, also in a
//     refused run: a window's count stops at 2N, a log keeps members up to
//     2N, a bucket's debt stops at one period's worth.
//   - A peek, and a hit that can never fit, read and write nothing; a
//     hit of a block rule (requests_per_unit 0) sends no command at all.
//
// Native commands cannot read TIME: they take the instant from the store's
// estimate of the Redis server's clock (clock.go), which the TIME that a
// pipeline on a single Redis carries every 2 ms keeps within half a round
// trip. Instances with skewed clocks still agree. A store asks for its
// first TIME, and opens the connections of its flushes, as it is made
// (warmUp), so that a call made soon after finds them; a call that finds
// no estimate all the same is decided at a provisional instant, this
// host's wall clock, its TIME riding ahead of its charges (on a cluster,
// sent to the clock's master beside them): its decisions
// stand if that TIME shows Redis's clock could have read that instant when
// the call started (within the estimate's uncertainty there), and are
// undone and made again at the estimate otherwise (Store.now).
//
// State is kept compactly, with a TTL no shorter than the time after which
// the state is equivalent to an absent key (rounded up to the millisecond):
//
//	fixed_window    a BITFIELD u63 counter per window w = floor(now/T),
//	                under key#w, expiring at the window's end
//	sliding_window  the same, expiring at the end of the next window; a
//	                decision reads key#w and key#(w-1)
//	token_bucket    a BITFIELD of two u63: the instant in ns at which the
//	leaky_bucket    bucket is full again (the queue empty), and the latest
//	                instant a hit was decided at; expiring at the latest
//	                the first can be
//	sliding_log     a sorted set, one member per unit of cost counted,
//	                scored by its hit's instant in µs, named uniquely by the
//	                instance that added it; expiring T after the newest
//	                (a second at least)
//	a lockout's     its lock's end in µs under key!lock, beside the
//	lock            algorithm's keys, expiring a second after it
//	                (lockout.go)
//
// Members that have left a sliding log's window are removed when the key is
// next charged; a refund pops the newest members. A counter at zero is left
// to expire.
//
// Every reply of every command a hit sends is read, its writes too
// (writes.go): a write Redis refuses fails the hit, never passes for a
// hit on an empty key. What no call can report (a user without a command
// the limits need, an eviction policy that drops their keys, a memory
// full, data lost) is inspected at each health check, off the decision's
// path (inspect.go).
//
// The store is tested on Redis 7.0 and later; PEXPIRE … NX needs 7.0,
// ZRANGE … BYSCORE REV LIMIT 6.2.
package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/breaker"
)

// redisClient is the part of go-redis that the store uses, declared here so
// that a plain client and a cluster client both fit.
type redisClient interface {
	Pipeline() redis.Pipeliner
	Ping(ctx context.Context) *redis.StatusCmd
	Subscribe(ctx context.Context, channels ...string) *redis.PubSub
}

var (
	_ redisClient       = (*redis.Client)(nil)
	_ redisClient       = (*redis.ClusterClient)(nil)
	_ redisClient       = redis.UniversalClient(nil)
	_ limits.Store      = (*Store)(nil)
	_ limits.Resetter   = (*Store)(nil)
	_ breaker.Answering = (*Store)(nil)
)

// Options tune a Store. The zero value is what production uses.
type Options struct {
	// Clock, when set, supplies the instant of every decision in
	// microseconds since the epoch, in place of Redis's clock. It exists for
	// tests, which need fixed instants to compare the store with the Go
	// algorithms. Nil means the Redis server's clock (TIME, as the store
	// measures it), as production must: instances with skewed clocks then
	// still agree. With a Clock, Decide also waits for the undos of its
	// refused runs (sendBack), so that a test's next call finds them done,
	// as it would on the embedded store.
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
	// OnGate, if set, is told when the gate of a cluster's master shuts
	// (shut true: calls for its keys fail fast) and when it opens again
	// (failfast.go), each change once and in order. It is called outside
	// the store's locks but on a caller's goroutine: it must be fast.
	OnGate func(addr string, shut bool)
	// Tracer, when set, traces every pipeline sent for a call whose
	// context holds a sampled span (trace.go): one span per pipeline,
	// however many calls it serves. Nil, the default, traces nothing.
	Tracer trace.Tracer
	// ResetChannel, when set, is the pub/sub channel on which Reset
	// announces the keys it cleared, and HearResets hears those that the
	// other stores on the same Redis cleared (reset.go). Stores that share
	// counters must share it.
	ResetChannel string
	// KeyPrefix is the prefix of every key (-redis-key-prefix): the
	// inspections' probe and marker keys are under it too (inspect.go).
	// Empty, the inspections write nothing: no permissions probe, no
	// marker of lost data.
	KeyPrefix string
	// RLQS tells that the RLQS demands are kept in this Redis too: the
	// permissions probe then checks their hash commands.
	RLQS bool
	// Needs, when set, tells what the limits in force keep in Redis
	// (NeedsOf), read at each inspection, so that the permissions probe
	// checks what they use; nil checks the commands of every kind.
	Needs func() Needs
	// Logger says what the inspections of Redis find (inspect.go) and a
	// reset subscription Redis refuses; nil logs nothing.
	Logger *zap.Logger
}

// Store decides hits in Redis. It is safe for concurrent use by many
// goroutines, as is the client it wraps.
type Store struct {
	members    *logMembers // names of the sliding log members this store adds
	client     redisClient
	single     singleAddr // a single Redis over TCP (refusal.go)
	cluster    bool
	clock      func() int64  // Options.Clock
	redisClock redisClock    // Redis's clock, estimated, when clock is nil
	batch      *batcher      // nil: one pipeline per call, or per master (nodes)
	nodes      *nodeBatchers // a cluster's batchers, one per master; nil on one Redis or without batching
	topo       *topology     // a cluster's map reloads and master checks; nil on one Redis
	onPipeline func(runs int)
	expiries   *expirySeen // the window counters seen with their TTL set
	prevs      *prevCounts // the final counts of sliding windows' previous windows
	// probing is set while a cluster's clock sample is out (probeAside),
	// probes counts those goroutines for Close.
	probing atomic.Bool
	probes  sync.WaitGroup
	// asking is the TIME out for calls without an estimate (now), nil
	// when none is.
	askMu  sync.Mutex
	asking *clockAsk
	tracer trace.Tracer // Options.Tracer
	// resetChannel is Options.ResetChannel; hearing is its subscription
	// (HearResets), nil until then, and heard ends with its goroutine.
	resetChannel string
	hearing      *redis.PubSub
	heard        sync.WaitGroup
	// inspect checks Redis for what no call reports, at each Ping.
	inspect *inspector
	// log is Options.Logger (a no-op if nil); backFailed counts the backs
	// that failed, backLogged is when one was last logged (backDone).
	log        *zap.Logger
	backFailed atomic.Int64
	backLogged atomic.Int64
	// aside counts the backs in flight that no call waits for (sendAside).
	aside sync.WaitGroup
	// warmClient is the client on a single Redis (or a Sentinel's
	// master), nil on a cluster; warming counts the connections being
	// opened aside, up to warmMax (warmOne).
	warmClient *redis.Client
	warming    atomic.Int64
	warmMax    int
	// answered is when (localMicros) a reply last came back from Redis,
	// 0 before the first (AnsweredWithin).
	answered atomic.Int64
	// wall is this host's clock, read for a provisional instant (now):
	// time.Now, but for a test of one that Redis's clock belies.
	wall func() time.Time
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
	s := &Store{members: newLogMembers(), client: client, single: singleOf(client), cluster: cluster, clock: opts.Clock, onPipeline: onPipeline,
		expiries: newExpirySeen(), prevs: newPrevCounts(), tracer: opts.Tracer, resetChannel: opts.ResetChannel, inspect: newInspector(client, opts), log: opts.Logger, wall: time.Now}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	switch {
	case opts.Batching == BatchOff:
	case cluster:
		s.nodes = newNodeBatchers(s, client.(*redis.ClusterClient), opts.Flushes)
		s.nodes.onGate = opts.OnGate
	default:
		s.batch = newBatcher(s, opts.Flushes)
	}
	s.warmClient, _ = client.(*redis.Client)
	s.warmMax = max(DefaultFlushes, s.poolSize())
	if s.clock == nil {
		s.warmUp()
	}
	if cluster {
		s.topo = newTopology(client.(*redis.ClusterClient), func(masters []MasterState) {
			if s.nodes != nil {
				s.nodes.found(masters)
			}
		})
	}
	return s
}

// warmUp asks Redis's clock (ask), and on a single Redis opens as many
// connections as the client's pool holds (warmOne): a store just made then has an estimate of the clock and its
// connections open by the time the first calls come, or soon after, and a
// call does not spend its deadline on a TIME of its own, a dial and
// go-redis's handshake before its decision's round trip.
func (s *Store) warmUp() {
	s.ask()
	for range s.warmMax - 1 { // ask's TIME opens one
		s.warmOne()
	}
}

// warmOne opens a connection aside, on a single Redis: a PING on no
// call's context, which leaves a connection with go-redis's handshake
// done idle in the pool (one it finds idle, it only uses), at most
// warmMax at once; Close waits for them. A pipeline that fails other than
// by a reply (exec) loses its connection, and the next call to need one
// would dial it and wait for the handshake within its own deadline, two
// round trips: on a far Redis, past the store timeout, so that one
// timeout led to the next and an open breaker's probes all failed. (A pool
// kept at MinIdleConns does not help: go-redis dials those connections but
// makes their handshake when a call first takes one.)
func (s *Store) warmOne() {
	if s.warmClient == nil {
		return
	}
	if s.warming.Add(1) > int64(s.warmMax) {
		s.warming.Add(-1)
		return
	}
	s.probes.Add(1)
	go func() {
		defer s.probes.Done()
		defer s.warming.Add(-1)
		if err := s.warmClient.Ping(context.Background()).Err(); err == nil || !unavailable(err) {
			s.answered.Store(localMicros())
		}
	}()
}

// AnsweredWithin reports whether a reply came back from Redis within the
// last d: a pipeline's, however late for its calls, or a connection's
// opened aside (warmOne). It implements breaker.Answering, so that a
// breaker does not take a slow Redis for one that is down.
func (s *Store) AnsweredWithin(d time.Duration) bool {
	at := s.answered.Load()
	return at != 0 && localMicros()-at <= d.Microseconds()
}

// poolSize is the connections the client keeps for each node, 0 when it
// does not say.
func (s *Store) poolSize() int {
	switch c := s.client.(type) {
	case *redis.Client:
		return c.Options().PoolSize
	case *redis.ClusterClient:
		return c.Options().PoolSize
	}
	return 0
}

// Close waits for the merged pipelines in flight; calls after it send
// pipelines of their own. It does not close the client.
func (s *Store) Close() {
	if s.topo != nil {
		s.topo.close()
	}
	if s.batch != nil {
		s.batch.close()
	}
	if s.nodes != nil {
		s.nodes.close()
	}
	if s.hearing != nil {
		s.hearing.Close() //nolint:errcheck // its goroutine ends either way
		s.heard.Wait()
	}
	s.probes.Wait()
	s.settle()
}

// settle waits for the undos, refunds and expiries in flight that no call
// waits for (sendAside): a test that reads Redis's state after its calls
// calls it first.
func (s *Store) settle() { s.aside.Wait() }

// Ping reports whether Redis answers, for health checks: a Redis that
// answers but refuses the client's settings, or lacks permissions the
// store needs, is a *RefusedError; one out of memory under noeviction a
// *MemoryFullError. Each Ping that finds Redis answering inspects it
// (inspect.go), at most once every inspectEvery. On a cluster it
// reloads the client's map of the slots and PINGs every master (or answers
// what such a check found less than reloadEvery ago, so that health checks
// cost Redis little however many come): if some do not answer, the error is
// an *UnreachableError that names them.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.ping(ctx); err != nil {
		return err
	}
	return s.inspect.check(ctx)
}

// ping is Ping without the inspection.
func (s *Store) ping(ctx context.Context) error {
	if s.topo != nil {
		if err := s.topo.check(ctx); err != nil {
			var ue *UnreachableError
			if errors.As(err, &ue) {
				return err
			}
			return fmt.Errorf("redisstore: ping: %w", err)
		}
		return nil
	}
	if err := s.client.Ping(ctx).Err(); err != nil {
		return s.refusal(ctx, fmt.Errorf("redisstore: ping: %w", err))
	}
	return nil
}

// Masters is what the last check of a cluster's masters found of each (a
// Ping, or a reload after a call found a node unreachable), by address:
// nil on a single Redis, or before the first check.
func (s *Store) Masters() []MasterState {
	if s.topo == nil {
		return nil
	}
	return s.topo.lastMasters()
}

// MastersFailingFast is how many masters of a cluster have their gate shut
// now (failfast.go): calls for their keys fail at once. Zero on a single
// Redis or without batching.
func (s *Store) MastersFailingFast() int {
	if s.nodes == nil {
		return 0
	}
	return s.nodes.shut()
}

// Decide implements limits.Store. All hits go out in one pipeline, which a
// cluster client splits into one round trip per node; with batching, that
// pipeline also carries the hits of concurrent calls, and a call whose ctx
// ends first returns at once, its hits failed with ctx's error.
//
// A run of hits is a hit on its own or a run of joint hits (Hit.Joint
// chains a hit to the next, up to the first hit without it); each hit of a
// run is decided on its own, and the run is charged only if every one of
// them allows (count_refused limits always keep their charge). The hits of
// one call are decided in order: a run that names a key an earlier run of
// the call names goes in a later round, after the earlier one has been
// decided (and undone), with the same instant.
//
// The keys of a joint run must share a hash tag (so that a cluster keeps
// them on one master) and differ: a run that repeats a key is not sent,
// every hit of it failed with limits.ErrRepeatedKey, as the embedded store
// does.
//
// Each result carries its own error, so a failure of one command (its node
// down, a key of the wrong type) leaves the others decided; a failure of
// one hit of a joint run, or an invalid limit in it, sets the error on
// every hit of the run, since the run cannot be decided without it (its
// other charges are undone). Hits beyond len(results) are not decided.
func (s *Store) Decide(ctx context.Context, hits []limits.Hit, results []limits.Result) {
	if len(results) < len(hits) {
		hits = hits[:len(results)]
	}
	if len(hits) == 0 {
		return
	}
	at, err := s.now(ctx, hits)
	if err != nil {
		failFrom(results[:len(hits)], err)
		return
	}
	dl, ok := ctx.Deadline()
	s.prevs.observe(dl, ok, time.Now())
	for first := 0; first < len(hits); {
		next, held := s.decideRound(ctx, hits, results, first, at)
		if held {
			first, at.provisional = next, false // the later rounds at the same instant
			continue
		}
		// A provisional instant that Redis's clock belied: its charges
		// are being undone, and the round goes again at the estimate.
		now, err := s.asked(ctx)
		if err != nil {
			failFrom(results[first:len(hits)], err)
			return
		}
		at = instant{micros: now}
	}
}

// failFrom sets err on every result.
func failFrom(results []limits.Result, err error) {
	for i := range results {
		results[i] = limits.Result{Err: err}
	}
}

// instant is the instant of a call, in µs since the epoch. A provisional
// one is this host's wall clock, read at local (localMicros), for a call
// that found no estimate of Redis's clock (Store.now): its round's
// pipeline carries a TIME, and its decisions stand only if that TIME
// shows Redis's clock could have read micros at local (redisClock.holds).
type instant struct {
	micros, local int64
	provisional   bool
}

// pending is one hit of a round, its commands queued: a *windowHit, a
// *bucketHit, a *logHit or a *concHit (a lockout's lock is read beside it).
type pending interface {
	// undo queues in back what takes the hit's charge back, its run
	// refused; its answer does not wait for it.
	undo(ctx context.Context, back *work, u undoing)
	// refundLater is a refund's commands held back until its run is
	// allowed (refundsLater), nil for any other hit.
	refundLater() []redis.Cmder
}

func (wh *windowHit) refundLater() []redis.Cmder { return wh.refund }
func (blockHit) refundLater() []redis.Cmder      { return nil }

// blockHit is a hit of a block rule (limits.Limit.Blocks): refused
// without a command, since Redis keeps nothing for it; its run is refused
// with it.
type blockHit struct{}

func (blockHit) undo(context.Context, *work, undoing) {}
func (bh *bucketHit) refundLater() []redis.Cmder      { return bh.refund }

// undoing is what an undo needs beyond the hit: whether the hit itself was
// allowed, and the latest instant (µs) a concurrent hit may have been
// decided at (Store.latest).
type undoing struct {
	allowed bool
	latest  int64
}

// span is one run of a round: hits[first..last].
type span struct{ first, last int }

// roundOnStack is the number of hits and runs a round holds on the stack,
// without allocating: a call is a few hits.
const roundOnStack = 8

// decideRound decides the runs of hits from first on, up to the first run
// that names a key an earlier one of the round names, and returns where it
// stopped: one pass that queues every hit's commands, one send, one pass
// that decides, one that undoes the refused runs, and their send.
//
// A round at a provisional instant (held false) whose TIME belies it
// decides nothing: its charges are undone aside (takeBack), and the call
// decides the runs from first again.
func (s *Store) decideRound(ctx context.Context, hits []limits.Hit, results []limits.Result, first int, at instant) (end int, held bool) {
	// A round's runs, and each hit's pending commands, by index in the
	// call's hits (nil for a hit of a run that was not sent).
	var runsOnStack [roundOnStack]span
	var pendOnStack [roundOnStack]pending
	pend := pendOnStack[:]
	if len(hits) > roundOnStack {
		pend = make([]pending, len(hits))
	}
	wk := &work{}
	var asked *clockAsk
	switch {
	case at.provisional && s.cluster:
		asked = s.ask() // a master's TIME, beside the charges
	case at.provisional:
		wk.clock = s.newClockProbe() // first in the pipeline, before the charges
	}
	runs, end := s.plan(ctx, hits, results, first, at, runsOnStack[:0], pend, wk)
	if wk.decisions == 0 {
		return end, true
	}
	if len(wk.cmds) == 0 { // every run is a block rule's: nothing sent, nothing charged
		at.provisional = false
	} else {
		s.send(ctx, wk)
	}
	if wk.err != nil {
		s.expiries.forget()
		// The call stopped waiting: its commands may still be running, and
		// their replies are not for it to read.
		for _, r := range runs {
			failRun(hits, results, r, wk.err)
		}
		return end, true
	}
	if at.provisional {
		if err := s.timeFor(ctx, wk, asked); err != nil {
			// The TIME failed, as the charges after it may have: the round
			// fails, its charges counted (stricter, never looser).
			for _, r := range runs {
				failRun(hits, results, r, err)
			}
			return end, true
		}
		if !s.redisClock.holds(at.local, at.micros) {
			s.takeBack(ctx, hits, results, runs, pend)
			return first, false
		}
	}
	now := at.micros
	back := &work{}
	s.decideHits(ctx, hits, results, runs, pend, back)
	lockRefusals(ctx, results, wk.locks, back)
	s.undoRefused(ctx, results, runs, pend, back, s.latest(now))
	lockRefunds(results, wk.locks, back)
	lockAnswers(results, wk.locks)
	s.sendBack(ctx, back)
	return end, true
}

// timeFor waits for the TIME that checks a provisional instant: the one
// in wk's pipeline on a single Redis, the master's sent beside it (asked)
// on a cluster, out at the same time, so that it costs no round trip more.
func (s *Store) timeFor(ctx context.Context, wk *work, asked *clockAsk) error {
	if asked == nil {
		return wk.clock.err()
	}
	select {
	case <-asked.done:
		return asked.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// takeBack undoes, aside, every charge of a round decided at a provisional
// instant that Redis's clock belied, as if each of its runs were refused:
// whatever it allowed was decided at the wrong instant. A bucket keeps its
// charge (keepBuckets: stricter, never looser), as does a count_refused
// limit's; its refunds only read (plan), so the round going again applies
// them once.
func (s *Store) takeBack(ctx context.Context, hits []limits.Hit, results []limits.Result, runs []span, pend []pending) {
	back := &work{}
	s.decideHits(ctx, hits, results, runs, pend, back)
	for _, r := range runs {
		for i := r.first; i <= r.last; i++ {
			if results[i].Err == nil {
				pend[i].undo(ctx, back, undoing{allowed: results[i].Allowed, latest: keepBuckets})
			}
		}
	}
	if len(back.cmds) > 0 {
		s.sendAside(ctx, back)
	}
}

// keepBuckets is an instant (µs) so late that a bucket's undo given it as
// the latest a concurrent hit was decided at gives nothing back (and
// times 1000, in ns, still fits an int64).
const keepBuckets = int64(1) << 52

// plan queues in wk the commands of every run from first on, up to the
// first that repeats a key of an earlier one, keeps each hit's in pend,
// and returns the runs, appended to runs, and where it stopped. A run that
// cannot be decided (an invalid limit, a repeated key) has its error set
// here and sends nothing.
func (s *Store) plan(ctx context.Context, hits []limits.Hit, results []limits.Result, first int, at instant, runs []span, pend []pending, wk *work) ([]span, int) {
	now, prevs := at.micros, s.prevs
	if at.provisional {
		prevs = coldPrevs // no previous window's count taken as final on it
	}
	end := first
	for end < len(hits) {
		last := end
		for last < len(hits)-1 && hits[last].Joint {
			last++
		}
		if end > first && repeats(hits[first:end], hits[end:last+1]) {
			break
		}
		r := span{first: end, last: last}
		end = last + 1
		if err := validate(hits[r.first : r.last+1]); err != nil {
			for i := r.first; i <= r.last; i++ {
				results[i] = limits.Result{Err: err}
			}
			continue
		}
		refunds := refundsLater(hits[r.first : r.last+1])
		for i := r.first; i <= r.last; i++ {
			h := &hits[i]
			// A count_refused limit keeps what its hit does, whatever the
			// run's verdict: its refund need not wait, but at a
			// provisional instant, which may be belied, every refund waits.
			later := h.Cost < 0 && (at.provisional || refunds && !h.Limit.CountRefused)
			switch {
			case h.Limit.Blocks():
				pend[i] = blockHit{}
			case isWindow(h.Limit.Algorithm):
				pend[i] = newWindowHit(ctx, i, h, now, s.expiries, prevs, wk, later)
			case h.Limit.Algorithm == limits.TokenBucket || h.Limit.Algorithm == limits.LeakyBucket:
				pend[i] = newBucketHit(ctx, i, h, now, wk, later)
			case h.Limit.Algorithm == limits.Concurrency:
				pend[i] = newConcHit(ctx, i, h, now, s.members, wk, later)
				pend[i].(*concHit).send = s.send
			default:
				pend[i] = newLogHit(ctx, i, h, now, s.members, wk, later)
			}
			if h.Limit.BlockFor > 0 && !h.Limit.Blocks() {
				wk.locks = append(wk.locks, newLockHit(ctx, i, r, h, now, wk, later))
			}
		}
		runs = append(runs, r)
	}
	wk.decisions = len(runs)
	return runs, end
}

// refundsLater reports whether the refunds of run must wait for its
// verdict: a run that may be refused (one of its hits consumes, or peeks)
// and also refunds. A refund taken back after a refusal would have let a concurrent
// hit in where it did not fit, so such a refund only reads in the call's
// pipeline, and is applied with the undos, if its run is allowed. The
// service never sends one (the limits of a descriptor share its cost).
func refundsLater(run []limits.Hit) bool {
	if len(run) == 1 {
		return false
	}
	refusable, refunds := false, false
	for _, h := range run {
		refusable = refusable || h.Cost >= 0
		refunds = refunds || h.Cost < 0
	}
	return refusable && refunds
}

// decideHits decides every hit of the round from its replies (a window's
// missing PEXPIRE queued in back), the buckets that must go again at a
// later instant sent again until they are decided (decideBuckets).
func (s *Store) decideHits(ctx context.Context, hits []limits.Hit, results []limits.Result, runs []span, pend []pending, back *work) {
	var buckets []*bucketHit
	for _, r := range runs {
		for i := r.first; i <= r.last; i++ {
			var res limits.Result
			var err error
			switch h := pend[i].(type) {
			case blockHit:
				res = limits.Result{}
			case *windowHit:
				res, err = h.decide(ctx, s, back)
			case *logHit:
				res, err = h.decide()
			case *concHit:
				res, err = h.decide()
			case *bucketHit:
				buckets = append(buckets, h)
				continue
			}
			if err != nil {
				res = limits.Result{Err: storeError(hits[i].Limit.Algorithm.String(), err)}
			}
			results[i] = res
		}
	}
	s.decideBuckets(ctx, hits, results, buckets, pend)
}

// undoRefused queues in back the undo of every run that a hit of it
// refused, or failed: then every hit of the run fails with the first
// error. A hit that failed is not undone: whether it charged is unknown,
// and keeping a charge is stricter, never looser.
func (s *Store) undoRefused(ctx context.Context, results []limits.Result, runs []span, pend []pending, back *work, latest int64) {
	for _, r := range runs {
		refused := false
		var err error
		for i := r.first; i <= r.last; i++ {
			refused = refused || !results[i].Allowed
			if err == nil {
				err = results[i].Err
			}
		}
		if !refused {
			for i := r.first; i <= r.last; i++ {
				back.cmds = append(back.cmds, pend[i].refundLater()...)
			}
			continue
		}
		for i := r.first; i <= r.last; i++ {
			if results[i].Err == nil {
				pend[i].undo(ctx, back, undoing{allowed: results[i].Allowed, latest: latest})
			}
		}
		if err != nil {
			for i := r.first; i <= r.last; i++ {
				results[i] = limits.Result{Err: err}
			}
		}
	}
}

// sendBack sends the undos, held-back refunds, expiries and lock starts
// in back, which no answer reads: the call returns at once and back goes
// aside (sendAside), its charges counted the longer. With Options.Clock
// (tests, which compare each call with the embedded store's) the call
// waits for back, so that its next call sees it done.
func (s *Store) sendBack(ctx context.Context, back *work) {
	if len(back.cmds) == 0 {
		return
	}
	if ctx.Err() != nil || s.clock == nil {
		s.sendAside(ctx, back)
		return
	}
	s.send(ctx, back)
	s.backDone(ctx, back)
}

// sendAside sends back from a goroutine of its own, on a context without
// the call's cancellation or deadline (the client's timeouts bound it),
// and counts and logs its failure (backDone). An undo that fails (Redis
// gone) leaves the charge counted until the key expires: stricter, never
// looser. Close waits for it (settle).
func (s *Store) sendAside(ctx context.Context, back *work) {
	s.aside.Add(1)
	go func() {
		defer s.aside.Done()
		ctx := context.WithoutCancel(ctx)
		s.send(ctx, back)
		s.backDone(ctx, back)
	}()
}

// backDone counts, and logs at most every backLogEvery, a back whose
// commands did not all run: an undo, a refund, an expiry or a lock's
// start that Redis did not do. Then it sends what follows back (work.then).
func (s *Store) backDone(ctx context.Context, back *work) {
	if back.err == nil {
		for _, then := range back.then {
			then(ctx)
		}
	}
	err := back.err
	for _, c := range back.cmds {
		if err != nil {
			break
		}
		if e := c.Err(); e != nil && !errors.Is(e, redis.Nil) {
			err = e
		}
	}
	if err == nil {
		return
	}
	n := s.backFailed.Add(1)
	now := localMicros()
	if last := s.backLogged.Load(); (last == 0 || now-last >= backLogEvery) && s.backLogged.CompareAndSwap(last, now) {
		s.log.Warn("redisstore: undos or refunds not done: their charges stay counted until their keys expire",
			zap.Int64("failed_so_far", n), zap.Error(err))
	}
}

// backLogEvery is the least time, in µs, between two logs of backs that
// failed (backDone).
const backLogEvery = int64(10 * time.Second / time.Microsecond)

// BackFailed is how many undos (with the refunds, expiries and reads sent
// with them) have failed since the store was made: each left a charge
// counted until its key expires.
func (s *Store) BackFailed() int64 { return s.backFailed.Load() }

// decideBuckets decides the bucket hits of a round from their replies, and
// sends again those that must go again at the later instant their key has
// seen (bucketHit.decide), twice at most: the third attempt is answered as
// Redis decides it at its own instant. A hit sent again takes its first
// one's place in pend.
func (s *Store) decideBuckets(ctx context.Context, hits []limits.Hit, results []limits.Result, buckets []*bucketHit, pend []pending) {
	for attempt := 0; len(buckets) > 0; attempt++ {
		var again []*bucketHit
		wk := &work{}
		for _, bh := range buckets {
			res, later, err := bh.decide()
			switch {
			case err != nil:
				res = limits.Result{Err: storeError(bh.limit.Algorithm.String(), err)}
			case later > 0:
				bh = newBucketHit(ctx, bh.i, &hits[bh.i], later, wk, false)
				bh.last = attempt >= 1
				pend[bh.i] = bh
				again = append(again, bh)
				continue
			}
			results[bh.i] = res
		}
		if len(again) == 0 {
			return
		}
		wk.decisions = len(again)
		s.send(ctx, wk)
		if err := firstErr(wk.err, context.Cause(ctx)); err != nil {
			for _, bh := range again {
				results[bh.i] = limits.Result{Err: storeError(bh.limit.Algorithm.String(), err)}
				// Sent or not, its charge is not for this call to read:
				// nothing of it to undo.
				bh.op = nil
			}
			return
		}
		buckets = again
	}
}

// firstErr is the first error that is not nil.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// failRun sets err, as the run's failure, on every hit of the run.
func failRun(hits []limits.Hit, results []limits.Result, r span, err error) {
	what := hits[r.first].Limit.Algorithm.String()
	if r.last > r.first {
		what = fmt.Sprintf("joint run of %d hits", r.last-r.first+1)
	}
	err = storeError(what, err)
	for i := r.first; i <= r.last; i++ {
		results[i] = limits.Result{Err: err}
	}
}

// repeats reports whether a hit of run names a key that a hit of before
// names: an earlier run's charge is undone only after the round's replies,
// so a later hit on its key would see it. Calls are a few hits long:
// comparing each pair costs less than a map.
func repeats(before, run []limits.Hit) bool {
	for i := range run {
		for j := range before {
			if before[j].Key == run[i].Key {
				return true
			}
		}
	}
	return false
}

// validate checks a run's limits and keys before anything is sent.
func validate(run []limits.Hit) error {
	joint := len(run) > 1
	if k := limits.RepeatedKey(run); k >= 0 {
		return fmt.Errorf("redisstore: joint run of %d hits: hit %d (%s): %w", len(run), k, run[k].Key, limits.ErrRepeatedKey)
	}
	for i, h := range run {
		l := h.Limit
		err := l.Validate()
		if err == nil && !l.Algorithm.Implemented() {
			err = fmt.Errorf("%w: %s", errNoAlgorithm, l.Algorithm)
		}
		switch {
		case err != nil && joint:
			return fmt.Errorf("redisstore: joint run of %d hits: hit %d (%s): %w", len(run), i, h.Key, err)
		case err != nil:
			return fmt.Errorf("redisstore: %w", err)
		}
	}
	return nil
}

// errNoAlgorithm is returned for an algorithm that package limits
// implements but this store does not (yet).
var errNoAlgorithm = errors.New("no Redis commands for algorithm")

// errReply is returned for a reply that is not of the shape the command
// answers: a key that holds something else, or a proxy in the way.
var errReply = errors.New("unexpected reply")

// latest is the latest instant, in µs, a hit concurrent with a call
// decided at now can have been decided at: now itself with Options.Clock
// (tests, whose instants are their own), or else the estimate of Redis's
// clock plus twice its uncertainty (this instance's, and another's taken
// to be as good, as prevCounts takes their deadlines).
func (s *Store) latest(now int64) int64 {
	if s.clock != nil {
		return now
	}
	now, u, ok := s.redisClock.now()
	if !ok {
		return keepBuckets // no estimate: keep every bucket charge
	}
	return now + 2*u
}

// now is the instant of a call: Options.Clock's, or Redis's clock as
// estimated from the TIME of earlier pipelines (fresh). Without an
// estimate (the first calls, or after 100 s idle), a call whose hits
// allow it takes a provisional instant, this host's wall clock, and the
// TIME that checks it goes with its pipeline (decideRound: in it on a
// single Redis, beside it to the clock's master on a cluster): one round
// trip, as with an estimate. Otherwise it waits for a TIME that every call
// in the same case shares (asked).
func (s *Store) now(ctx context.Context, hits []limits.Hit) (instant, error) {
	if s.clock != nil {
		return instant{micros: s.clock()}, nil
	}
	if now, ok := s.redisClock.fresh(); ok {
		return instant{micros: now}, nil
	}
	if s.mayGuess(hits) {
		return instant{micros: s.wall().UnixMicro(), local: localMicros(), provisional: true}, nil
	}
	now, err := s.asked(ctx)
	return instant{micros: now}, err
}

// mayGuess reports whether a call of hits may be decided at a provisional
// instant: none of its hits a concurrency limit's (whose release gives
// back slots in a round trip of its own) or under a lockout (whose
// refusal starts a lock that an undo could not lift).
func (s *Store) mayGuess(hits []limits.Hit) bool {
	for i := range hits {
		if hits[i].Limit.Algorithm == limits.Concurrency || hits[i].Limit.BlockFor > 0 {
			return false
		}
	}
	return true
}

// asked is Options.Clock's instant, or Redis's clock, estimated: at once
// if the estimate is fresh, else once a TIME that every call in the same
// case shares (ask) is answered. It is never provisional.
func (s *Store) asked(ctx context.Context) (int64, error) {
	if s.clock != nil {
		return s.clock(), nil
	}
	if now, ok := s.redisClock.fresh(); ok {
		return now, nil
	}
	a := s.ask()
	select {
	case <-a.done:
	case <-ctx.Done():
		return 0, storeError("clock", ctx.Err())
	}
	if a.err != nil {
		return 0, storeError("clock", a.err)
	}
	now, _, _ := s.redisClock.now()
	return now, nil
}

// clockAsk is a TIME asked for calls that have no estimate of the clock to
// use: done is closed once it is answered, or failed with err.
type clockAsk struct {
	done chan struct{}
	err  error
}

// ask returns the TIME out for calls without an estimate, or sends one:
// from a goroutine of its own, with no deadline but the client's
// timeouts, so that the calls that wait for it each wait as long as their
// own deadline allows, none queues behind another, and one that gives up
// does not fail the others.
func (s *Store) ask() *clockAsk {
	s.askMu.Lock()
	defer s.askMu.Unlock()
	if s.asking != nil {
		return s.asking
	}
	a := &clockAsk{done: make(chan struct{})}
	s.asking = a
	s.probes.Add(1)
	go func() {
		defer s.probes.Done()
		err := s.askClock(context.Background())
		s.askMu.Lock()
		s.asking = nil
		s.askMu.Unlock()
		a.err = err
		close(a.done)
	}()
	return a
}

// storeError wraps err, what a command for what answered, as the
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
	if s.tracer != nil {
		wk.caller = callerSpan(ctx) // trace.go
	}
	switch {
	case ctx.Err() != nil:
	case s.batch != nil && s.batch.do(ctx, wk):
		return
	case s.nodes != nil && s.nodes.do(ctx, wk):
		return
	}
	s.exec(ctx, wk)
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
