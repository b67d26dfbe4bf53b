package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// A lockout (a limit with block_for, limits.Limit.BlockFor) keeps its lock
// in a key of its own beside the algorithm's: the hit key followed by
// lockSuffix, under the same hash tag (so on the same master of a
// cluster), holding the lock's end in microseconds as a decimal string,
// with a TTL of block_for (and a second, so that the key outlives its
// value on a Redis whose clock trails the estimate). It is decided in the
// same execution model as every hit:
//
//   - the hit's own commands go in the call's pipeline as for any limit,
//     with GET of the lock key beside them (a refund sends DEL instead,
//     which lifts the lock; one held back until its run is allowed sends
//     it with the undos, if the run is allowed);
//   - the algorithm decides on its replies; then limits.LockAnswer, the
//     function the embedded store decides with too, on the lock's end: a
//     hit on a locked key is refused, so its run is, and its charge is
//     undone like any refusal's (kept for count_refused); a hit that the
//     algorithm refuses on a key that the first round trip found unlocked
//     starts a lock, SET … PX with the undos, after the answer;
//   - the instant is the store's estimate of Redis's clock, as for every
//     decision, so instances agree on the lock's end within it.
//
// A refusal while locked does not extend the lock: it sends no SET. The
// SET is not NX, since the key of a lock that has just ended by the
// store's clock may still be there by Redis's (its TTL runs a second past
// its end), and a new lock must replace it; so two refusals that race to
// start a lock, on instances that both found the key unlocked, start it at
// whichever SET comes last: later by less than the round trip between
// them.
// Reset deletes the lock key with the others and announces it on the reset
// channel, so every instance's over-limit cache forgets the hit key too.

// lockSuffix ends a lock key. Keys end in a length-prefixed string, and
// window counters in windowSep and a number, so no other key ends in it.
const lockSuffix = "!lock"

// lockKey is the key of a hit key's lock.
func lockKey(key string) string { return key + lockSuffix }

// algorithmOnly is l without its lock: what a hit's own commands are
// decided with, the lock being decided after them (lockedHit).
func algorithmOnly(l limits.Limit) limits.Limit {
	l.BlockFor = 0
	return l
}

// lockedHit is a lockout hit: the algorithm's hit (pending), and its
// lock's read, decided after it (decide).
type lockedHit struct {
	pending
	limit limits.Limit
	cost  int64
	now   int64
	key   string           // the lock key
	get   *redis.StringCmd // GET of the lock: a hit of cost ≥ 0
	// later is a held-back refund's DEL, sent if its run is allowed; lift
	// a refund's DEL sent at once, whose error fails the hit (a lock it
	// could not lift would go on refusing).
	later redis.Cmder
	lift  *redis.IntCmd
	// quiet is set on a hit whose refusal starts no lock: a repeated
	// reserve, a settle of a live hold (holds.go), whose charge is not a
	// request's.
	quiet bool
}

// newLockedHit queues in wk the lock's commands of hit h at now, beside
// those of its algorithm's hit, inner.
func newLockedHit(ctx context.Context, inner pending, h *limits.Hit, now int64, wk *work, refundLater bool) *lockedHit {
	lk := &lockedHit{pending: inner, limit: h.Limit, cost: h.Cost, now: now, key: lockKey(h.Key)}
	switch {
	case h.Cost < 0 && refundLater:
		lk.later = redis.NewIntCmd(ctx, "del", lk.key)
	case h.Cost < 0:
		lk.lift = redis.NewIntCmd(ctx, "del", lk.key)
		wk.Cmds = append(wk.Cmds, lk.lift)
	default:
		lk.get = redis.NewStringCmd(ctx, "get", lk.key)
		wk.Cmds = append(wk.Cmds, lk.get)
	}
	return lk
}

// decide decides the algorithm's hit, then its lock with
// limits.LockAnswer, the function the embedded store decides with too: a
// hit on a locked key is refused, so its run is, and its charge undone
// like any refusal's; a refusal on a key the pipeline found unlocked
// starts a lock, whose SET goes in back, after the answer.
func (lk *lockedHit) decide(ctx context.Context, back *work) (limits.Result, int64, error) {
	r, again, err := lk.pending.decide(ctx, back)
	switch {
	case err != nil || again > 0:
		return r, again, err
	case lk.lift != nil && lk.lift.Err() != nil:
		return limits.Result{}, 0, fmt.Errorf("lockout: %w", lk.lift.Err())
	case lk.get == nil:
		return r, 0, nil
	}
	end, err := lockEnd(lk.get)
	if err != nil {
		return limits.Result{}, 0, fmt.Errorf("lockout: %w", err)
	}
	answer, starts := limits.LockAnswer(lk.limit, r, lk.cost, end, lk.now)
	if starts && !lk.quiet {
		back.Cmds = append(back.Cmds, redis.NewStatusCmd(ctx, "set", lk.key, lk.now+lk.limit.BlockForMicros(),
			"px", ttlMillis(lk.limit.BlockForMicros())+1000))
	}
	return answer, 0, nil
}

// refundLater is the algorithm's held-back refund and the lift of the
// lock, sent if the run is allowed.
func (lk *lockedHit) refundLater() []redis.Cmder {
	cmds := lk.pending.refundLater()
	if lk.later != nil {
		cmds = append(slices.Clip(cmds), lk.later)
	}
	return cmds
}

// resend sends the algorithm's hit again (a bucket's: resender), its
// lock as the first pipeline read it.
func (lk *lockedHit) resend(ctx context.Context, h *limits.Hit, at int64, wk *work, last bool) pending {
	inner, ok := lk.pending.(resender)
	if !ok {
		return nil
	}
	again := *lk
	again.pending = inner.resend(ctx, h, at, wk, last)
	return &again
}

// lockEnd reads a lock's end from its GET: zero for none.
func lockEnd(cmd *redis.StringCmd) (int64, error) {
	v, err := cmd.Result()
	switch {
	case errors.Is(err, redis.Nil):
		return 0, nil
	case err != nil && v == "":
		return 0, err
	}
	end, perr := strconv.ParseInt(v, 10, 64)
	if perr != nil || end < 0 {
		return 0, fmt.Errorf("%w under key %s", errMalformed, cmd.Args()[1])
	}
	return end, nil
}
