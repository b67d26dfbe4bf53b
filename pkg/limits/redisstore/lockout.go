package redisstore

import (
	"context"
	"errors"
	"fmt"
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
// decided with, the lock being decided beside them (lockRefusals).
func algorithmOnly(l limits.Limit) limits.Limit {
	l.BlockFor = 0
	return l
}

// lockHit is a lockout hit's lock: its read, and what answering it needs.
type lockHit struct {
	i     int  // its index in the call's hits and results
	run   span // its run
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
	// answered is set once the lock is read, when the lock decides the
	// hit: answer is then its answer.
	answered bool
	answer   limits.Result
	start    *redis.StatusCmd // SET … PX: this refusal starts a lock
}

// newLockHit queues in wk the lock's commands of hit i, in run r, at now.
func newLockHit(ctx context.Context, i int, r span, h *limits.Hit, now int64, wk *work, refundLater bool) *lockHit {
	lk := &lockHit{i: i, run: r, limit: h.Limit, cost: h.Cost, now: now, key: lockKey(h.Key)}
	switch {
	case h.Cost < 0 && refundLater:
		lk.later = redis.NewIntCmd(ctx, "del", lk.key)
	case h.Cost < 0:
		lk.lift = redis.NewIntCmd(ctx, "del", lk.key)
		wk.cmds = append(wk.cmds, lk.lift)
	default:
		lk.get = redis.NewStringCmd(ctx, "get", lk.key)
		wk.cmds = append(wk.cmds, lk.get)
	}
	return lk
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

// lockRefusals reads the round's locks, once the algorithms have answered
// and before the refused runs are undone: a hit on a locked key is refused
// there (its run undone with it), a lock that cannot be read fails its
// run, and a refusal that starts a lock queues its SET in back. The
// answers are set once the runs are undone (lockAnswers).
func lockRefusals(ctx context.Context, results []limits.Result, locks []*lockHit, back *work) {
	for _, lk := range locks {
		r := &results[lk.i]
		if lk.lift != nil && lk.lift.Err() != nil && r.Err == nil {
			*r = limits.Result{Err: storeError("lockout", lk.lift.Err())}
		}
		if lk.get == nil || r.Err != nil {
			continue
		}
		end, err := lockEnd(lk.get)
		if err != nil {
			*r = limits.Result{Err: storeError("lockout", err)}
			continue
		}
		answer, starts := limits.LockAnswer(lk.limit, *r, lk.cost, end, lk.now)
		if end > lk.now {
			r.Allowed = false
		}
		// Otherwise the algorithm's answer stands.
		lk.answered, lk.answer = end > lk.now || starts, answer
		if starts {
			newEnd := lk.now + lk.limit.BlockForMicros()
			lk.start = redis.NewStatusCmd(ctx, "set", lk.key, newEnd, "px", ttlMillis(lk.limit.BlockForMicros())+1000)
			back.cmds = append(back.cmds, lk.start)
		}
	}
}

// lockRefunds queues in back the lifts of the refunds held back until
// their run's verdict, for the runs allowed (results as undoRefused left
// them).
func lockRefunds(results []limits.Result, locks []*lockHit, back *work) {
	for _, lk := range locks {
		if lk.later == nil {
			continue
		}
		allowed := true
		for i := lk.run.first; i <= lk.run.last; i++ {
			allowed = allowed && results[i].Allowed && results[i].Err == nil
		}
		if allowed {
			back.cmds = append(back.cmds, lk.later)
		}
	}
}

// lockAnswers sets the answers of the round's locked hits, and of those
// whose refusal starts a lock: the lock's SET goes after the answer, with
// the undos (its end is the one the answer gives), and one that fails
// leaves the key unlocked, counted and logged as an undo that failed is.
func lockAnswers(results []limits.Result, locks []*lockHit) {
	for _, lk := range locks {
		if lk.answered && results[lk.i].Err == nil {
			results[lk.i] = lk.answer
		}
	}
}
