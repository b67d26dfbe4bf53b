package redisstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// A bucket hit (token_bucket, leaky_bucket) on its own is decided with one
// native command, BITFIELD, on the bucket's one integer: its theoretical
// arrival time in nanoseconds (limits.State.TAT), kept as an unsigned
// 63-bit field. BITFIELD runs its operations in one atomic step, and its
// overflow rules make them conditional:
//
//   - under OVERFLOW SAT, INCRBY −now then +now leaves max(tat, now): the
//     clamp of every GCRA decision;
//   - under OVERFLOW FAIL, INCRBY (M − bound) fails, changing nothing, when
//     the value is above bound (M is the field's largest value), and the
//     next INCRBY (bound − M + d) then fails too; otherwise the two add d.
//     So "add d if tat ≤ bound" is one pair, and the first reply tells
//     whether it did;
//   - under OVERFLOW SAT, INCRBY (d + M − cap) then (cap − M) add d but stop
//     at cap: a count_refused charge, which consumes down to a period of
//     debt.
//
// The service then decides with limits.DecideWithin on max(tat, now), as
// the embedded store does, and checks that Redis moved the state where the
// Go algorithm does. A peek, or a hit that can never fit, reads the state
// with GET. A hit whose joint run is refused gives its tokens back (undo).
//
// The instant is the store's estimate of Redis's clock (redisClock),
// passed as an argument: a native command cannot read TIME. Since a bucket
// keeps a time, an instance whose estimate trails the one that moved the
// bucket last would see it a little less refilled than it is, and refuse
// the last token of a burst that the other would allow: so the key keeps,
// in a second u63 field, the latest instant any hit on it was decided at,
// which every hit moves up to its own (SAT INCRBY −now +now again), and a
// hit is decided at the later of the two. One that Redis refused at its
// own, earlier instant, and that the later one lets in, goes again at the
// later one (a second round trip, only then), twice at most: refused again
// and again, while other instances moved the key's latest instant on and
// took the tokens first, it is answered as Redis refused it, at its own
// instant (stricter than the later one, never looser). A disagreement at
// one instant, Redis refusing where Go allows or the other way round, is a
// bug or a key another build wrote: the hit fails (errDisagree).
//
// An undo cannot restore the state exactly: a concurrent hit that came
// between the charge and the undo clamped at its own instant a TAT that
// the charge had moved on, and taking the whole charge back would leave
// the bucket fuller than that hit left it (GCRA's max is not undone by a
// subtraction). So an undo gives back the charge less the time that may
// have passed since the state it moved, up to the latest instant a
// concurrent hit can have been decided at (Store.latest): exact when the
// bucket was not full, and otherwise at most that much of the charge kept,
// which is stricter, never looser.

// maxU63 is the largest value of a BITFIELD u63 field.
const maxU63 = 1<<63 - 1

// bucketPlan is what a bucket hit asks of Redis: the operands of its
// BITFIELD operations, which appendCond and appendSat render. It holds
// numbers, not the argument lists, so that a hit builds the one list it
// sends in one allocation (issue #13: the lists were half of what a bucket
// hit allocated).
type bucketPlan struct {
	// t is the hit's instant in nanoseconds: both clamps' operand.
	t int64
	// cond, when set, adds add if max(tat, t) ≤ bound (its third reply is
	// 0 when it does not); unset for a hit that can never fit, a peek and a
	// refund.
	cond       bool
	bound, add int64
	// sat, the first nsat of them, are SAT increments that move the state
	// whatever it holds, after the clamps: a refund's, or a count_refused
	// hit's charge, which is sent instead of cond (the service decides on
	// the state it answers).
	sat  [3]int64
	nsat int
	// ttl is the PEXPIRE, in milliseconds, that follows: the longest the
	// state can matter after the hit (it may outlive it, never the other
	// way round); nx for a refund, which never makes it matter longer.
	ttl int64
	nx  bool
}

