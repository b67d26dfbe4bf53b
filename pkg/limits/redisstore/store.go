// Package redisstore is the Redis implementation of limits.Store, shared by
// every instance of the service.
//
// Each algorithm is a Lua function that mirrors its Go function in package
// limits operation for operation, floating point included, so that the Redis
// store and the embedded store make identical decisions for the same
// sequence of hits. A function decides without writing and hands back the
// write that would store its new state; the tail of the script (lua/run.lua)
// applies the writes once every hit of the call is decided. There is one
// script per algorithm for a single hit, which reads and writes the one key of
// its hit, and one joint script, with every algorithm, for a run of joint
// hits (the limits of one descriptor), whose keys share a hash tag. So a
// decision is atomic on a single Redis and on a Redis Cluster alike. On a
// single Redis, where keys need not share a slot, the runs of concurrent
// calls go together in one batch script (lua/batch.lua), so that Redis pays
// for one script call per merged pipeline rather than one per hit. The
// scripts take the time from the Redis server (TIME), so that instances with
// skewed clocks still agree.
//
// State is kept compactly under the hit's key, with a TTL equal to the time
// after which the state is equivalent to an absent key (rounded up to the
// millisecond):
//
//	fixed_window    string "window count"        window = floor(now/T)
//	sliding_window  string "window count prev"   counts of window and window-1
//	token_bucket    string "tokens stamp"        tokens as %.17g, stamp in µs
//	leaky_bucket    string "drain"               µs as %.17g (fractional)
//	sliding_log     sorted set, one entry per allowed hit: score = its instant
//	                in µs, member = L start ":" cost, where start is the sum
//	                of the costs before it and L a letter for the length of
//	                start ('a' = 1 digit)
//
// A sliding log's entries are contiguous ranges [start, start+cost), so the
// total inside the window is the end of the newest entry minus the start of
// the oldest one after now−T: two lookups whatever the size of the set, and
// no second key to keep in step with it (nor to keep in its slot). start also
// makes every member unique, and its length letter keeps the entries of one
// instant in the order of the Go log. Entries that have left the window are
// removed when the key is next written; a refusal's wait and a refund walk
// the set from the oldest or the newest entry, a page at a time.
//
// A peek (cost 0) or a refused hit writes nothing (unless its limit counts
// refused hits); a state equivalent to an absent key deletes the key.
//
// The scripts are tested on Redis 7.0 and later; the sliding log's ZRANGE
// BYSCORE … LIMIT needs 6.2 at least.
package redisstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
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
	//go:embed lua/batch.lua
	batchLua string
	//go:embed lua/fixed_window.lua
	fixedWindowLua string
	//go:embed lua/sliding_window.lua
	slidingWindowLua string
	//go:embed lua/token_bucket.lua
	tokenBucketLua string
	//go:embed lua/sliding_log.lua
	slidingLogLua string
	//go:embed lua/leaky_bucket.lua
	leakyBucketLua string
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

// algorithmLua is each algorithm's Lua function, indexed by limits.Algorithm.
var algorithmLua = [...]string{
	limits.FixedWindow:   fixedWindowLua,
	limits.SlidingWindow: slidingWindowLua,
	limits.TokenBucket:   tokenBucketLua,
	limits.SlidingLog:    slidingLogLua,
	limits.LeakyBucket:   leakyBucketLua,
}

var (
	// scripts holds the single-hit script of each algorithm, indexed by
	// limits.Algorithm: each defines only the function it runs, and reads
	// on its own.
	scripts = func() []script {
		s := make([]script, len(algorithmLua))
		for a, src := range algorithmLua {
			s[a] = newScript(singleLua, src)
		}
		return s
	}()
	// jointScript decides a run of joint hits, whatever their algorithms.
	jointScript = newScript(singleLua, algorithmLua[:]...)
	// batchScript decides many runs, whatever their algorithms, on a
	// single Redis.
	batchScript = newScript(batchLua, algorithmLua[:]...)
)

// Options tune a Store. The zero value is what production uses.
type Options struct {
	// Clock, when set, supplies the instant of every decision in
	// microseconds since the epoch, passed to the scripts as an argument.
	// It exists for tests, which need fixed instants to compare the store
	// with the Go algorithms. Nil means the Redis server's TIME, as
	// production must: instances with skewed clocks then still agree.
	Clock func() int64
	// Batching chooses whether concurrent calls share pipelines (see
	// Batching); the zero value merges them on a single Redis only.
	Batching Batching
	// Flushes bounds the merged pipelines in flight at once; zero means
	// DefaultFlushes.
	Flushes int
	// OnPipeline, if set, is told how many script runs each pipeline sent
	// to Redis carried (a metric of how well calls are merged). It must be
	// fast and safe for concurrent use.
	OnPipeline func(runs int)
}

