package redispipe

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
)

// client is the part of go-redis that Pipes uses, so that a plain client
// and a cluster client both fit.
type client interface {
	Pipeline() redis.Pipeliner
}

var (
	_ client = (*redis.Client)(nil)
	_ client = (*redis.ClusterClient)(nil)
)

// DefaultFlushes is the most merged pipelines in flight at once when
// Options.Flushes is zero, on a near Redis.
const DefaultFlushes = 4

// Options tune Pipes.
type Options struct {
	// Batch merges the work of concurrent calls into shared pipelines: on
	// a single Redis all of it (batcher); on a cluster one master at a
	// time (nodeBatchers), each master behind a gate (failfast.go).
	Batch bool
	// Flushes bounds the merged pipelines in flight at once; zero means
	// DefaultFlushes.
	Flushes int
	// OnPipeline, if set, is told the decisions of each pipeline that
	// carries some. It must be fast and safe for concurrent use.
	OnPipeline func(decisions int)
	// OnGate, if set, is told when the gate of a cluster's master shuts
	// and when it opens again, each change once and in order.
	OnGate func(addr string, shut bool)
	// Tracer, when set, traces every pipeline sent for a call whose
	// context holds a sampled span (trace.go).
	Tracer trace.Tracer
	// Logger says what work sent aside failed to do (Done); nil logs
	// nothing.
	Logger *zap.Logger
	// FixedClock tells that the caller takes its instants from a clock of
	// its own (tests): Redis's clock is then neither sampled nor asked at
	// once, and no connection is opened ahead.
	FixedClock bool
}

// Pipes sends the work of calls to Redis in pipelines, merged with the
// work of concurrent calls (Options.Batch), routed per master on a
// cluster, and keeps what those pipelines tell: the estimate of Redis's
// clock, from the TIME they carry, when Redis last answered, a cluster's
// topology. It knows nothing of what the commands decide. It is safe for
// concurrent use.
type Pipes struct {
	client     client
	cluster    bool
	fixed      bool
	redisClock Clock
	batch      *batcher      // nil: one pipeline per call, or per master (nodes)
	nodes      *nodeBatchers // a cluster's batchers, one per master; nil on one Redis or without batching
	topo       *Topology     // a cluster's map reloads and master checks; nil on one Redis
	onPipeline func(decisions int)
	tracer     trace.Tracer
	// probing is set while a cluster's clock sample is out (probeAside),
	// probes counts the goroutines of samples, asks and warm-ups for
	// Close.
	probing atomic.Bool
	probes  sync.WaitGroup
	// asking is the TIME out for calls without an estimate (Ask), nil
	// when none is.
	askMu  sync.Mutex
	asking *ClockAsk
	// warmClient is the client on a single Redis (or a Sentinel's
	// master), nil on a cluster; warming counts the connections being
	// opened aside, up to warmMax (warmOne).
	warmClient *redis.Client
	warming    atomic.Int64
	warmMax    int
	// answered is when (LocalMicros) a reply last came back from Redis,
	// 0 before the first (AnsweredWithin).
	answered atomic.Int64
	// aside counts the work in flight that no call waits for
	// (SendAside); asideFailed counts the works that failed, asideLogged
	// is when one was last logged (Done).
	aside       sync.WaitGroup
	asideFailed atomic.Int64
	asideLogged atomic.Int64
	log         *zap.Logger
}

// NewPipes returns the Pipes of c: a *redis.Client or a
// *redis.ClusterClient. Without a fixed clock, it asks Redis's clock and
// opens its connections at once (warmUp).
func NewPipes(c client, o Options) *Pipes {
	onPipeline := o.OnPipeline
	if onPipeline == nil {
		onPipeline = func(int) {}
	}
	cluster, isCluster := c.(*redis.ClusterClient)
	p := &Pipes{client: c, cluster: isCluster, fixed: o.FixedClock, onPipeline: onPipeline, tracer: o.Tracer, log: o.Logger}
	if p.log == nil {
		p.log = zap.NewNop()
	}
	switch {
	case !o.Batch:
	case isCluster:
		p.nodes = newNodeBatchers(p, cluster, o.Flushes)
		p.nodes.onGate = o.OnGate
	default:
		p.batch = newBatcher(p, o.Flushes)
	}
	p.warmClient, _ = c.(*redis.Client)
	p.warmMax = max(DefaultFlushes, p.poolSize())
	if !p.fixed {
		p.warmUp()
	}
	if isCluster {
		p.topo = NewTopology(cluster, func(masters []MasterState) {
			if p.nodes != nil {
				p.nodes.found(masters)
			}
		})
	}
	return p
}

// Send runs wk, merged with the work of concurrent calls if batching is
// on; wk.Err is set if ctx ended first.
func (p *Pipes) Send(ctx context.Context, wk *Work) {
	if p.tracer != nil {
		wk.Caller = callerSpan(ctx) // trace.go
	}
	switch {
	case ctx.Err() != nil:
	case p.batch != nil && p.batch.do(ctx, wk):
		return
	case p.nodes != nil && p.nodes.do(ctx, wk):
		return
	}
	p.exec(ctx, wk)
}

