// Package redisstore is the Redis implementation of limits.Store, shared by
// every instance of the service.
//
// Each algorithm is one Lua script that mirrors its Go function in package
// limits operation for operation, floating point included, so that the Redis
// store and the embedded store make identical decisions for the same
// sequence of hits. A script reads and writes the one key of its hit, so a
// decision is atomic on a single Redis and on a Redis Cluster alike, and it
// takes the time from the Redis server (TIME), so that instances with skewed
// clocks still agree.
//
// State is kept compactly as a string under the hit's key, with a TTL equal to
// the time after which the state is equivalent to an absent key:
//
//	fixed_window    "window count"        window = floor(now/T)
//	sliding_window  "window count prev"   count of window, count of window-1
//	token_bucket    "tokens stamp"        tokens as %.17g, stamp in µs
//
// A peek (cost 0) or a refused hit writes nothing; a state equivalent to an
// absent key deletes the key.
package redisstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
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
	//go:embed lua/fixed_window.lua
	fixedWindowLua string
	//go:embed lua/sliding_window.lua
	slidingWindowLua string
	//go:embed lua/token_bucket.lua
	tokenBucketLua string
)

// script is one algorithm's Lua source and its SHA1 for EVALSHA.
type script struct {
	src string
	sha string
}

func newScript(body string) script {
	src := preludeLua + "\n" + body
	return script{src: src, sha: redis.NewScript(src).Hash()}
}

// scripts is indexed by limits.Algorithm; the zero script means the
// algorithm has no Redis implementation.
var scripts = func() []script {
	s := make([]script, limits.LeakyBucket+1)
	s[limits.FixedWindow] = newScript(fixedWindowLua)
	s[limits.SlidingWindow] = newScript(slidingWindowLua)
	s[limits.TokenBucket] = newScript(tokenBucketLua)
	return s
}()

// Options tune a Store. The zero value is what production uses.
type Options struct {
	// Clock, when set, supplies the instant of every decision in
	// microseconds since the epoch, passed to the scripts as an argument.
	// It exists for tests, which need fixed instants to compare the store
	// with the Go algorithms. Nil means the Redis server's TIME, as
	// production must: instances with skewed clocks then still agree.
	Clock func() int64
}

// Store decides hits in Redis. It is safe for concurrent use by many
// goroutines, as is the client it wraps.
type Store struct {
	client redisClient
	clock  func() int64
}

// New returns a Store on client: a *redis.Client, a *redis.ClusterClient or
// the client NewClient builds. The Store does not own the client; the caller
// closes it.
func New(client redisClient, opts Options) *Store {
	return &Store{client: client, clock: opts.Clock}
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
// cluster client splits into one round trip per node; each hit runs its
// algorithm's script with EVALSHA. The hits whose node answers NOSCRIPT (a
// restarted or flushed Redis) are sent again with EVAL, which also loads the
// script for the next calls. Each result carries its own error, so a failure
// of one hit (its node down, a key of the wrong type) leaves the others
// decided. Hits beyond len(results) are not decided.
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

	cmds := make([]*redis.Cmd, len(hits))
	pipe := s.client.Pipeline()
	for i, h := range hits {
		results[i] = limits.Result{}
		if err := h.Limit.Validate(); err != nil {
			results[i].Err = fmt.Errorf("redisstore: %w", err)
			continue
		}
		if int(h.Limit.Algorithm) >= len(scripts) || scripts[h.Limit.Algorithm].src == "" {
			results[i].Err = fmt.Errorf("redisstore: %w: %s", errNoScript, h.Limit.Algorithm)
			continue
		}
		cmds[i] = pipe.EvalSha(ctx, scripts[h.Limit.Algorithm].sha, []string{h.Key}, scriptArgs(h, now)...)
	}
	if pipe.Len() == 0 {
		return
	}
	// Exec's error is also set on each command it concerns; read those.
	_, _ = pipe.Exec(ctx)

	var retry []int
	for i, cmd := range cmds {
		if cmd == nil {
			continue
		}
		if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			retry = append(retry, i)
			continue
		}
		results[i] = toResult(cmd, hits[i].Limit.Algorithm)
	}
	if len(retry) == 0 {
		return
	}
	pipe = s.client.Pipeline()
	for _, i := range retry {
		h := hits[i]
		cmds[i] = pipe.Eval(ctx, scripts[h.Limit.Algorithm].src, []string{h.Key}, scriptArgs(h, now)...)
	}
	_, _ = pipe.Exec(ctx)
	for _, i := range retry {
		results[i] = toResult(cmds[i], hits[i].Limit.Algorithm)
	}
}

// scriptArgs is ARGV for a hit: N, T in µs, B, cost, now (empty: TIME).
func scriptArgs(h limits.Hit, now string) []any {
	return []any{h.Limit.Requests, h.Limit.PeriodMicros(), h.Limit.Capacity(), h.Cost, now}
}

// errNoScript is returned for an algorithm that package limits implements
// but this store does not (yet).
var errNoScript = errors.New("no Redis script for algorithm")

// errReply is returned for a script reply that is not {allowed, remaining,
// reset}; it means the script in Redis is not the one this build sent.
var errReply = errors.New("unexpected script reply")

// toResult reads a script's reply {allowed, remaining, reset_us}.
//
// A reply that arrived wins over the command's error: go-redis sets an error
// that strikes the whole pipeline (a deadline that expires while its cluster
// client retries the commands of a node that is down, a connection lost
// halfway through the replies) on every command without one, including those
// already answered. Those scripts ran and charged; their answers are the
// truth, and reporting them as failures would apply the failure mode to hits
// that were decided.
func toResult(cmd *redis.Cmd, alg limits.Algorithm) limits.Result {
	if r, ok := parseReply(cmd.Val()); ok {
		return r
	}
	if err := cmd.Err(); err != nil {
		return limits.Result{Err: fmt.Errorf("redisstore: %s: %w", alg, err)}
	}
	return limits.Result{Err: fmt.Errorf("redisstore: %s: %w: %v", alg, errReply, cmd.Val())}
}

// parseReply reads {allowed, remaining, reset_us}.
func parseReply(v any) (limits.Result, bool) {
	vals, ok := v.([]any)
	if !ok || len(vals) != 3 {
		return limits.Result{}, false
	}
	var n [3]int64
	for i, v := range vals {
		x, ok := v.(int64)
		if !ok {
			return limits.Result{}, false
		}
		n[i] = x
	}
	return limits.Result{
		Allowed:   n[0] == 1,
		Remaining: n[1],
		Reset:     time.Duration(n[2]) * time.Microsecond,
	}, true
}
