package rlqs

import (
	"math"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
	"github.com/envoy-rls/envoy-rls/pkg/rlqs/redisdemand"
)

// Two instances sharing one real Redis divide one limit among the Envoys of
// both; with Redis gone each keeps its last known part of the limit for its
// own Envoys, logging once per interval; with Redis back they share again.
func TestTwoInstancesShareRedis(t *testing.T) {
	srv := redistest.Start(t)
	client := func() *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1,
			DialTimeout: 200 * time.Millisecond, ReadTimeout: 200 * time.Millisecond})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	core, logs := observer.New(zapcore.WarnLevel)
	// The rounds are 3 s apart: more than the divisions' refresh period
	// (half the interval), so that each round sees the one before, and
	// less than an interval, so that an outage's two rounds log once.
	clk := &clock{t: time.Unix(1_000_000, 0)}
	a := newService(t, Options{ReportInterval: 5 * time.Second, Store: redisdemand.New(client(), "t:"), Logger: zap.New(core), Now: clk.Now})
	b := newService(t, Options{ReportInterval: 5 * time.Second, Store: redisdemand.New(client(), "t:"), Now: clk.Now})
	connA, connB := serve(t, a), serve(t, b)
	small, big1, big2 := dial(t, connA), dial(t, connA), dial(t, connB)
	fleet := []*envoy{small, big1, big2}
	demand := map[*envoy]uint64{small: 10, big1: 200, big2: 200}
	round := func() map[*envoy]float64 {
		clk.Add(3 * time.Second)
		got := map[*envoy]float64{}
		for _, e := range fleet {
			got[e] = perSecond(tokens(t, e.report(usage{bucket: api(), allowed: demand[e], elapsed: time.Second})[0]))
		}
		return got
	}
	check := func(when string, got map[*envoy]float64) {
		t.Helper()
		if got[small] != 10 || math.Abs(got[big1]-45) > 1 || math.Abs(got[big2]-45) > 1 {
			t.Fatalf("%s: shares small %v, big %v (A) and %v (B); want 10, 45, 45", when, got[small], got[big1], got[big2])
		}
		if sum := got[small] + got[big1] + got[big2]; sum > 100 {
			t.Fatalf("%s: shares sum to %v, over the limit 100", when, sum)
		}
	}
	round()
	check("shared", round())

	srv.Stop()
	check("Redis down", round())
	check("Redis still down", round())
	if n := a.Stats().StoreFailures.Load(); n < 4 {
		t.Errorf("%d store failures counted on A, want at least 4", n)
	}
	if n := logs.Len(); n != 1 {
		t.Errorf("%d warnings within one interval, want 1", n)
	}

	// A divided on the part of the limit it held at the last good read.
	a.mu.Lock()
	d := a.divs[bucketKeyOf(t, a, "/api")]
	held := d != nil && d.fallback && d.part < 1
	a.mu.Unlock()
	if !held {
		t.Fatal("A kept no part of the limit while Redis was down")
	}

	srv.Restart()
	round()
	check("Redis back", round())
}
