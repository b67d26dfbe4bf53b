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
// for (sendBack): every answer is read from the first. Each kind answers
// to one contract (pending, round.go): the commands it queues, its
// decision on their replies, what it queues after the answer, its undo;
// a round is one loop over it, whatever the kinds. A
// window (fixed_window, sliding_window) is a counter per window that a
// saturating BITFIELD INCRBY moves (window.go), a bucket (token_bucket,
// leaky_bucket) one integer that a BITFIELD moves in one atomic step, only
// if the hit fits (bucket.go), a sliding log a sorted set of one member per
// unit it counts (log.go), a concurrency limit one of slots
// (concurrency.go), and a lockout wraps any of them (lockout.go). A run of joint hits (the limits of one
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
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/envoy-rls/envoy-rls/internal/redisinspect"
	"github.com/envoy-rls/envoy-rls/internal/redispipe"
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
	// as it would on the embedded store. Redis still expires keys by its
	// own clock: a caller whose instants run slower than real time adds
	// LongerTTLs to the client.
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
	// (redispipe's failfast.go), each change once and in order. It is
	// called outside the store's locks but on a caller's goroutine: it
	// must be fast.
	OnGate func(addr string, shut bool)
	// Tracer, when set, traces every pipeline sent for a call whose
	// context holds a sampled span (redispipe's trace.go): one span per
	// pipeline, however many calls it serves. Nil, the default, traces
	// nothing.
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
	members *logMembers // names of the sliding log members this store adds
	client  redisClient
	single  redispipe.SingleAddr // a single Redis over TCP (redispipe.Refusal)
	cluster bool
	clock   func() int64 // Options.Clock
	// pipes send the work of calls, merged, and estimate Redis's clock
	// from their TIME.
	pipes    *redispipe.Pipes
	expiries *expirySeen // the window counters seen with their TTL set
	prevs    *prevCounts // the final counts of sliding windows' previous windows
	// resetChannel is Options.ResetChannel; hearing is its subscription
	// (HearResets), nil until then, and heard ends with its goroutine.
	resetChannel string
	hearing      *redis.PubSub
	heard        sync.WaitGroup
	// inspect checks Redis for what no call reports, at each Ping; what
	// its probe checks is the store's: prefix is Options.KeyPrefix, rlqs
	// Options.RLQS, needs Options.Needs (probeCmds).
	inspect *redisinspect.Inspector
	prefix  string
	rlqs    bool
	needs   func() Needs
	// log is Options.Logger (a no-op if nil).
	log *zap.Logger
	// wall is this host's clock, read for a provisional instant (now):
	// time.Now, but for a test of one that Redis's clock belies.
	wall func() time.Time
}

// New returns a Store on client: a *redis.Client, a *redis.ClusterClient or
// the client NewClient builds. The Store does not own the client; the caller
// closes it, after Close.
func New(client redisClient, opts Options) *Store {
	_, cluster := client.(*redis.ClusterClient)
	s := &Store{members: newLogMembers(), client: client, single: redispipe.SingleOf(client), cluster: cluster, clock: opts.Clock,
		expiries: newExpirySeen(), prevs: newPrevCounts(), resetChannel: opts.ResetChannel, prefix: opts.KeyPrefix, rlqs: opts.RLQS, needs: opts.Needs, log: opts.Logger, wall: time.Now}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	s.inspect = redisinspect.New(client, redisinspect.Options{KeyPrefix: opts.KeyPrefix, Channel: opts.ResetChannel, Probe: s.probeCmds, Logger: opts.Logger})
	s.pipes = redispipe.NewPipes(client, redispipe.Options{Batch: opts.Batching != BatchOff, Flushes: opts.Flushes,
		OnPipeline: opts.OnPipeline, OnGate: opts.OnGate, Tracer: opts.Tracer, Logger: opts.Logger, FixedClock: opts.Clock != nil})
	return s
}

// AnsweredWithin reports whether a reply came back from Redis within the
// last d: a pipeline's, however late for its calls, or a connection's
// opened aside (redispipe.Pipes.AnsweredWithin). It implements
// breaker.Answering, so that a breaker does not take a slow Redis for one
// that is down.
func (s *Store) AnsweredWithin(d time.Duration) bool { return s.pipes.AnsweredWithin(d) }

// Close waits for the merged pipelines in flight; calls after it send
// pipelines of their own. It does not close the client.
func (s *Store) Close() {
	s.pipes.Close()
	if s.hearing != nil {
		s.hearing.Close() //nolint:errcheck // its goroutine ends either way
		s.heard.Wait()
	}
	s.settle()
}

// settle waits for the undos, refunds and expiries in flight that no call
// waits for (sendAside): a test that reads Redis's state after its calls
// calls it first.
func (s *Store) settle() { s.pipes.Settle() }

// Ping reports whether Redis answers, for health checks: a Redis that
// answers but refuses the client's settings, or lacks permissions the
// store needs, is a *RefusedError; one out of memory under noeviction a
// *MemoryFullError. Each Ping that finds Redis answering inspects it
// (package redisinspect), at most once every 1.5 s. On a cluster it
// reloads the client's map of the slots and PINGs every master (or answers
// what such a check found less than reloadEvery ago, so that health checks
// cost Redis little however many come): if some do not answer, the error is
// an *UnreachableError that names them.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.ping(ctx); err != nil {
		return err
	}
	return s.inspect.Check(ctx)
}

// ping is Ping without the inspection.
func (s *Store) ping(ctx context.Context) error {
	if topo := s.pipes.Topology(); topo != nil {
		if err := topo.Check(ctx); err != nil {
			var ue *UnreachableError
			if errors.As(err, &ue) {
				return err
			}
			return fmt.Errorf("redisstore: ping: %w", err)
		}
		return nil
	}
	if err := s.client.Ping(ctx).Err(); err != nil {
		return redispipe.Refusal(ctx, s.single, fmt.Errorf("redisstore: ping: %w", err))
	}
	return nil
}

// Masters is what the last check of a cluster's masters found of each (a
// Ping, or a reload after a call found a node unreachable), by address:
// nil on a single Redis, or before the first check.
func (s *Store) Masters() []MasterState {
	topo := s.pipes.Topology()
	if topo == nil {
		return nil
	}
	return topo.LastMasters()
}

// MastersFailingFast is how many masters of a cluster have their gate
// shut now (redispipe's failfast.go): calls for their keys fail at once.
// Zero on a single Redis or without batching.
func (s *Store) MastersFailingFast() int {
	return s.pipes.MastersFailingFast()
}
