package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/envoy-rls/envoy-rls/internal/redispipe"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// sendBack sends the undos, held-back refunds, expiries and lock starts
// in back, which no answer reads: the call returns at once and back goes
// aside (redispipe.Pipes.SendAside), its charges counted the longer. With
// Options.Clock (tests, which compare each call with the embedded
// store's) the call waits for back, so that its next call sees it done.
// A back that fails (Redis gone) leaves the charge counted until the key
// expires: stricter, never looser; it is counted in BackFailed, and
// logged.
func (s *Store) sendBack(ctx context.Context, back *work) {
	if len(back.Cmds) == 0 {
		return
	}
	if ctx.Err() != nil || s.clock == nil {
		s.sendAside(ctx, back)
		return
	}
	s.send(ctx, back)
	s.pipes.Done(ctx, back)
}

// sendAside sends back from a goroutine of its own, on a context without
// the call's cancellation or deadline (redispipe.Pipes.SendAside); Close
// waits for it (settle).
func (s *Store) sendAside(ctx context.Context, back *work) {
	s.pipes.SendAside(ctx, back)
}

// BackFailed is how many undos (with the refunds, expiries and reads sent
// with them) have failed since the store was made: each left a charge
// counted until its key expires.
func (s *Store) BackFailed() int64 { return s.pipes.Failed() }

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