// planBucket is the plan of a hit of cost on a bucket of l at now (µs),
// with the caller's deadline maxDelay (µs, 0: none). A plan with neither
// cond nor sat only reads the state: a peek, or a hit that can never fit.
// The bounds mirror tokenBucket and leakyBucket in package limits, which
// decide the hit; bucketHit.decide checks that they agree.
func planBucket(l limits.Limit, cost, now, maxDelay int64) bucketPlan {
	n, b, i := l.Requests, l.Capacity(), limits.Interval(l)
	leaky := l.Algorithm == limits.LeakyBucket
	p := bucketPlan{t: now * 1000}
	t := p.t
	debt := b + n // the most a token bucket's state may run ahead, in intervals
	if leaky {
		debt = b + n + 1
	}
	longest := t + (b+n)*i // the latest TAT: a count_refused debt
	fits := cost > 0 && (!leaky && cost <= b || leaky && cost-1 <= b)
	if fits {
		// The latest max(tat, now) at which the hit fits.
		p.bound = t + (b-cost)*i
		if leaky {
			p.bound = t + (b-cost+1)*i
			if maxDelay > 0 {
				p.bound = min(p.bound, t+maxDelay*1000)
			}
		}
		p.cond, p.add = true, cost*i
	}
	switch {
	case cost < 0:
		p.sat, p.nsat = [3]int64{-min(-cost, debt) * i, -t, t}, 3
		p.nx = true
	case cost > 0 && l.CountRefused:
		d := min(cost, debt) * i
		p.sat, p.nsat = [3]int64{d + maxU63 - longest, longest - maxU63}, 2
	case !fits:
		return p // a peek, or a hit that can never fit
	}
	if !l.CountRefused {
		longest = t + b*i
		if leaky {
			longest += i
		}
	}
	p.ttl = ttlMillis(ceilDiv(longest-t, 1000))
	return p
}

// Lengths of the BITFIELD argument lists of a plan.
const (
	clampArgs = 18             // OVERFLOW SAT and four INCRBY
	condArgs  = clampArgs + 10 // and OVERFLOW FAIL, two INCRBY
	satArgs   = clampArgs + 12 // and up to three INCRBY
)

// appendClamp appends the clamps of both fields to their max with t, under
// OVERFLOW SAT.
func (p *bucketPlan) appendClamp(dst []any) []any {
	neg, pos := any(-p.t), any(p.t) // boxed once, used twice
	return append(dst, "overflow", "sat", "incrby", "u63", "#1", neg, "incrby", "u63", "#1", pos,
		"incrby", "u63", 0, neg, "incrby", "u63", 0, pos)
}

// appendCond appends the clamps and the conditional add (the plan has
// cond).
func (p *bucketPlan) appendCond(dst []any) []any {
	return append(p.appendClamp(dst), "overflow", "fail", "incrby", "u63", 0, maxU63-p.bound,
		"incrby", "u63", 0, p.bound-maxU63+p.add)
}

// appendSat appends the clamps and the plan's SAT increments (it has some).
func (p *bucketPlan) appendSat(dst []any) []any {
	dst = p.appendClamp(dst)
	for _, d := range p.sat[:p.nsat] {
		dst = append(dst, "incrby", "u63", 0, d)
	}
	return dst
}

// isBucket reports whether a is a token or leaky bucket.
func isBucket(a limits.Algorithm) bool {
	return a == limits.TokenBucket || a == limits.LeakyBucket
}

// ceilDiv is ceil(a/b) for a ≥ 0, b > 0.
func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// bucketHit is one bucket hit on its own.
type bucketHit struct {
	i     int // its index in the call's hits and results
	limit limits.Limit
	cost  int64
	now   int64 // µs
	delay int64 // the caller's deadline, µs (0: none)
	key   string
	op    *redis.IntSliceCmd // BITFIELD: a hit that moves the state
	// expire is op's PEXPIRE, whose error fails the hit as op's would: a
	// bucket must not live without a TTL unnoticed.
	expire *redis.IntCmd
	cond   bool             // op is the plan's cond
	get    *redis.StringCmd // GET: a peek, or a hit that can never fit
	add    int64            // the plan's add: what cond adds, in ns
	ttl    int64            // the plan's PEXPIRE, ms
	// refund is a refund's commands, held back until its run is allowed
	// (refundLater).
	refund []redis.Cmder
	// last is set on the last attempt (decideAgain): a hit that Redis
	// refuses then is answered as refused at its own instant.
	last bool
}

