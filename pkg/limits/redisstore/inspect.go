package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// Redis fails the service in ways that no call reports: a user without a
// command the limits need (every call then takes the failure mode, found
// by the first request, not at the start), an eviction policy that drops
// used-up quotas, locks and held slots to make room (every key the
// service writes has a TTL, so volatile-* evicts them as allkeys-* does),
// a noeviction Redis whose memory is full (it refuses every charge), and
// a Redis that lost its data (FLUSHALL, a restart without persistence:
// every quota, lock and slot back to zero). The store inspects Redis for
// them at the start and at each health check (Ping), at most once every
// inspectEvery, never on a decision's path:
//
//   - permissions: a probe sends every command the store sends, on keys
//     of its own under the key prefix (probeKey) and on the reset
//     channel, and reads which Redis refuses with NOPERM: Ping is then a
//     *RefusedError that names the ACL rules to add (Permissions);
//   - memory: INFO (of every master, on a cluster) gives maxmemory,
//     maxmemory-policy, used_memory and evicted_keys; a policy that can
//     evict is said in a warning, evicted keys are counted, and a full
//     noeviction Redis makes Ping a *MemoryFullError;
//   - lost data: a marker key without a TTL (markerKeys; on a cluster one
//     per master, in its slots), which the store writes if absent and
//     reads back in the same command (SET … NX GET): gone, or holding
//     another instance's new token, means Redis lost what it held; INFO's
//     run_id tells a restart from a flush.
//
// A Redis that refuses INFO (a managed Redis may) is said once, and its
// checks are left out; nothing of it ever fails the start.

// inspectEvery is the least time between two inspections: the health
// check runs every 2 s, and each /healthz answers from the last.
const inspectEvery = 1500 * time.Millisecond

// evictedSayEvery is the least time between two warnings of keys evicted.
const evictedSayEvery = time.Minute

// Inspection is what the last inspection of Redis found.
type Inspection struct {
	// Missing are the ACL rules the Redis user lacks for what the store
	// sends (+command, ~keys, &channel), in the order the probe met them;
	// none when it has them all.
	Missing []string
	// Policy is maxmemory-policy, MaxMemory maxmemory and UsedMemory
	// used_memory in bytes (of the fullest master, on a cluster); Policy is
	// "" when INFO could not be read.
	Policy                string
	MaxMemory, UsedMemory int64
	// Evicted is Redis's evicted_keys, summed over the masters.
	Evicted int64
	// Lost is how many times the store found that Redis had lost its data.
	Lost uint64
}

// Evicts reports whether Redis may evict the service's keys: a maxmemory,
// and a policy other than noeviction.
func (in Inspection) Evicts() bool {
	return in.MaxMemory > 0 && in.Policy != "" && in.Policy != "noeviction"
}

// Full reports whether Redis refuses writes for memory: noeviction with
// used_memory at maxmemory.
func (in Inspection) Full() bool {
	return in.MaxMemory > 0 && in.Policy == "noeviction" && in.UsedMemory >= in.MaxMemory
}

// MemoryFullError is Ping's error while Redis is out of memory under
// noeviction: it answers, but refuses every charge, so every hit takes
// its limit's failure mode. Degraded, not down: a restart of the service
// would not help.
type MemoryFullError struct{ Used, Max int64 }

func (e *MemoryFullError) Error() string {
	return fmt.Sprintf("redisstore: Redis is out of memory (used_memory %d of maxmemory %d, maxmemory-policy noeviction): it refuses every charge, so every hit takes its limit's failure mode; raise maxmemory, or give the service a Redis of its own", e.Used, e.Max)
}

// Degraded tells package httpapi's health that the store answers, but
// not as it should.
func (e *MemoryFullError) Degraded() bool { return true }

