package redisstore

import (
	"github.com/envoy-rls/envoy-rls/internal/redisinspect"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// Inspection is what the last inspection of Redis found (package
// redisinspect runs them, at each Ping, for what no call reports).
type Inspection = redisinspect.Inspection

// MemoryFullError is Ping's error while Redis is out of memory under
// noeviction (redisinspect.MemoryFullError).
type MemoryFullError = redisinspect.MemoryFullError

// Inspection is what the last inspection of Redis found (Ping runs them).
func (s *Store) Inspection() Inspection { return s.inspect.Last() }

// Needs are the kinds of state the configured limits keep in Redis: the
// permissions probe checks the commands of those only, so that a user
// given no more than its limits use is not reported short.
type Needs struct {
	// Counters: windows and buckets (BITFIELD, GET, PEXPIRE).
	Counters bool
	// Sets: sliding logs and concurrency limits (ZADD and the sorted set
	// commands, PEXPIRE).
	Sets bool
	// Locks: lockouts, block_for (SET, GET, DEL).
	Locks bool
}

// NeedsOf is what the limits keep in Redis.
func NeedsOf(ls ...limits.Limit) Needs {
	var n Needs
	for _, l := range ls {
		switch {
		case isWindow(l.Algorithm) || isBucket(l.Algorithm):
			n.Counters = true
		case l.Algorithm == limits.SlidingLog || l.Algorithm == limits.Concurrency:
			n.Sets = true
		}
		n.Locks = n.Locks || l.BlockFor > 0
	}
	return n
}

// probeCmds are the commands the permissions probe sends, each as its
// arguments: every command the store sends for the limits in force
// (Options.Needs; those of every kind without it), and TIME and DEL
// always, on the probe's keys (redisinspect.ProbeKey).
func (s *Store) probeCmds() [][]any {
	str, zset, hash := redisinspect.ProbeKey(s.prefix, "s"), redisinspect.ProbeKey(s.prefix, "z"), redisinspect.ProbeKey(s.prefix, "h")
	const ttl = 60000 // ms: the probe's keys go, whatever the user may not do
	needs := Needs{Counters: true, Sets: true, Locks: true}
	if s.needs != nil {
		needs = s.needs()
	}
	cmds := [][]any{{"time"}}
	if needs.Locks {
		cmds = append(cmds, []any{"set", str, "", "px", ttl})
	}
	if needs.Counters || needs.Locks {
		cmds = append(cmds, []any{"get", str})
	}
	if needs.Counters {
		cmds = append(cmds, []any{"bitfield", str, "overflow", "sat", "incrby", "u63", 0, 0}, []any{"pexpire", str, ttl, "nx"})
	}
	if needs.Sets {
		cmds = append(cmds,
			[]any{"zadd", zset, 0, "a", 1, "b"},
			[]any{"pexpire", zset, ttl},
			[]any{"zremrangebyscore", zset, "-inf", -1},
			[]any{"zcard", zset},
			[]any{"zcount", zset, "-inf", "+inf"},
			[]any{"zrange", zset, "+inf", "-inf", "byscore", "rev", "limit", 0, 1, "withscores"},
			[]any{"zpopmin", zset, 1},
			[]any{"zpopmax", zset, 1},
			[]any{"zrem", zset, "a"})
	}
	cmds = append(cmds, []any{"del", str, zset}) // a reset's
	if s.resetChannel != "" {
		// An empty announcement resets nothing (HearResets skips it).
		cmds = append(cmds, []any{"publish", s.resetChannel, ""})
	}
	if s.rlqs {
		cmds = append(cmds, []any{"hset", hash, "f", ""}, []any{"hgetall", hash}, []any{"hdel", hash, "f"})
	}
	return cmds
}