// Store decides hits in Redis. It is safe for concurrent use by many
// goroutines, as is the client it wraps.
type Store struct {
	client     redisClient
	clock      func() int64
	batch      *batcher // nil: one pipeline per call
	onPipeline func(runs int)
}

// New returns a Store on client: a *redis.Client, a *redis.ClusterClient or
// the client NewClient builds. The Store does not own the client; the caller
// closes it, after Close.
func New(client redisClient, opts Options) *Store {
	onPipeline := opts.OnPipeline
	if onPipeline == nil {
		onPipeline = func(int) {}
	}
	s := &Store{client: client, clock: opts.Clock, onPipeline: onPipeline}
	_, cluster := client.(*redis.ClusterClient)
	if opts.Batching == BatchOn || opts.Batching == BatchAuto && !cluster {
		s.batch = newBatcher(client, opts.Flushes, cluster, onPipeline)
	}
	return s
}

// Close waits for the merged pipelines in flight; calls after it send
// pipelines of their own. It does not close the client.
func (s *Store) Close() {
	if s.batch != nil {
		s.batch.close()
	}
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
// ends first returns at once, its hits failed with ctx's error. A hit on its
// own runs its algorithm's script; a run of joint hits (Hit.Joint chains a
// hit to the next, up to the first hit without it) runs the joint script
// once, with all its keys, which decides every limit of the run and charges
// all of them or, if any refuses, only those that count refused hits. The
// scripts go with EVALSHA; those whose node answers NOSCRIPT (a restarted or
// flushed Redis) are sent again with EVAL, which also loads the script for
// the next calls.
//
// The keys of a joint run must share a hash tag (Redis Cluster refuses the
// script otherwise) and differ: a run that repeats a key is not sent, every
// hit of it failed with limits.ErrRepeatedKey, as the embedded store does.
//
// Each result carries its own error, so a failure of one script (its node
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
	now := ""
	if s.clock != nil {
		now = strconv.FormatInt(s.clock(), 10)
	}

	runs := make([]run, 0, len(hits))
	for first := 0; first < len(hits); {
		last := first
		for last < len(hits)-1 && hits[last].Joint {
			last++
		}
		r := run{first: first, last: last}
		first = last + 1
		if err := r.prepare(hits, now); err != nil {
			for i := r.first; i <= r.last; i++ {
				results[i] = limits.Result{Err: err}
			}
			continue
		}
		runs = append(runs, r)
	}
	if len(runs) == 0 {
		return
	}
	s.send(ctx, runs)

	var retry []int
	for k := range runs {
		r := &runs[k]
		if redis.HasErrorPrefix(r.reply.err, "NOSCRIPT") {
			retry = append(retry, k)
			continue
		}
		r.results(hits, results)
	}
	if len(retry) == 0 {
		return
	}
	pipe := s.client.Pipeline()
	cmds := make([]*redis.Cmd, len(retry))
	for i, k := range retry {
		r := &runs[k]
		cmds[i] = pipe.Eval(ctx, r.script.src, r.keys, r.args()...)
	}
	_, _ = pipe.Exec(ctx)
	for i, k := range retry {
		runs[k].reply = replyOf(cmds[i])
		runs[k].results(hits, results)
	}
}

// send runs the scripts of runs with EVALSHA, merged with those of
// concurrent calls if batching is on, and sets the reply of each run.
func (s *Store) send(ctx context.Context, runs []run) {
	if s.batch != nil && ctx.Err() == nil {
		if replies := s.batch.do(ctx, runs); replies != nil {
			for k := range runs {
				runs[k].reply = replies[k]
			}
			return
		}
	}
	s.onPipeline(len(runs))
	for k, cmd := range evalEach(ctx, s.client, runs) {
		runs[k].reply = replyOf(cmd)
	}
}

// evalEach sends the runs of groups, each with its own script, as one
// pipeline (a cluster client splits it by node), and returns their
// commands in order. A NOSCRIPT reply is left to the caller.
func evalEach(ctx context.Context, c redisClient, groups ...[]run) []*redis.Cmd {
	n := 0
	for _, g := range groups {
		n += len(g)
	}
	pipe := c.Pipeline()
	cmds := make([]*redis.Cmd, 0, n)
	for _, g := range groups {
		for k := range g {
			cmds = append(cmds, pipe.EvalSha(ctx, g[k].script.sha, g[k].keys, g[k].args()...))
		}
	}
	// Exec's error is also set on each command it concerns; read those.
	_, _ = pipe.Exec(ctx)
	return cmds
}