// inspector runs the inspections of a Store. It is safe for concurrent
// use: one inspection runs at a time, and a Ping that finds one running,
// or one done less than every ago, answers what the last found.
type inspector struct {
	client  redisClient
	log     *zap.Logger
	user    string // the ACL user, for the rule to add
	prefix  string // the key prefix: the probe's keys and the marker
	channel string // the reset channel, "" for none
	hashes  bool   // the RLQS demands are kept in this Redis too
	needs   func() Needs
	every   time.Duration
	// token is the marker's value if this inspection writes it: new at
	// each, so that a marker written again differs from the one it
	// replaces, whoever writes it.
	token string

	mu sync.Mutex
	at time.Time // when the last inspection ran; mu is held
	// health is what the last inspection found for health: nil, a
	// *RefusedError or a *MemoryFullError, read without mu by a Ping
	// that finds one running.
	health atomic.Pointer[healthFound]

	found atomic.Pointer[Inspection]
	lost  atomic.Uint64

	// What the inspections saw, and what they said, so that each finding
	// is logged once; mu is held.
	markers    map[string]string // each marker's value at the last inspection, by key
	runIDs     map[string]string // by master
	keys       int64             // the keys Redis held at the last inspection
	saidInfo   bool              // INFO refused, said
	saidPolicy string            // the evicting policy said, "" for none
	saidFull   bool
	saidMarker bool      // the marker refused, said
	infoRead   bool      // an INFO was read: evicted is known
	evicted    int64     // evicted_keys at the last INFO read
	evictedAt  time.Time // when keys evicted were last said
}

func newInspector(client redisClient, opts Options) *inspector {
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	in := &inspector{client: client, log: log, user: userOf(client), prefix: opts.KeyPrefix, channel: opts.ResetChannel,
		hashes: opts.RLQS, needs: opts.Needs, every: inspectEvery, runIDs: map[string]string{}, markers: map[string]string{}}
	in.found.Store(&Inspection{})
	in.health.Store(&healthFound{})
	return in
}

// userOf is the client's ACL user: "default" when it names none.
func userOf(client redisClient) string {
	u := ""
	switch c := client.(type) {
	case *redis.Client:
		u = c.Options().Username
	case *redis.ClusterClient:
		u = c.Options().Username
	}
	if u == "" {
		return "default"
	}
	return u
}

// Inspection is what the last inspection of Redis found (Ping runs them).
func (s *Store) Inspection() Inspection {
	in := *s.inspect.found.Load()
	in.Lost = s.inspect.lost.Load()
	return in
}

// check inspects Redis if the last inspection is older than every, and
// returns what it found for health.
func (in *inspector) check(ctx context.Context) error {
	if !in.mu.TryLock() {
		// One is running: a health check answers without waiting for it.
		return in.health.Load().err
	}
	defer in.mu.Unlock()
	if time.Since(in.at) < in.every {
		return in.health.Load().err
	}
	in.at = time.Now()
	found := Inspection{}
	var markers []markerRead
	if in.prefix != "" { // the store's keys unknown: nothing written
		markers = in.probe(ctx, &found)
	}
	nodes, infoErr := in.infos(ctx)
	in.memory(&found, nodes, infoErr)
	in.lostData(markers, nodes, infoErr == nil)
	in.found.Store(&found)
	var err error
	switch {
	case len(found.Missing) > 0:
		rules := strings.Join(found.Missing, " ")
		err = &RefusedError{Setting: Permissions, Err: fmt.Errorf("the user %s lacks %s: add them with ACL SETUSER %s %s (docs/operations.md, What Redis must be)", in.user, rules, in.user, rules)}
	case found.Full():
		err = &MemoryFullError{Used: found.UsedMemory, Max: found.MaxMemory}
	}
	in.health.Store(&healthFound{err})
	return err
}

// healthFound is what an inspection found for health.
type healthFound struct{ err error }

// probeKey is a key of the probe's own, under the prefix, of the hash
// tag that keeps the probe's keys on one master.
func (in *inspector) probeKey(kind string) string { return in.prefix + "{probe}:" + kind }

// markerRead is a marker key's SET … NX GET, and the master it is on
// ("" on a single Redis).
type markerRead struct {
	key, master string
	cmd         *redis.StringCmd
}

