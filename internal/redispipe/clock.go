// Package redispipe holds what the Redis stores share below their
// decisions, knowing nothing of limits: the go-redis clients, tuned to
// fail fast (NewClient); the pipes (Pipes), which send the Work of a call,
// its commands, merged with the work of concurrent calls into shared
// pipelines, per master on a cluster behind a gate that fails fast, and
// send aside the work no call waits for; the estimate of the Redis
// server's clock, which native commands cannot read (Clock), taken from a
// TIME in a pipeline (Probe) or, on a cluster, from one master's
// (SampleMasters); a cluster's topology, its map of the slots reloaded
// when a node cannot be reached and its masters checked (Topology); and
// the reading of errors that say Redis is down (Unavailable, FailedOn) or
// refuses the client's settings (Refusal).
package redispipe

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Clock estimates the Redis server's clock (TIME) from this process's
// monotonic clock, so that a decision made with native commands, which
// cannot read TIME themselves, still takes its instant from Redis: every
// instance then picks the same window for the same instant, whatever its
// own wall clock says.
//
// Each sample is a TIME answered within a round trip: sent at local s,
// received at local r, so Redis's clock read t somewhere in [s, r] and the
// offset t − (s+r)/2 is known within (r − s)/2. The estimate keeps the
// sample whose bound is the smallest once each sample's bound has grown
// by maxDrift per second of age (the two clocks may run at slightly
// different rates, and Redis's may be stepped): a fast round trip wins, and
// a newer sample replaces it once the older one has aged enough, or at
// once if the two cannot both be right (a step of Redis's clock).
//
// It is safe for concurrent use. The zero value has no sample.
type Clock struct {
	mu   sync.Mutex
	best clockSample
	ok   bool
	last int64 // local instant of the latest sample
	// failed holds, on a cluster, the local instant at which each master's
	// TIME last failed (SampleMasters), by address.
	failed map[string]int64
}

// clockSample is one TIME: at is its local midpoint in microseconds of the
// monotonic clock, off what Redis's clock was ahead of it, err half the
// round trip.
type clockSample struct {
	at, off, err int64
}

// maxDrift is how fast, in microseconds per second (ppm), an old sample's
// bound grows: far above what two NTP-disciplined clocks drift apart, so
// that an estimate's bound holds, and low enough that a sample a few
// seconds old still beats one taken across a slow round trip.
const maxDrift = 100

// clockBase anchors the monotonic clock: local instants are microseconds
// since it, read with time.Since, which uses the monotonic reading only.
var clockBase = time.Now()

// LocalMicros is the monotonic clock in microseconds since clockBase.
func LocalMicros() int64 { return time.Since(clockBase).Microseconds() }

