package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/envoy-rls/envoy-rls/internal/redispipe"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// sendBack sends the undos, held-back refunds, expiries and lock starts
// in back, which no answer reads: the call returns at once and back goes
// aside (sendAside), its charges counted the longer. With Options.Clock
// (tests, which compare each call with the embedded store's) the call
// waits for back, so that its next call sees it done.
func (s *Store) sendBack(ctx context.Context, back *work) {
	if len(back.cmds) == 0 {
		return
	}
	if ctx.Err() != nil || s.clock == nil {
		s.sendAside(ctx, back)
		return
	}
	s.send(ctx, back)
	s.backDone(ctx, back)
}

// sendAside sends back from a goroutine of its own, on a context without
// the call's cancellation or deadline (the client's timeouts bound it),
// and counts and logs its failure (backDone). An undo that fails (Redis
// gone) leaves the charge counted until the key expires: stricter, never
// looser. Close waits for it (settle).
func (s *Store) sendAside(ctx context.Context, back *work) {
	s.aside.Add(1)
	go func() {
		defer s.aside.Done()
		ctx := context.WithoutCancel(ctx)
		s.send(ctx, back)
		s.backDone(ctx, back)
	}()
}

// backDone counts, and logs at most every backLogEvery, a back whose
// commands did not all run: an undo, a refund, an expiry or a lock's
// start that Redis did not do. Then it sends what follows back (work.then).
func (s *Store) backDone(ctx context.Context, back *work) {
	if back.Err == nil {
		for _, then := range back.Then {
			then(ctx)
		}
	}
	err := back.Err
	for _, c := range back.cmds {
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
	n := s.backFailed.Add(1)
	now := redispipe.LocalMicros()
	if last := s.backLogged.Load(); (last == 0 || now-last >= backLogEvery) && s.backLogged.CompareAndSwap(last, now) {
		s.log.Warn("redisstore: undos or refunds not done: their charges stay counted until their keys expire",
			zap.Int64("failed_so_far", n), zap.Error(err))
	}
}

// backLogEvery is the least time, in µs, between two logs of backs that
// failed (backDone).
const backLogEvery = int64(10 * time.Second / time.Microsecond)

// BackFailed is how many undos (with the refunds, expiries and reads sent
// with them) have failed since the store was made: each left a charge
// counted until its key expires.
func (s *Store) BackFailed() int64 { return s.backFailed.Load() }

// firstErr is the first error that is not nil.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// storeError wraps err, what a command for what answered, as the
// store reports it: unavailable for a store that is down.
func storeError(what string, err error) error {
	var re redis.Error
	switch {
	case errors.Is(err, errMalformed), errors.Is(err, errReply), errors.Is(err, errDisagree):
		return fmt.Errorf("redisstore: %s: %w", what, err)
	case errors.As(err, &re) && strings.Contains(err.Error(), "not an integer"):
		return fmt.Errorf("redisstore: %s: %w: %w", what, errMalformed, err)
	case redispipe.Unavailable(err):
		return fmt.Errorf("redisstore: %s: %w: %w", what, limits.ErrUnavailable, err)
	}
	return fmt.Errorf("redisstore: %s: %w", what, err)
}