// exec sends the work of every group as one pipeline, fills it, and feeds
// the TIME it carries, if it is time for one, to the clock. It reports
// whether Redis answered (AnsweredWithin).
func (p *Pipes) exec(ctx context.Context, groups ...*Work) bool {
	decisions := 0
	var probe *Probe
	for _, g := range groups {
		decisions += g.Decisions
		if probe == nil {
			probe = g.Clock
		}
	}
	if decisions > 0 {
		p.onPipeline(decisions)
	}
	if probe == nil && !p.fixed && p.redisClock.Due(p.probeEvery()) {
		if p.cluster {
			p.probeAside()
		} else {
			// The pipeline's round trip is a sample of Redis's clock.
			probe = &Probe{}
		}
	}
	var traced func(error)
	if p.tracer != nil {
		ctx, traced = p.pipelineSpan(ctx, groups) // trace.go
	}
	pipe := p.client.Pipeline()
	if probe != nil {
		probe.Queue(ctx, pipe)
		for _, g := range groups {
			if g.Clock != nil {
				*g.Clock = *probe // one TIME answers every call that asked
			}
		}
	}
	for _, g := range groups {
		for _, c := range g.Cmds {
			_ = pipe.Process(ctx, c)
		}
	}
	sent := LocalMicros()
	// Exec's error is also set on each command it concerns; read those.
	_, err := pipe.Exec(ctx)
	if traced != nil {
		traced(err)
	}
	if probe != nil {
		probe.Observe(&p.redisClock, sent, LocalMicros())
	}
	if err != nil && p.topo != nil && nodeFailed(groups) {
		p.topo.Kick() // the map may name a master that is gone
	}
	if err != nil && Unavailable(err) {
		p.warmOne() // its connection is closed: open the next aside
		return false
	}
	p.answered.Store(LocalMicros())
	return true
}

// warmUp asks Redis's clock (Ask), and on a single Redis opens as many
// connections as the client's pool holds (warmOne): pipes just made then
// have an estimate of the clock and their connections open by the time
// the first calls come, or soon after, and a call does not spend its
// deadline on a TIME of its own, a dial and go-redis's handshake before
// its decision's round trip.
func (p *Pipes) warmUp() {
	p.Ask()
	for range p.warmMax - 1 { // Ask's TIME opens one
		p.warmOne()
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
func (p *Pipes) warmOne() {
	if p.warmClient == nil {
		return
	}
	if p.warming.Add(1) > int64(p.warmMax) {
		p.warming.Add(-1)
		return
	}
	p.probes.Add(1)
	go func() {
		defer p.probes.Done()
		defer p.warming.Add(-1)
		if err := p.warmClient.Ping(context.Background()).Err(); err == nil || !Unavailable(err) {
			p.answered.Store(LocalMicros())
		}
	}()
}

// AnsweredWithin reports whether a reply came back from Redis within the
// last d: a pipeline's, however late for its calls, or a connection's
// opened aside (warmOne).
func (p *Pipes) AnsweredWithin(d time.Duration) bool {
	at := p.answered.Load()
	return at != 0 && LocalMicros()-at <= d.Microseconds()
}

// poolSize is the connections the client keeps for each node, 0 when it
// does not say.
func (p *Pipes) poolSize() int {
	switch c := p.client.(type) {
	case *redis.Client:
		return c.Options().PoolSize
	case *redis.ClusterClient:
		return c.Options().PoolSize
	}
	return 0
}

// Clock is the estimate of Redis's clock that the pipelines keep.
func (p *Pipes) Clock() *Clock { return &p.redisClock }

// Topology is a cluster's (its map's reloads, its masters' checks); nil
// on a single Redis.
func (p *Pipes) Topology() *Topology { return p.topo }

// MastersFailingFast is how many masters of a cluster have their gate
// shut now (failfast.go). Zero on a single Redis or without batching.
func (p *Pipes) MastersFailingFast() int {
	if p.nodes == nil {
		return 0
	}
	return p.nodes.shut()
}

// Close waits for the merged pipelines in flight, and the samples of the
// clock and warm-ups out; work sent after it goes in pipelines of its
// own. It does not close the client.
func (p *Pipes) Close() {
	if p.topo != nil {
		p.topo.Close()
	}
	if p.batch != nil {
		p.batch.close()
	}
	if p.nodes != nil {
		p.nodes.close()
	}
	p.probes.Wait()
}

// WaitAside waits for the samples of the clock, the TIME asked and the
// connections opened aside so far: a test that counts or holds pipelines
// calls it first, so that the warm-up's are not among them.
func (p *Pipes) WaitAside() { p.probes.Wait() }

// ForgetRoundTrips forgets the round trips the batcher of a single Redis
// measured: a test that holds a pipeline calls it first, so that the
// warm-up's, slow on a loaded machine, does not count as a far Redis's,
// which would let flushes start beside the held one.
func (p *Pipes) ForgetRoundTrips() {
	if p.batch == nil {
		return
	}
	p.batch.mu.Lock()
	p.batch.rtt = 0
	p.batch.mu.Unlock()
}
