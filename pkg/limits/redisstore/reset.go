package redisstore

import (
	"context"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// Reset deletes every key under which the hits' state is kept, in one
// pipeline (a cluster client splits it by node): a bucket's or a log's
// key, and a window's counters of the window Redis's clock is in and of
// the ones either side of it (the previous one, which a sliding window
// reads, and the next, in case the estimate of the clock is behind). It
// also forgets what this instance keeps of those counters (a previous
// window's final count, a TTL seen set); another instance's are its own,
// and a sliding window's previous count that one of them holds may still
// refuse until its window ends.
func (s *Store) Reset(ctx context.Context, hits []limits.Hit) error {
	now, err := s.now(ctx)
	if err != nil {
		return err
	}
	p := s.client.Pipeline()
	for i := range hits {
		h := &hits[i]
		if !isWindow(h.Limit.Algorithm) {
			p.Del(ctx, h.Key)
			continue
		}
		w := floorDiv(now, h.Limit.PeriodMicros())
		for _, k := range []string{windowKey(h.Key, w-1), windowKey(h.Key, w), windowKey(h.Key, w+1)} {
			p.Del(ctx, k)
			s.prevs.drop(k)
			s.expiries.drop(s.expiries.hash(k))
		}
	}
	if _, err := p.Exec(ctx); err != nil {
		return storeError("reset", err)
	}
	return nil
}