// Observe records a TIME that read redisMicros (microseconds since the
// epoch) between the local instants sent and received (LocalMicros).
func (c *Clock) Observe(sent, received, redisMicros int64) {
	if received < sent {
		return
	}
	s := clockSample{at: sent + (received-sent)/2, off: redisMicros - (sent + (received-sent)/2), err: (received - sent + 1) / 2}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last = max(c.last, received)
	bound := c.bound(c.best, s.at)
	// A sample whose interval the estimate's does not meet means that
	// Redis's clock stepped (or a failover reached another master): follow
	// it at once (2 µs for the rounding of the two clocks).
	if !c.ok || s.err <= bound || abs(s.off-c.best.off) > s.err+bound+2 {
		c.best, c.ok = s, true
	}
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// bound is the uncertainty of sample s at local instant now.
func (c *Clock) bound(s clockSample, now int64) int64 {
	return s.err + abs(now-s.at)*maxDrift/1_000_000
}

// Now returns the estimate of Redis's clock in microseconds since the
// epoch, and its uncertainty; ok is false until a first sample.
func (c *Clock) Now() (now, uncertainty int64, ok bool) {
	return c.At(LocalMicros())
}

// At is Now at the local instant local (LocalMicros), past or not.
func (c *Clock) At(local int64) (now, uncertainty int64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ok {
		return 0, 0, false
	}
	return local + c.best.off, c.bound(c.best, local), true
}

// Holds reports whether Redis's clock, as the samples bound it, may have
// read micros at the local instant local: whether a provisional instant
// (the Redis store's) lies within the uncertainty of the estimate there, which
// the TIME that rode with its charges gives it at the least.
func (c *Clock) Holds(local, micros int64) bool {
	now, u, ok := c.At(local)
	return ok && abs(micros-now) <= u
}

// Fresh returns the estimate of Redis's clock, in microseconds since the
// epoch, if a call may use it: a sample has come within MaxSampleAge. Its
// uncertainty is then at most the newest sample's, half that sample's
// round trip, plus MaxClockGrowth: a slow round trip widens it, and never
// stops a call from using it. Only a store without a sample, or idle for
// longer than MaxSampleAge, has its users ask for TIME first.
func (c *Clock) Fresh() (int64, bool) {
	local := LocalMicros()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ok || local-c.last > MaxSampleAge {
		return 0, false
	}
	return local + c.best.off, true
}

// MaxClockGrowth is how far the estimate's uncertainty may have grown by
// drift since the newest sample before calls ask for TIME instead of
// using it: 10 ms, which takes MaxSampleAge, 100 s without a pipeline.
// Only the growth is bounded: half a round trip, however slow, is what a
// sample is worth, and the store timeout bounds that.
const (
	MaxClockGrowth = int64(10 * time.Millisecond / time.Microsecond)
	MaxSampleAge   = MaxClockGrowth * 1_000_000 / maxDrift
)

// ProbeEvery and ClusterProbeEvery are how often the clock is sampled, in
// microseconds: on a single Redis by a TIME in a pipeline, at most every
// other millisecond (a sample is a command and a reply: under load, many
// pipelines share each); on a cluster by a TIME of its own on a master
// (SampleMasters), ten times a second. Either keeps the estimate's bound near
// the fastest recent round trip (maxDrift adds a microsecond per 10 ms of a
// sample's age).
const (
	ProbeEvery        = int64(2 * time.Millisecond / time.Microsecond)
	ClusterProbeEvery = int64(100 * time.Millisecond / time.Microsecond)
)

// Due reports whether the last sample is older than every µs (ProbeEvery,
// ClusterProbeEvery, or a user's own).
func (c *Clock) Due(every int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.ok || LocalMicros()-c.last >= every
}

// Forget drops the samples, as before the first.
func (c *Clock) Forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ok = false
}

// Probe asks a single Redis's TIME within a pipeline. A cluster's clock
// is sampled on its own instead (SampleMasters): TIME names no key, and a
// cluster client would send it to any node.
type Probe struct {
	time *redis.TimeCmd
}

// Queue adds the probe to pipe.
func (p *Probe) Queue(ctx context.Context, pipe redis.Pipeliner) {
	p.time = pipe.Time(ctx)
}

// Micros is the TIME the probe read, in microseconds since the epoch.
func (p *Probe) Micros() (int64, error) {
	if p.time == nil {
		return 0, errors.New("clock probe not sent")
	}
	t, err := p.time.Result()
	if err != nil {
		return 0, err
	}
	return t.UnixMicro(), nil
}

// Observe feeds the probe's answer, sent and received at the given local
// instants, to c.
func (p *Probe) Observe(c *Clock, sent, received int64) {
	if us, err := p.Micros(); err == nil {
		c.Observe(sent, received, us)
	}
}

// Err is why the probe has no answer, or nil.
func (p *Probe) Err() error {
	_, err := p.Micros()
	return err
}

// SampledSince reports whether a sample arrived at or after the local
// instant since: one as good as a TIME sent then.
func (c *Clock) SampledSince(since int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ok && c.last >= since
}
