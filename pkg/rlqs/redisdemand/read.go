package redisdemand

import (
	"context"
	"fmt"

	"github.com/envoy-rls/envoy-rls/pkg/rlqs/internal/share"
)

// Demands returns the live demands of bucket, every instance's: one
// HGETALL (and a TIME the first time), nothing written, nothing deleted,
// so that `envoy-rls explain` can read what the servers divide without
// changing it. An entry is live as RecordAll reads it: its expiry is
// after Redis's clock.
func (s *Store) Demands(ctx context.Context, bucket string) (map[string]share.Demand, error) {
	now, _, err := s.now(ctx)
	if err != nil {
		return nil, err
	}
	all, err := s.client.HGetAll(ctx, s.Key(bucket)).Result()
	if err != nil {
		return nil, fmt.Errorf("redisdemand: reading demands: %w", err)
	}
	m, _ := live(all, now)
	return m, nil
}
