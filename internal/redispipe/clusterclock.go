package redispipe

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// A cluster's clock is one master's TIME, sent straight to that master's
// client: TIME names no key, so within a pipeline a cluster client would
// send it to any node. The master is the first, in an order that every
// instance reads from the slot map (clockKey), that answers: so instances
// read the same master's clock, and the clock survives the loss of any
// master but the last.
//
// What the estimate then means: while one master answers first, every
// instance's instant is that master's clock within its uncertainty (half
// the best recent round trip, plus maxDrift: at most half the newest
// sample's round trip plus maxClockGrowth, fresh), and two instances agree
// within the sum of theirs.
// When the clock moves to another master, an instance's instants step,
// forward or back, by the difference between the two masters' clocks (the
// estimate follows at once a sample that contradicts it: observe), and for
// the time one instance has moved and another not yet, they differ by that
// much on top: a few milliseconds at most between masters that NTP keeps.
// Each moves at its first sample after the loss (within clusterProbeEvery
// of a call), and back within clockRetry more once the master answers
// again. A master that is down fails the hits on its own keys whatever the
// clock.

// clockMasters bounds the masters SampleMasters tries, in the order of the
// keys clockKey names: enough that a cluster of a few dozen masters has each
// among them, and any cluster two or more.
const clockMasters = 64

// clockRetry is how long, in microseconds, a master whose TIME failed goes
// last in the walks that follow: a master that hangs or cannot be reached
// then costs a wait of the client's timeout once, not at every sample, and
// the walks come back to it after that, so that the clock returns to it.
const clockRetry = int64(time.Second / time.Microsecond)

// ClockKey is the i-th key whose master a cluster's clock is read from
// (SampleMasters); the clock never touches it. Each has a hash tag of its
// own, so that their slots spread over the masters. The first is the key of
// the one master that the clock was read from before there was a fallback.
func ClockKey(i int) string {
	if i == 0 {
		return "{envoy-rls}:clock"
	}
	return "{envoy-rls:" + strconv.Itoa(i) + "}:clock"
}

// MasterFinder is what a cluster's clock needs of a cluster client: the
// master that holds a key, as the client's map of the slots says.
type MasterFinder interface {
	MasterForKey(ctx context.Context, key string) (*redis.Client, error)
}

var _ MasterFinder = (*redis.ClusterClient)(nil)

// clockOrder returns the masters of clockKey's keys, each once, in the
// order they first appear; those whose TIME failed within clockRetry
// before now go last, in the same order. (A slot that no master holds
// names a node at random: the order is then the same for every instance
// only up to it.)
func (c *Clock) clockOrder(ctx context.Context, cluster MasterFinder, now int64) ([]*redis.Client, error) {
	var masters []*redis.Client
	for i := range clockMasters {
		m, err := cluster.MasterForKey(ctx, ClockKey(i))
		if err != nil {
			return nil, err // the slot map is not to be had: no master is known
		}
		addr := m.Options().Addr
		if !slices.ContainsFunc(masters, func(o *redis.Client) bool { return o.Options().Addr == addr }) {
			masters = append(masters, m)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	failed := func(m *redis.Client) bool {
		at, ok := c.failed[m.Options().Addr]
		return ok && now-at < clockRetry
	}
	slices.SortStableFunc(masters, func(a, b *redis.Client) int {
		switch fa, fb := failed(a), failed(b); {
		case fa == fb:
			return 0
		case fb:
			return -1
		}
		return 1
	})
	return masters, nil
}

// fail records that the TIME of the master at addr failed at local instant
// at.
func (c *Clock) fail(addr string, at int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failed == nil {
		c.failed = map[string]int64{}
	}
	c.failed[addr] = at
}

// SampleMasters samples a cluster's clock: the TIME of the first master
// of clockOrder that answers it. A master that fails goes last for
// clockRetry; one that ctx ended on is not known to have failed: the walk
// stops there and reports it (stopped), so that the caller goes on aside,
// and a master that hangs, which a call would wait on until its deadline
// every time, is found out and passed by.
func (c *Clock) SampleMasters(ctx context.Context, cluster MasterFinder) (stopped bool, err error) {
	masters, err := c.clockOrder(ctx, cluster, LocalMicros())
	if err != nil {
		return false, err
	}
	var errs []error
	for _, m := range masters {
		sent := LocalMicros()
		t, err := m.Time(ctx).Result()
		received := LocalMicros()
		if err == nil {
			c.Observe(sent, received, t.UnixMicro())
			return false, nil
		}
		addr := m.Options().Addr
		errs = append(errs, fmt.Errorf("master %s: %w", addr, err))
		if ended(ctx) {
			return true, errors.Join(errs...)
		}
		c.fail(addr, received)
	}
	return false, errors.Join(errs...)
}

// ended reports whether ctx has ended or its deadline has passed: a socket
// given that deadline (ContextTimeoutEnabled) times out a moment before ctx
// itself reports it, and the master it waited on is not known to have
// failed.
func ended(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ctx.Err() != nil || ok && !time.Now().Before(dl)
}