// reply is what Redis answered to one run: a value, or an error.
type reply struct {
	val any
	err error
}

func replyOf(cmd *redis.Cmd) reply { return reply{cmd.Val(), cmd.Err()} }

// argsPerHit is the number of ARGV fields of each hit in a run's own script,
// after now (see lua/run.lua).
const argsPerHit = 7

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
	limit    scriptLimit
	cost     int64
	maxDelay int64 // microseconds, 0: no bound
}

// scriptLimit is what a script needs of a limit. The batch script takes it
// once per flush for all the hits of that limit.
type scriptLimit struct {
	algorithm    limits.Algorithm
	n, t, b      int64 // N, T in microseconds, limits.Limit.Capacity
	countRefused bool
}

// prepare validates the run's limits, chooses its script and copies what
// the script needs of its hits.
func (r *run) prepare(hits []limits.Hit, now string) error {
	joint := r.last > r.first
	if k := limits.RepeatedKey(hits[r.first : r.last+1]); k >= 0 {
		return fmt.Errorf("redisstore: joint run of %d hits: hit %d (%s): %w", r.last-r.first+1, k, hits[r.first+k].Key, limits.ErrRepeatedKey)
	}
	for i := r.first; i <= r.last; i++ {
		l := hits[i].Limit
		err := l.Validate()
		if err == nil && (int(l.Algorithm) >= len(algorithmLua) || algorithmLua[l.Algorithm] == "") {
			err = fmt.Errorf("%w: %s", errNoScript, l.Algorithm)
		}
		switch {
		case err != nil && joint:
			return fmt.Errorf("redisstore: joint run of %d hits: hit %d (%s): %w", r.last-r.first+1, i-r.first, hits[i].Key, err)
		case err != nil:
			return fmt.Errorf("redisstore: %w", err)
		}
	}
	if joint {
		r.script = &jointScript
	} else {
		r.script = &scripts[hits[r.first].Limit.Algorithm]
	}
	n := r.last - r.first + 1
	r.now = now
	r.keys = make([]string, n)
	r.hits = make([]runHit, n)
	for i, h := range hits[r.first : r.last+1] {
		l := h.Limit
		r.keys[i] = h.Key
		r.hits[i] = runHit{
			limit:    scriptLimit{l.Algorithm, l.Requests, l.PeriodMicros(), l.Capacity(), l.CountRefused},
			cost:     h.Cost,
			maxDelay: h.MaxDelayMicros(),
		}
	}
	return nil
}

// args returns the ARGV of the run's own script: now, then argsPerHit
// fields per hit. Built only for a run that goes with its own script (a
// lone call, a cluster, a NOSCRIPT retry); a merged flush sends its runs in
// the batch script's format instead (batch.go).
func (r *run) args() []any {
	args := make([]any, 0, 1+argsPerHit*len(r.hits))
	args = append(args, r.now)
	for _, h := range r.hits {
		args = append(args, h.limit.algorithm.ShortName(), h.limit.n, h.limit.t, h.limit.b,
			h.cost, h.maxDelay, h.limit.countRefusedArg())
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
func (r *run) results(hits []limits.Hit, results []limits.Result) {
	out := results[r.first : r.last+1]
	if parseReply(r.reply.val, out) {
		return
	}
	what := hits[r.first].Limit.Algorithm.String()
	if r.last > r.first {
		what = fmt.Sprintf("joint run of %d hits", len(out))
	}
	err := r.reply.err
	switch {
	case err != nil && unavailable(err):
		err = fmt.Errorf("redisstore: %s: %w: %w", what, limits.ErrUnavailable, err)
	case err != nil:
		err = fmt.Errorf("redisstore: %s: %w", what, err)
	default:
		err = fmt.Errorf("redisstore: %s: %w: %v", what, errReply, r.reply.val)
	}
	for i := range out {
		out[i] = limits.Result{Err: err}
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
// not.
func parseReply(v any, out []limits.Result) bool {
	vals, ok := v.([]any)
	if !ok || len(vals) != replyPerHit*len(out) {
		return false
	}
	for _, v := range vals {
		if _, ok := v.(int64); !ok {
			return false
		}
	}
	for i := range out {
		n := vals[replyPerHit*i:]
		out[i] = limits.Result{
			Allowed:    n[0].(int64) == 1,
			Remaining:  n[1].(int64),
			RetryAfter: time.Duration(n[2].(int64)) * time.Microsecond,
			ResetAfter: time.Duration(n[3].(int64)) * time.Microsecond,
			Delay:      time.Duration(n[4].(int64)) * time.Microsecond,
		}
	}
	return true
}