// newBucketHit queues in wk the commands of hit h at now. A refund held
// back (refundLater) queues a GET, and keeps its own commands for later.
func newBucketHit(ctx context.Context, i int, h *limits.Hit, now int64, wk *work, refundLater bool) *bucketHit {
	bh := &bucketHit{i: i, limit: algorithmOnly(h.Limit), cost: h.Cost, now: now, delay: h.MaxDelayMicros(), key: h.Key}
	p := planBucket(h.Limit, h.Cost, now, bh.delay)
	bh.add, bh.ttl = p.add, p.ttl
	reads := !p.cond && p.nsat == 0 // a peek, or a hit that can never fit
	if reads || refundLater {
		bh.get = redis.NewStringCmd(ctx, "get", h.Key)
		wk.Cmds = append(wk.Cmds, bh.get)
	}
	if reads {
		return bh
	}
	key := any(h.Key)
	args := append(make([]any, 0, 2+satArgs), "bitfield", key)
	if p.nsat > 0 {
		args = p.appendSat(args)
	} else {
		args, bh.cond = p.appendCond(args), true
	}
	op := redis.NewIntSliceCmd(ctx, args...)
	expire := append(make([]any, 0, 4), "pexpire", key, p.ttl)
	if p.nx {
		expire = append(expire, "nx")
	}
	if refundLater {
		bh.refund = []redis.Cmder{op, redis.NewIntCmd(ctx, expire...)}
		return bh
	}
	bh.op, bh.expire = op, redis.NewIntCmd(ctx, expire...)
	wk.Cmds = append(wk.Cmds, op, bh.expire)
	return bh
}

// errDisagree marks a state that Redis moved elsewhere than the Go
// algorithm: a bug, or a key written by another build.
var errDisagree = errors.New("the state Redis moved and the algorithm disagree")

// bucketReplies is where the replies of a plan's operations are: the
// latest instant seen (max(seen, now)), max(tat, now), the conditional
// add's first increment (0 if refused), and the last one, the new TAT.
const (
	replySeen   = 1
	replyTAT    = 3
	replyCond   = 4
	replyBefore = 4 // replies before the plan's own operations
)

// decide decides the hit from its command's reply, at the later of its own
// instant and the latest one the key has seen. It reports, as again, that
// instant when the hit must go again at it: Redis refused it at its own,
// and the later one lets it in.
func (bh *bucketHit) decide(context.Context, *work) (res limits.Result, again int64, err error) {
	state, now, final, err := bh.state()
	if err != nil {
		return limits.Result{}, 0, err
	}
	d := limits.DecideWithin(bh.limit, state, bh.cost, now, bh.delay)
	switch {
	case bh.op == nil:
	case bh.cond && d.Result.Allowed && bh.op.Val()[replyCond] == 0 && now > bh.now && !bh.last:
		return limits.Result{}, now, nil
	case bh.cond && d.Result.Allowed && bh.op.Val()[replyCond] == 0 && now > bh.now:
		// Refused by Redis at its own instant, again and again while
		// other hits moved the key's latest instant on: refused, as the
		// algorithm decides at the instant Redis refused it at. Stricter
		// than the later instant, never looser.
		d = limits.DecideWithin(bh.limit, limits.State{Live: state.Live, TAT: state.TAT}, bh.cost, bh.now, bh.delay)
		if d.Result.Allowed {
			return limits.Result{}, 0, fmt.Errorf("%w: %s, cost %d: Redis refused at %d, where Go allows", errDisagree, bh.limit, bh.cost, bh.now)
		}
		return d.Result, 0, nil
	case bh.cond && d.Result.Allowed != (bh.op.Val()[replyCond] != 0):
		return limits.Result{}, 0, fmt.Errorf("%w: %s, cost %d: Redis allowed %v", errDisagree, bh.limit, bh.cost, !d.Result.Allowed)
	case !d.Changed || max(d.State.TAT, now*1000) == max(final, now*1000):
		// A refund at an earlier instant may leave the bucket full earlier
		// than the later one says: full either way.
	case now > bh.now && final <= d.State.TAT && d.State.TAT-final <= (now-bh.now)*1000:
		// Decided at the later instant the key has seen, the hit moved the
		// bucket from its own: where the state was below that instant (a
		// refund from an instance whose clock trails clamps at its own),
		// Redis's clamp and bound stop short of the later instant's by at
		// most the difference of the two, as if the hit had come at its
		// own instant.
	case !bh.cond && !d.Result.Allowed && now > bh.now:
		// A count_refused debt stopped at the earlier instant's bound:
		// short of the later one's by the difference of the two.
	default:
		return limits.Result{}, 0, fmt.Errorf("%w: %s, cost %d: TAT %d in Redis, %d in Go", errDisagree, bh.limit, bh.cost, final, d.State.TAT)
	}
	return d.Result, 0, nil
}

