package redisstore

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisClock estimates the Redis server's clock (TIME) from this process's
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
type redisClock struct {
	mu   sync.Mutex
	best clockSample
	ok   bool
	last int64 // local instant of the latest sample
	// failed holds, on a cluster, the local instant at which each master's
	// TIME last failed (sampleMasters), by address.
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

// localMicros is the monotonic clock in microseconds since clockBase.
func localMicros() int64 { return time.Since(clockBase).Microseconds() }

// observe records a TIME that read redisMicros (microseconds since the
// epoch) between the local instants sent and received (localMicros).
func (c *redisClock) observe(sent, received, redisMicros int64) {
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
func (c *redisClock) bound(s clockSample, now int64) int64 {
	return s.err + abs(now-s.at)*maxDrift/1_000_000
}

// now returns the estimate of Redis's clock in microseconds since the
// epoch, and its uncertainty; ok is false until a first sample.
func (c *redisClock) now() (now, uncertainty int64, ok bool) {
	return c.at(localMicros())
}

// at is now at the local instant local (localMicros), past or not.
func (c *redisClock) at(local int64) (now, uncertainty int64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ok {
		return 0, 0, false
	}
	return local + c.best.off, c.bound(c.best, local), true
}

// holds reports whether Redis's clock, as the samples bound it, may have
// read micros at the local instant local: whether a provisional instant
// (Store.now) lies within the uncertainty of the estimate there, which
// the TIME that rode with its charges gives it at the least.
func (c *redisClock) holds(local, micros int64) bool {
	now, u, ok := c.at(local)
	return ok && abs(micros-now) <= u
}

// fresh returns the estimate of Redis's clock, in microseconds since the
// epoch, if a call may use it: a sample has come within maxSampleAge. Its
// uncertainty is then at most the newest sample's, half that sample's
// round trip, plus maxClockGrowth: a slow round trip widens it, and never
// stops a call from using it. Only a store without a sample, or idle for
// longer than maxSampleAge, has calls ask for TIME first (Store.now).
func (c *redisClock) fresh() (int64, bool) {
	local := localMicros()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ok || local-c.last > maxSampleAge {
		return 0, false
	}
	return local + c.best.off, true
}

// maxClockGrowth is how far the estimate's uncertainty may have grown by
// drift since the newest sample before calls ask for TIME instead of
// using it: 10 ms, which takes maxSampleAge, 100 s without a pipeline.
// Only the growth is bounded: half a round trip, however slow, is what a
// sample is worth, and the store timeout bounds that.
const (
	maxClockGrowth = int64(10 * time.Millisecond / time.Microsecond)
	maxSampleAge   = maxClockGrowth * 1_000_000 / maxDrift
)

// probeEvery and clusterProbeEvery are how often the clock is sampled, in
// microseconds: on a single Redis by a TIME in a pipeline, at most every
// other millisecond (a sample is a command and a reply: under load, many
// pipelines share each); on a cluster by a TIME of its own on a master
// (sampleMasters), ten times a second. Either keeps the estimate's bound near
// the fastest recent round trip (maxDrift adds a microsecond per 10 ms of a
// sample's age).
const (
	probeEvery        = int64(2 * time.Millisecond / time.Microsecond)
	clusterProbeEvery = int64(100 * time.Millisecond / time.Microsecond)
)

// due reports whether the last sample is older than probeEvery (or, for a
// cluster, clusterProbeEvery).
func (c *redisClock) due(cluster bool) bool {
	every := probeEvery
	if cluster {
		every = clusterProbeEvery
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.ok || localMicros()-c.last >= every
}

// clockProbe asks a single Redis's TIME within a pipeline. A cluster's clock
// is sampled on its own instead (sampleMasters): TIME names no key, and a
// cluster client would send it to any node.
type clockProbe struct {
	time *redis.TimeCmd
}

func (s *Store) newClockProbe() *clockProbe { return &clockProbe{} }

// queue adds the probe to pipe.
func (p *clockProbe) queue(ctx context.Context, pipe redis.Pipeliner) {
	p.time = pipe.Time(ctx)
}

// micros is the TIME the probe read, in microseconds since the epoch.
func (p *clockProbe) micros() (int64, error) {
	if p.time == nil {
		return 0, errors.New("clock probe not sent")
	}
	t, err := p.time.Result()
	if err != nil {
		return 0, err
	}
	return t.UnixMicro(), nil
}

// observe feeds the probe's answer, sent and received at the given local
// instants, to c.
func (p *clockProbe) observe(c *redisClock, sent, received int64) {
	if us, err := p.micros(); err == nil {
		c.observe(sent, received, us)
	}
}

// err is why the probe has no answer, or nil.
func (p *clockProbe) err() error {
	_, err := p.micros()
	return err
}

// sampledSince reports whether a sample arrived at or after the local
// instant since: one as good as a TIME sent then.
func (c *redisClock) sampledSince(since int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ok && c.last >= since
}

// askClock samples Redis's clock for the calls that have no estimate they
// may use (Store.ask): a TIME in a pipeline of its own on a single Redis, a
// master's TIME on a cluster.
func (s *Store) askClock(ctx context.Context) error {
	if s.cluster {
		return s.sampleMasters(ctx)
	}
	probe := s.newClockProbe()
	wk := &work{clock: probe}
	s.send(ctx, wk)
	if wk.err != nil {
		return wk.err // the call stopped waiting: the probe is not for it to read
	}
	return probe.err()
}
