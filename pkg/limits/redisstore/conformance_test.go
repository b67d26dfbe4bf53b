package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/storetest"
)

// TestConformance runs the suite that every store passes, on one Redis for
// all cases (the suite's keys are unique per case).
func TestConformance(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, ClientOptions{URL: srv.URL(), Timeout: testTimeout})
	c.AddHook(LongerTTLs(time.Hour))
	storetest.Run(t, func(t *testing.T, clock func() int64) limits.Store {
		return persisting{store: New(c, Options{Clock: clock}), client: c, clock: clock}
	})
}

// persisting removes the TTL of every key it touched after each call. The
// suite's clock is fake, but Redis expires keys on its real clock: a state
// that the fake clock keeps for one more microsecond would otherwise vanish
// a millisecond of real time later, whenever the machine is slow. A state
// kept past its expiry decides exactly as an absent key (TestEquivalence
// checks that), so the suite's expiry cases still hold. A key could still
// expire between its PEXPIRE and the PERSIST after the call, on a machine
// slow enough: LongerTTLs adds an hour to the PEXPIREs the store sends.
type persisting struct {
	store  *Store
	client redis.UniversalClient
	clock  func() int64
}

func (p persisting) Decide(ctx context.Context, hits []limits.Hit, results []limits.Result) {
	p.store.Decide(ctx, hits, results)
	now := p.clock()
	for _, h := range hits {
		for _, k := range redisKeys(h, now) {
			p.client.Persist(ctx, k)
		}
	}
}

// redisKeys are the keys that hit h, decided at now, touches: its window
// counters for a window, its key for the other algorithms.
func redisKeys(h limits.Hit, now int64) []string {
	if !isWindow(h.Limit.Algorithm) {
		return []string{h.Key}
	}
	w := limits.WindowFrame(h.Limit, now).W
	return []string{windowKey(h.Key, w), windowKey(h.Key, w-1)}
}

func (p persisting) Reset(ctx context.Context, hits []limits.Hit) error {
	return p.store.Reset(ctx, hits)
}

func (p persisting) Held(ctx context.Context, h limits.Hit) (cost, holds int64, err error) {
	return p.store.Held(ctx, h)
}
