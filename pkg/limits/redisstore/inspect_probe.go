package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

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

// probe sends, in one pipeline, every command the store sends (for the
// limits in force, Options.Needs), and TIME and DEL always, on the
// probe's keys, and the markers' SET … NX GET, which it returns; each
// rule Redis refuses with NOPERM goes in found.Missing. Other errors (out
// of memory, a timeout) are no missing permission: the memory check and
// health say those.
func (in *inspector) probe(ctx context.Context, found *Inspection) []markerRead {
	str, zset, hash := in.probeKey("s"), in.probeKey("z"), in.probeKey("h")
	const ttl = 60000 // ms: the probe's keys go, whatever the user may not do
	p := in.client.Pipeline()
	needs := Needs{Counters: true, Sets: true, Locks: true}
	if in.needs != nil {
		needs = in.needs()
	}
	cmds := []redis.Cmder{p.Do(ctx, "time")}
	if needs.Locks {
		cmds = append(cmds, p.Do(ctx, "set", str, "", "px", ttl))
	}
	if needs.Counters || needs.Locks {
		cmds = append(cmds, p.Do(ctx, "get", str))
	}
	if needs.Counters {
		cmds = append(cmds, p.Do(ctx, "bitfield", str, "overflow", "sat", "incrby", "u63", 0, 0), p.Do(ctx, "pexpire", str, ttl, "nx"))
	}
	if needs.Sets {
		cmds = append(cmds,
			p.Do(ctx, "zadd", zset, 0, "a", 1, "b"),
			p.Do(ctx, "pexpire", zset, ttl),
			p.Do(ctx, "zremrangebyscore", zset, "-inf", -1),
			p.Do(ctx, "zcard", zset),
			p.Do(ctx, "zcount", zset, "-inf", "+inf"),
			p.Do(ctx, "zrange", zset, "+inf", "-inf", "byscore", "rev", "limit", 0, 1, "withscores"),
			p.Do(ctx, "zpopmin", zset, 1),
			p.Do(ctx, "zpopmax", zset, 1),
			p.Do(ctx, "zrem", zset, "a"))
	}
	cmds = append(cmds, p.Do(ctx, "del", str, zset)) // a reset's
	if in.channel != "" {
		// An empty announcement resets nothing (HearResets skips it).
		cmds = append(cmds, p.Do(ctx, "publish", in.channel, ""))
	}
	if in.hashes {
		cmds = append(cmds, p.Do(ctx, "hset", hash, "f", ""), p.Do(ctx, "hgetall", hash), p.Do(ctx, "hdel", hash, "f"))
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	in.token = base64.RawURLEncoding.EncodeToString(b[:])
	var markers []markerRead
	for key, master := range in.markerKeys(ctx) {
		// The service's own, not the limits': a marker refused turns the
		// lost-data check off (lostData says it), not the store.
		m := markerRead{key: key, master: master, cmd: redis.NewStringCmd(ctx, "set", key, in.token, "nx", "get")}
		_ = p.Process(ctx, m.cmd)
		markers = append(markers, m)
	}
	_, _ = p.Exec(ctx) // each command's error is read below
	for _, c := range cmds {
		if rule := in.missingRule(c.Err()); rule != "" && !slices.Contains(found.Missing, rule) {
			found.Missing = append(found.Missing, rule)
		}
	}
	return markers
}

// missingRule is the ACL rule whose absence err, a NOPERM, reports: +cmd,
// ~prefix*, &channel; "" for any other error.
func (in *inspector) missingRule(err error) string {
	if err == nil || !redis.HasErrorPrefix(err, "NOPERM") {
		return ""
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "to run the '"):
		_, name, _ := strings.Cut(msg, "to run the '")
		name, _, _ = strings.Cut(name, "'")
		return "+" + strings.ToLower(name)
	case strings.Contains(msg, "channel"):
		return "&" + in.channel
	case strings.Contains(msg, "key"):
		return "~" + in.prefix + "*"
	}
	return "(" + msg + ")"
}
