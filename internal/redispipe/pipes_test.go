package redispipe

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
)

// TestPipesSend: concurrent works, merged or not, each come back with
// their own replies, OnPipeline told every decision, and Redis's clock
// estimated from the TIME the pipelines carry.
func TestPipesSend(t *testing.T) {
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	for _, batch := range []bool{true, false} {
		var decisions atomic.Int64
		p := NewPipes(c, Options{Batch: batch, OnPipeline: func(n int) { decisions.Add(int64(n)) }})
		ctx := context.Background()
		var wg sync.WaitGroup
		for i := range 32 {
			wg.Go(func() {
				key := "k" + string(rune('a'+i%26))
				incr := redis.NewIntCmd(ctx, "incrby", key, 1)
				wk := &Work{Cmds: []redis.Cmder{incr}, Decisions: 1}
				p.Send(ctx, wk)
				if wk.Err != nil || incr.Err() != nil {
					t.Errorf("batch %v: %v, %v", batch, wk.Err, incr.Err())
				}
				if k, ok := CmdKey(incr); !ok || k != key {
					t.Errorf("CmdKey = %q, %v, want %q", k, ok, key)
				}
			})
		}
		wg.Wait()
		p.Close()
		if got := decisions.Load(); got != 32 {
			t.Errorf("batch %v: OnPipeline told %d decisions, want 32", batch, got)
		}
		if _, _, ok := p.Clock().Now(); !ok {
			t.Errorf("batch %v: no estimate of Redis's clock", batch)
		}
		if p.Failed() != 0 {
			t.Errorf("batch %v: %d failed", batch, p.Failed())
		}
	}
}
