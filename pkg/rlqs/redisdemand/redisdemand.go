// Package redisdemand keeps RLQS demands in Redis, so that every envoy-rls
// instance sharing the server divides a bucket's limit among the clients of
// them all.
//
// Each bucket is one hash, a field per client whose value is the entry's
// expiry (the Redis server's clock, in milliseconds) and the demand. One
// script records a client's demand, drops the expired fields and returns
// the rest, in one round trip. The key is a hash tag of its own, so on a
// Cluster a bucket lives on one slot.
package redisdemand

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/envoy-rls/envoy-rls/pkg/rlqs/share"
)

// commands is what the store calls: a plain client and a cluster client
// both fit.
type commands interface {
	redis.Scripter
	Pipeline() redis.Pipeliner
	HDel(ctx context.Context, key string, fields ...string) *redis.IntCmd
}

// Store is a rlqs.DemandStore on Redis (the package does not import rlqs,
// so that rlqs's tests can use it). It is safe for concurrent use.
type Store struct {
	client commands
	prefix string
}

// New returns a store whose keys start with prefix (the -redis-key-prefix,
// e.g. "envoy-rls:").
func New(client commands, prefix string) *Store {
	return &Store{client: client, prefix: prefix}
}

// record runs with the Redis server's clock, so that instances whose clocks
// disagree still agree on which entries are live.
var record = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[3])
redis.call('HSET', KEYS[1], ARGV[1], (now + ttl) .. ' ' .. ARGV[2])
redis.call('PEXPIRE', KEYS[1], ttl)
local all = redis.call('HGETALL', KEYS[1])
local out = {}
for i = 1, #all, 2 do
  local exp, d = string.match(all[i + 1], '^(%d+) (.*)$')
  if exp and tonumber(exp) > now then
    out[#out + 1] = all[i]
    out[#out + 1] = d
  else
    redis.call('HDEL', KEYS[1], all[i])
  end
end
return out
`)

// Key is the hash that holds bucket's demands.
func (s *Store) Key(bucket string) string {
	sum := sha256.Sum256([]byte(bucket))
	return s.prefix + "rlqs:{" + hex.EncodeToString(sum[:12]) + "}"
}

// RecordAll implements rlqs.DemandStore: one pipeline of EVALSHA, the
// script loaded and the pipeline sent again if Redis did not know it.
func (s *Store) RecordAll(ctx context.Context, client string, buckets []string, demands []share.Demand, ttl time.Duration) ([]map[string]share.Demand, error) {
	ms := ttl.Milliseconds()
	if ms < 1 {
		ms = 1
	}
	cmds, err := s.pipeline(ctx, client, buckets, demands, ms)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		if err = record.Load(ctx, s.client).Err(); err == nil {
			cmds, err = s.pipeline(ctx, client, buckets, demands, ms)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("redisdemand: recording demands: %w", err)
	}
	out := make([]map[string]share.Demand, len(buckets))
	for i, cmd := range cmds {
		v, err := cmd.StringSlice()
		if err != nil || len(v)%2 != 0 {
			return nil, fmt.Errorf("redisdemand: reading demands: %v", err)
		}
		m := make(map[string]share.Demand, len(v)/2)
		for j := 0; j < len(v); j += 2 {
			m[v[j]] = decode(v[j+1])
		}
		out[i] = m
	}
	return out, nil
}

func (s *Store) pipeline(ctx context.Context, client string, buckets []string, demands []share.Demand, ms int64) ([]*redis.Cmd, error) {
	p := s.client.Pipeline()
	cmds := make([]*redis.Cmd, len(buckets))
	for i, b := range buckets {
		cmds[i] = record.EvalSha(ctx, p, []string{s.Key(b)}, client, encode(demands[i]), ms)
	}
	_, err := p.Exec(ctx)
	return cmds, err
}

// Forget implements rlqs.DemandStore.
func (s *Store) Forget(ctx context.Context, bucket, client string) error {
	if err := s.client.HDel(ctx, s.Key(bucket), client).Err(); err != nil {
		return fmt.Errorf("redisdemand: forgetting a demand: %w", err)
	}
	return nil
}

// encode writes a demand as its rate, or "?" when it is unknown.
func encode(d share.Demand) string {
	if !d.Known {
		return "?"
	}
	return strconv.FormatFloat(d.Rate, 'g', -1, 64)
}

// decode reads what encode wrote; anything else is an unknown demand (an
// equal share), never an error that would stop the division.
func decode(s string) share.Demand {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return share.Demand{}
	}
	return share.Demand{Rate: v, Known: true}
}
