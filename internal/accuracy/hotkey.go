package accuracy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/envoy-rls/envoy-rls/internal/trace"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/hotkey"
	"github.com/envoy-rls/envoy-rls/pkg/limits/redisstore"
)

// HotKeyAlgorithms are the algorithms the hot-key mode applies to.
var HotKeyAlgorithms = []limits.Algorithm{limits.FixedWindow, limits.SlidingWindow, limits.TokenBucket}

// HotKeyShapes are the traces the hot-key row replays: the ones at and
// above the limit, where the mode's shares can overshoot, and the adversary
// at window edges.
var HotKeyShapes = []trace.Shape{{Kind: trace.Poisson, Load: 1.1}, {Kind: trace.Poisson, Load: 2}, {Kind: trace.Edge, Load: 1}}

// HotKeySmall is the hot-key run of the report and of the test suite: a
// hot key, 1,000 a second, the period the targets are stated in,
// so that a key sends enough within one interval for the mode to take
// shares (at 100 a minute every hit would be decided plainly).
func HotKeySmall(seed uint64) Config {
	return Config{Seed: seed, Sources: 2, Duration: 4 * time.Second, Requests: 1000, Period: time.Second,
		Shapes: HotKeyShapes, Algorithms: HotKeyAlgorithms}
}

// HotKeySync is the sync_interval the hot-key row is measured with.
const HotKeySync = 10 * time.Millisecond

// HotKey decides through a fleet of hot-key layers (package hotkey), each
// over its own Redis store on one Redis, with the replay's instants as the
// clock of both (the layer's intervals and the store's windows), so that a
// run depends on its seed and not on the machine's speed. A source's hits
// go to the instances in turn, as a load balancer spreads them. Calls are
// one at a time: the clock is shared.
type HotKey struct {
	Fleet []*hotkey.Store
	now   atomic.Int64
	calls atomic.Int64
	mu    sync.Mutex
}

var _ Decider = (*HotKey)(nil)

// OpenHotKey returns a HotKey decider of n instances on the Redis at url,
// and the function that closes it.
func OpenHotKey(url string, n int) (*HotKey, func(), error) {
	h := &HotKey{}
	var closers []func()
	closeAll := func() {
		for _, c := range closers {
			c()
		}
	}
	for range n {
		client, err := openClient(url)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		s := redisstore.New(client, redisstore.Options{Clock: h.now.Load, Batching: redisstore.BatchOff})
		closers = append(closers, func() { s.Close(); client.Close() }) //nolint:errcheck // nothing is left to flush
		h.Fleet = append(h.Fleet, hotkey.New(counted{s, &h.calls}, hotkey.Options{Now: func() time.Time { return time.UnixMicro(h.now.Load()) }}))
	}
	return h, closeAll, nil
}

// counted counts the calls that reach the Redis store: what the mode saves.
type counted struct {
	limits.Store
	n *atomic.Int64
}

func (c counted) Decide(ctx context.Context, hits []limits.Hit, res []limits.Result) {
	c.n.Add(1)
	c.Store.Decide(ctx, hits, res)
}

// Calls is the number of calls the fleet made to Redis.
func (h *HotKey) Calls() int64 { return h.calls.Load() }

// DecideSource implements Decider; l is given the sync interval HotKeySync.
func (h *HotKey) DecideSource(ctx context.Context, l limits.Limit, key string, at []int64, out []Outcome) error {
	if len(h.Fleet) == 0 {
		return errors.New("accuracy: hot-key decider without instances")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	l.SyncInterval = HotKeySync
	hits := []limits.Hit{{Key: key, Limit: l, Cost: 1}}
	res := make([]limits.Result, 1)
	for i, now := range at {
		h.now.Store(now)
		h.Fleet[i%len(h.Fleet)].Decide(ctx, hits, res)
		if res[0].Err != nil {
			return fmt.Errorf("accuracy: %s at %d: %w", key, now, res[0].Err)
		}
		out[i] = Outcome{Allowed: res[0].Allowed, Delay: res[0].Delay.Microseconds(), Remaining: res[0].Remaining}
	}
	return nil
}
