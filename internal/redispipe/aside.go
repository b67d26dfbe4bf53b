package redispipe

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// SendAside sends wk from a goroutine of its own, on a context without
// the call's cancellation or deadline (the client's timeouts bound it),
// and counts and logs its failure (Done): work that no call waits for,
// an undo for one. Settle waits for it.
func (p *Pipes) SendAside(ctx context.Context, wk *Work) {
	p.aside.Add(1)
	go func() {
		defer p.aside.Done()
		ctx := context.WithoutCancel(ctx)
		p.Send(ctx, wk)
		p.Done(ctx, wk)
	}()
}

// Done runs what follows wk (Work.Then) once it is sent, if it was, and
// counts, and logs at most every asideLogEvery, a wk whose commands did
// not all run: an undo, a refund, an expiry or a lock's start that Redis
// did not do, which leaves a charge counted until its key expires.
func (p *Pipes) Done(ctx context.Context, wk *Work) {
	if wk.Err == nil {
		for _, then := range wk.Then {
			then(ctx)
		}
	}
	err := wk.Err
	for _, c := range wk.Cmds {
		if err != nil {
			break
		}
		if e := c.Err(); e != nil && !errors.Is(e, redis.Nil) {
			err = e
		}
	}
	if err == nil {
		return
	}
	n := p.asideFailed.Add(1)
	now := LocalMicros()
	if last := p.asideLogged.Load(); (last == 0 || now-last >= asideLogEvery) && p.asideLogged.CompareAndSwap(last, now) {
		p.log.Warn("redisstore: undos or refunds not done: their charges stay counted until their keys expire",
			zap.Int64("failed_so_far", n), zap.Error(err))
	}
}

// asideLogEvery is the least time, in µs, between two logs of work that
// failed (Done).
const asideLogEvery = int64(10 * time.Second / time.Microsecond)

// Failed is how many works Done found failed since the pipes were made.
func (p *Pipes) Failed() int64 { return p.asideFailed.Load() }

// Settle waits for the work in flight that no call waits for
// (SendAside).
func (p *Pipes) Settle() { p.aside.Wait() }
