package redisstore

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/envoy-rls/envoy-rls/internal/redispipe"
)

// work is what one call sends in one round trip: cmds, the native
// commands its kinds queue, sent as the Work of the pipes (send), which
// holds the rest: the TIME it asks, its decisions, its error, what
// follows it.
type work struct {
	cmds []redis.Cmder
	redispipe.Work
}

// send runs wk, merged with the work of concurrent calls if batching is
// on (redispipe.Pipes.Send).
func (s *Store) send(ctx context.Context, wk *work) {
	wk.Cmds = wk.cmds
	s.pipes.Send(ctx, &wk.Work)
}
