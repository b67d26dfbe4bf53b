package redisdemand

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/envoy-rls/envoy-rls/internal/redispipe"
	"github.com/envoy-rls/envoy-rls/pkg/rlqs/internal/share"
)

// commands is what the store calls: a plain client and a cluster client
// both fit.
type commands interface {
	Pipeline() redis.Pipeliner
	Time(ctx context.Context) *redis.TimeCmd
	HDel(ctx context.Context, key string, fields ...string) *redis.IntCmd
	HGetAll(ctx context.Context, key string) *redis.MapStringStringCmd // Demands (read.go)
}

// Store is a rlqs.DemandStore on Redis (the package does not import rlqs,
// so that rlqs's tests can use it). It is safe for concurrent use.
type Store struct {
	client commands
	prefix string
	// clock is the estimate of Redis's clock, as the Redis store keeps
	// it: instances whose own clocks disagree still agree on which
	// entries are live.
	clock redispipe.Clock
}

// New returns a store whose keys start with prefix (the -redis-key-prefix,
// e.g. "envoy-rls:").
func New(client commands, prefix string) *Store {
	return &Store{client: client, prefix: prefix}
}

// resample is how often, in µs, the store reads Redis's clock again. An
// entry's expiry is several report intervals (seconds) away, so the clock
// needs no more than to agree among instances within milliseconds: a
// sample carried forward on this process's monotonic clock does, for this
// long.
const resample = int64(30 * time.Second / time.Microsecond)

// sample reads Redis's clock in a round trip of its own (the first report).
func (s *Store) sample(ctx context.Context) error {
	sent := redispipe.LocalMicros()
	t, err := s.client.Time(ctx).Result()
	if err != nil {
		return fmt.Errorf("redisdemand: reading Redis's clock: %w", err)
	}
	s.clock.Observe(sent, redispipe.LocalMicros(), t.UnixMicro())
	return nil
}

// Key is the hash that holds bucket's demands.
func (s *Store) Key(bucket string) string {
	sum := sha256.Sum256([]byte(bucket))
	return s.prefix + "rlqs:{" + hex.EncodeToString(sum[:12]) + "}"
}

// now returns the estimate of Redis's clock in milliseconds, sampling it
// first in a round trip of its own if there is none yet, and whether a new
// sample is due.
func (s *Store) now(ctx context.Context) (ms int64, due bool, err error) {
	us, _, ok := s.clock.Now()
	if !ok {
		if err := s.sample(ctx); err != nil {
			return 0, false, err
		}
		us, _, _ = s.clock.Now()
	}
	return us / 1000, s.clock.Due(resample), nil
}

// RecordAll implements rlqs.DemandStore: one pipeline of HSET and PEXPIRE
// per bucket (and, once, a TIME before it).
func (s *Store) RecordAll(ctx context.Context, client string, buckets []string, demands []share.Demand, ttl time.Duration) error {
	ms := max(ttl.Milliseconds(), 1)
	now, due, err := s.now(ctx)
	if err != nil {
		return err
	}
	p := s.client.Pipeline()
	var tc *redis.TimeCmd
	if due {
		tc = p.Time(ctx) // for the next reports: this one has its estimate
	}
	for i, b := range buckets {
		key := s.Key(b)
		p.HSet(ctx, key, client, strconv.FormatInt(now+ms, 10)+" "+encode(demands[i]))
		p.PExpire(ctx, key, time.Duration(ms)*time.Millisecond)
	}
	sent := redispipe.LocalMicros()
	if _, err := p.Exec(ctx); err != nil {
		return fmt.Errorf("redisdemand: recording demands: %w", err)
	}
	if tc != nil {
		s.clock.Observe(sent, redispipe.LocalMicros(), tc.Val().UnixMicro())
	}
	return nil
}

// ReadAll implements rlqs.DemandStore: one pipeline of HGETALL per
// bucket, then one of HDELs of the entries found expired, if any.
func (s *Store) ReadAll(ctx context.Context, buckets []string) ([]map[string]share.Demand, error) {
	now, _, err := s.now(ctx)
	if err != nil {
		return nil, err
	}
	p := s.client.Pipeline()
	reads := make([]*redis.MapStringStringCmd, len(buckets))
	for i, b := range buckets {
		reads[i] = p.HGetAll(ctx, s.Key(b))
	}
	if _, err := p.Exec(ctx); err != nil {
		return nil, fmt.Errorf("redisdemand: reading demands: %w", err)
	}
	out := make([]map[string]share.Demand, len(buckets))
	var del redis.Pipeliner // the HDELs of the entries found expired, if any
	for i, r := range reads {
		var expired []string
		out[i], expired = live(r.Val(), now)
		if len(expired) > 0 {
			if del == nil {
				del = s.client.Pipeline()
			}
			del.HDel(ctx, s.Key(buckets[i]), expired...)
		}
	}
	if del != nil {
		// Best effort: a field left behind is skipped again by the next
		// read, and goes with the hash's own expiry.
		_, _ = del.Exec(ctx)
	}
	return out, nil
}

// live splits a bucket's hash into the live entries' demands and the
// fields whose expiry is not after now. A value it cannot read is
// expired: nothing this package writes looks like it.
func live(all map[string]string, now int64) (map[string]share.Demand, []string) {
	m := make(map[string]share.Demand, len(all))
	var expired []string
	for field, v := range all {
		exp, d, ok := strings.Cut(v, " ")
		e, err := strconv.ParseInt(exp, 10, 64)
		if !ok || err != nil || e <= now {
			expired = append(expired, field)
			continue
		}
		m[field] = decode(d)
	}
	return m, expired
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