// markerKeys are the keys whose disappearance tells that Redis lost its
// data, by master: under the prefix, without a TTL, holding the token of
// the store that wrote it. A single Redis has one, PREFIXmarker; a
// cluster one per master, PREFIXmarker{mN}, N the first whose hash slot
// is in the master's first range of slots (so the same after a
// failover), since a master may lose its data alone.
func (in *inspector) markerKeys(ctx context.Context) map[string]string {
	c, ok := in.client.(*redis.ClusterClient)
	if !ok {
		return map[string]string{in.prefix + "marker": ""}
	}
	//lint:ignore SA1019 go-redis maps the cluster with CLUSTER SLOTS itself, which the user has; CLUSTER SHARDS would need one more ACL rule
	ranges, err := c.ClusterSlots(ctx).Result()
	if err != nil {
		return nil // the next inspection tells
	}
	keys := map[string]string{}
	seen := map[string]bool{}
	for _, r := range ranges {
		if len(r.Nodes) == 0 || seen[r.Nodes[0].Addr] {
			continue
		}
		seen[r.Nodes[0].Addr] = true
		for i := 0; ; i++ {
			tag := "m" + strconv.Itoa(i)
			if slot := int(crc16(tag) % 16384); slot >= int(r.Start) && slot <= int(r.End) {
				keys[in.prefix+"marker{"+tag+"}"] = r.Nodes[0].Addr
				break
			}
		}
	}
	return keys
}

// crc16 is Redis Cluster's hash of a key's tag (CRC-16/XMODEM), whose
// value modulo 16384 is its slot.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

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

// nodeInfo is what INFO says of one master.
type nodeInfo struct {
	addr                  string
	runID, policy         string
	maxMemory, usedMemory int64
	evicted, keys         int64
}

// infos reads INFO of Redis, of every master on a cluster.
func (in *inspector) infos(ctx context.Context) ([]nodeInfo, error) {
	read := func(ctx context.Context, c *redis.Client) (nodeInfo, error) {
		v, err := c.Info(ctx, "server", "memory", "stats", "keyspace").Result()
		if err != nil {
			return nodeInfo{}, err
		}
		return parseInfo(c.Options().Addr, v), nil
	}
	switch c := in.client.(type) {
	case *redis.ClusterClient:
		var mu sync.Mutex
		var nodes []nodeInfo
		err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			n, err := read(ctx, m)
			if err != nil {
				return err
			}
			mu.Lock()
			nodes = append(nodes, n)
			mu.Unlock()
			return nil
		})
		return nodes, err
	case *redis.Client:
		n, err := read(ctx, c)
		return []nodeInfo{n}, err
	}
	return nil, errors.New("a client that cannot read INFO")
}

// parseInfo reads the fields of INFO the inspection uses.
func parseInfo(addr, info string) nodeInfo {
	n := nodeInfo{addr: addr}
	num := func(v string) int64 { x, _ := strconv.ParseInt(v, 10, 64); return x }
	for line := range strings.Lines(info) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch {
		case k == "run_id":
			n.runID = v
		case k == "maxmemory":
			n.maxMemory = num(v)
		case k == "maxmemory_policy":
			n.policy = v
		case k == "used_memory":
			n.usedMemory = num(v)
		case k == "evicted_keys":
			n.evicted = num(v)
		case strings.HasPrefix(k, "db"):
			keys, _, _ := strings.Cut(strings.TrimPrefix(v, "keys="), ",")
			n.keys += num(keys)
		}
	}
	return n
}

