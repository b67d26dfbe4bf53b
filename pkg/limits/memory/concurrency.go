package memory

import (
	"context"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

var _ limits.SlotReader = (*Store)(nil)

// Slots lists the live slots of h's concurrency key, copied under its
// shard's lock.
func (s *Store) Slots(_ context.Context, h limits.Hit) ([]limits.LogEntry, int64, error) {
	now := s.now()
	sh := &s.shards[s.shardIndex(&h)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	i, ok := sh.index[h.Key]
	if !ok || now >= sh.entries[i].expireAt {
		return nil, now, nil
	}
	live, _ := limits.SlotsHeld(sh.entries[i].state, now)
	return append([]limits.LogEntry(nil), live...), now, nil
}