// state reads the bucket's state from the hit's replies, and the instant
// to decide it at: the later of the hit's own and the latest the key has
// seen; final is the TAT its BITFIELD left (a hit that moves the state).
func (bh *bucketHit) state() (state limits.State, now, final int64, err error) {
	now = bh.now
	if bh.get != nil {
		tat, seen, ok, err := tatOf(bh.get)
		if err != nil {
			return limits.State{}, 0, 0, err
		}
		return limits.State{Live: ok, TAT: tat}, max(now, ceilDiv(seen, 1000)), 0, nil
	}
	// A reply that arrived wins over the error go-redis sets on every
	// command of a pipeline that failed part way (see run.results).
	v := bh.op.Val()
	if len(v) < replyBefore+2 {
		if err := bh.op.Err(); err != nil {
			return limits.State{}, 0, 0, err
		}
		return limits.State{}, 0, 0, fmt.Errorf("%w: BITFIELD %v", errReply, v)
	}
	if err := bh.expire.Err(); err != nil {
		return limits.State{}, 0, 0, err
	}
	if v[replyTAT] > bh.now*1000+implausible(bh.limit) || v[replySeen] > bh.now*1000+int64(time.Minute) {
		// Not a bucket: BITFIELD reads any string as bits.
		return limits.State{}, 0, 0, fmt.Errorf("%w under key %s", errMalformed, bh.key)
	}
	now = max(now, ceilDiv(v[replySeen], 1000))
	return limits.State{Live: v[replyTAT] > now*1000, TAT: v[replyTAT]}, now, v[len(v)-1], nil
}

// resend queues in wk hit h again at the later instant at that decide
// asked for; last marks the last attempt.
func (bh *bucketHit) resend(ctx context.Context, h *limits.Hit, at int64, wk *work, last bool) pending {
	again := newBucketHit(ctx, bh.i, h, at, wk, false)
	again.last = last
	return again
}

// implausible is how far ahead of now, in nanoseconds, a bucket's TAT
// cannot be: twice its longest debt, and a minute for the clocks of
// instances that disagree.
func implausible(l limits.Limit) int64 {
	return 2*(l.Capacity()+l.Requests+1)*limits.Interval(l) + int64(time.Minute)
}

// tatOf reads a bucket's state from a GET: the TAT, the latest instant
// seen, and whether the key exists.
func tatOf(cmd *redis.StringCmd) (tat, seen int64, ok bool, err error) {
	v, err := cmd.Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return 0, 0, false, nil
	case err != nil:
		return 0, 0, false, err
	}
	tat, seen, ok = decodeBucket(v)
	if !ok {
		return 0, 0, false, fmt.Errorf("%w under key %s", errMalformed, cmd.Args()[1])
	}
	return tat, seen, true, nil
}

// decodeBucket reads a bucket's BITFIELD string: the u63 at offset 0 (the
// TAT, bits 0–62, big-endian) and the u63 at #1 (the latest instant seen,
// bits 63–125).
func decodeBucket(v []byte) (tat, seen int64, ok bool) {
	if len(v) != 16 {
		return 0, 0, false
	}
	tat = int64(binary.BigEndian.Uint64(v) >> 1)
	seen = int64(uint64(v[7]&1)<<62 | binary.BigEndian.Uint64(v[8:])>>2)
	return tat, seen, true
}

// undo queues in back what gives the hit's tokens back, its run refused:
// what cond added, less the time from the state it moved (max(tat, now))
// up to u.latest, the latest instant a concurrent hit can have clamped the
// key at (ns; see the doc above). Saturating, never below zero, with
// PEXPIRE … NX for a key that expired meanwhile. A refused hit, a peek, a
// refund and a count_refused charge have nothing to undo.
func (bh *bucketHit) undo(ctx context.Context, back *work, u undoing) {
	if bh.op == nil || !bh.cond || bh.op.Val()[replyCond] == 0 {
		return
	}
	moved := bh.op.Val()[replyTAT]
	if give := bh.add - min(bh.add, max(0, u.latest*1000-moved)); give > 0 {
		back.Cmds = append(back.Cmds,
			// The second field's INCRBY of 0 keeps a key that expired
			// meanwhile, and that this creates, a bucket's 16 bytes.
			redis.NewIntSliceCmd(ctx, "bitfield", bh.key, "overflow", "sat", "incrby", "u63", 0, -give, "incrby", "u63", "#1", 0),
			redis.NewIntCmd(ctx, "pexpire", bh.key, bh.ttl, "nx"))
	}
}
