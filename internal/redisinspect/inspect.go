// Package redisinspect inspects a Redis for what no call to it reports,
// off the decisions' path; it knows nothing of limits: the commands whose
// permission it checks are given to it (Options.Probe).
package redisinspect

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/envoy-rls/envoy-rls/internal/redispipe"
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
//   - permissions: a probe sends every command the store sends (given as
//     Options.Probe), on keys of its own under the key prefix (ProbeKey)
//     and on the reset channel, and reads which Redis refuses with
//     NOPERM: Ping is then a *redispipe.RefusedError that names the ACL
//     rules to add (redispipe.Permissions);
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

// client is the part of go-redis that the inspections use: pipelines,
// and the type of the client, to tell a cluster's.
type client interface {
	Pipeline() redis.Pipeliner
}

// Options say what an Inspector checks.
type Options struct {
	// KeyPrefix is the prefix of every key the store writes: the probe's
	// keys and the markers are under it. Empty, the inspections write
	// nothing: no permissions probe, no marker of lost data.
	KeyPrefix string
	// Channel is the store's pub/sub channel, "" for none: a NOPERM on a
	// channel names it.
	Channel string
	// Probe returns, at each inspection, the commands whose permission
	// the probe checks, each as its arguments, sent in this order in one
	// pipeline, on keys of the probe's own (ProbeKey).
	Probe func() [][]any
	// Logger says what the inspections find; nil logs nothing.
	Logger *zap.Logger
}

// Inspector runs the inspections of a store. It is safe for concurrent
// use: one inspection runs at a time, and a Check that finds one running,
// or one done less than Every ago, answers what the last found.
type Inspector struct {
	client    client // a *redis.Client or a *redis.ClusterClient
	log       *zap.Logger
	user      string // the ACL user, for the rule to add
	prefix    string // the key prefix: the probe's keys and the marker
	channel   string // the reset channel, "" for none
	probeCmds func() [][]any
	// Every is the least time between two inspections: inspectEvery, but
	// for tests, which set it before the first Check.
	Every time.Duration
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

// New returns the Inspector of client, a *redis.Client or a
// *redis.ClusterClient.
func New(client client, opts Options) *Inspector {
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	in := &Inspector{client: client, log: log, user: userOf(client), prefix: opts.KeyPrefix, channel: opts.Channel,
		probeCmds: opts.Probe, Every: inspectEvery, runIDs: map[string]string{}, markers: map[string]string{}}
	in.found.Store(&Inspection{})
	in.health.Store(&healthFound{})
	return in
}

// userOf is the client's ACL user: "default" when it names none.
func userOf(client client) string {
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

// Last is what the last inspection of Redis found.
func (in *Inspector) Last() Inspection {
	last := *in.found.Load()
	last.Lost = in.lost.Load()
	return last
}

// Check inspects Redis if the last inspection is older than Every, and
// returns what it found for health: nil, a *redispipe.RefusedError or a
// *MemoryFullError.
func (in *Inspector) Check(ctx context.Context) error {
	if !in.mu.TryLock() {
		// One is running: a health check answers without waiting for it.
		return in.health.Load().err
	}
	defer in.mu.Unlock()
	if time.Since(in.at) < in.Every {
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
		err = &redispipe.RefusedError{Setting: redispipe.Permissions, Err: fmt.Errorf("the user %s lacks %s: add them with ACL SETUSER %s %s (docs/operations.md, What Redis must be)", in.user, rules, in.user, rules)}
	case found.Full():
		err = &MemoryFullError{Used: found.UsedMemory, Max: found.MaxMemory}
	}
	in.health.Store(&healthFound{err})
	return err
}

// healthFound is what an inspection found for health.
type healthFound struct{ err error }

// ProbeKey is a key of the probe's own, under prefix, of the hash tag
// that keeps the probe's keys on one master.
func ProbeKey(prefix, kind string) string { return prefix + "{probe}:" + kind }
