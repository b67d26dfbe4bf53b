package redisstore

import (
	"context"

	"github.com/envoy-rls/envoy-rls/internal/redispipe"
)

// work is what one call sends in one round trip: the Work of the pipes
// (the native commands its kinds queue, the TIME it asks, its decisions,
// its error, what follows it).
type work = redispipe.Work

// send runs wk, merged with the work of concurrent calls if batching is
// on (redispipe.Pipes.Send).
func (s *Store) send(ctx context.Context, wk *work) {
	s.pipes.Send(ctx, wk)
}