// memory fills found from the masters' INFO, and says what it finds once:
// INFO refused, a policy that evicts, keys evicted, memory full; mu is
// held.
func (in *inspector) memory(found *Inspection, nodes []nodeInfo, infoErr error) {
	if infoErr != nil {
		var refused redis.Error // an answer, not an outage
		if !in.saidInfo && errors.As(infoErr, &refused) {
			in.saidInfo = true
			in.log.Warn("Redis refuses INFO: the checks of its eviction policy and memory are off (a managed Redis may forbid it; +info in the user's ACL rules turns them on)", zap.Error(infoErr))
		}
		// What the last INFO read said stands until the next is read.
		last := in.found.Load()
		found.Policy, found.MaxMemory, found.UsedMemory, found.Evicted = last.Policy, last.MaxMemory, last.UsedMemory, last.Evicted
		return
	}
	for _, n := range nodes {
		found.Evicted += n.evicted
		if n.maxMemory > 0 && (found.MaxMemory == 0 || n.usedMemory*found.MaxMemory > found.UsedMemory*n.maxMemory) {
			found.MaxMemory, found.UsedMemory = n.maxMemory, n.usedMemory
		}
		if found.Policy == "" || n.policy != "noeviction" {
			found.Policy = n.policy
		}
	}
	if found.MaxMemory == 0 && len(nodes) > 0 {
		found.UsedMemory = nodes[0].usedMemory
	}
	switch policy := found.Policy; {
	case found.Evicts() && policy != in.saidPolicy:
		in.saidPolicy = policy
		in.log.Warn("Redis may evict the service's keys: a limit, a lockout or a held slot evicted restarts from nothing; every key the service writes has a TTL, so volatile-* policies evict them too. Set maxmemory-policy noeviction, or give the service a Redis of its own",
			zap.String("maxmemory-policy", policy), zap.Int64("maxmemory", found.MaxMemory), zap.String("safe", "noeviction"))
	case !found.Evicts() && in.saidPolicy != "":
		in.saidPolicy = ""
		in.log.Info("Redis no longer evicts the service's keys", zap.String("maxmemory-policy", policy), zap.Int64("maxmemory", found.MaxMemory))
	}
	if in.infoRead && found.Evicted > in.evicted && time.Since(in.evictedAt) >= evictedSayEvery {
		in.evictedAt = time.Now()
		in.log.Warn("Redis evicted keys: limits, lockouts or held slots may have restarted from nothing",
			zap.Int64("evicted_keys", found.Evicted), zap.Int64("since_last_check", found.Evicted-in.evicted), zap.String("maxmemory-policy", found.Policy))
	}
	in.evicted, in.infoRead = found.Evicted, true
	switch full := found.Full(); {
	case full && !in.saidFull:
		in.log.Error("Redis is out of memory under noeviction: it refuses every charge, so every hit takes its limit's failure mode; raise maxmemory, or give the service a Redis of its own",
			zap.Int64("used_memory", found.UsedMemory), zap.Int64("maxmemory", found.MaxMemory))
	case !full && in.saidFull:
		in.log.Info("Redis has memory again: charges are decided again", zap.Int64("used_memory", found.UsedMemory), zap.Int64("maxmemory", found.MaxMemory))
	}
	in.saidFull = found.Full()
}

// lostData reads the markers' SET … NX GET and the masters' run_id: a
// marker gone (absent, or another store's new token) means Redis, or the
// master that held it, lost what it held, which is counted and said
// once; a run_id changed with the markers kept, a restart that kept the
// data. mu is held.
func (in *inspector) lostData(markers []markerRead, nodes []nodeInfo, infoOK bool) {
	restarted := ""
	keys := int64(0)
	if infoOK {
		for _, n := range nodes {
			keys += n.keys
			if was := in.runIDs[n.addr]; was != "" && was != n.runID {
				restarted = n.addr
			}
			in.runIDs[n.addr] = n.runID
		}
	}
	before := in.keys
	if infoOK {
		in.keys = keys
	}
	lost, where := false, ""
	for _, m := range markers {
		v, err := m.cmd.Result()
		switch {
		case errors.Is(err, redis.Nil):
			v = in.token // absent: this store's token is the marker now
		case err != nil:
			var refused redis.Error
			if errors.As(err, &refused) && !in.saidMarker {
				in.saidMarker = true
				in.log.Warn("Redis refuses the marker key: the check of lost data is off (+set and the keys under the prefix turn it on)", zap.String("marker", m.key), zap.Error(err))
			}
			continue // not read: the next inspection tells
		}
		if was := in.markers[m.key]; was != "" && v != was {
			lost, where = true, m.master
		}
		in.markers[m.key] = v
	}
	switch {
	case lost:
		in.lost.Add(1)
		in.log.Error("Redis lost the service's state: its marker key is gone (FLUSHALL or FLUSHDB, a restart without persistence, a failover to an empty replica); every limit's counts, every lockout and every held slot restart from nothing",
			zap.Int64("keys_before", before), zap.Int64("keys_now", keys), zap.String("master", where),
			zap.Bool("restarted", restarted != ""))
	case restarted != "":
		in.log.Info("Redis restarted and kept the service's state (its marker key is there)", zap.String("master", restarted))
	}
}
