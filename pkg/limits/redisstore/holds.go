package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// A hold (limits.Hold: a request's cost reserved by its id, settled when
// the request ends) is a wrapper around any kind's hit (holdHit around a
// pending, as a lockout's lockedHit is), decided in the same round as
// every hit: its own commands go in the call's pipeline beside the kind's,
// and the kind decides with package limits' function as it always does.
// Redis keeps, beside the kind's keys and under the same hash tag (the
// hit key followed by a suffix):
//
//	key!hold:ID   the hold's record, "cost instant until" (µs), a string
//	              with a TTL of the longer of the lease and the time the
//	              reserved charge matters (its window's, or the period),
//	              and a second
//	key!holds     the key's holds: a sorted set of their ids, scored by
//	              their lease's end, with the TTL of the newest record
//
// and a hit is
//
//   - a reserve: the kind's plain hit of its cost, SET key!hold:ID
//     "?cost instant until" NX GET PX, ZADD key!holds NX and PEXPIRE in
//     the pipeline. The SET answers whether the id was held already: if
//     not, the record is the hit's own, pending, and the hit is decided
//     as any hit; an admitted run confirms it after the answer (SET … XX
//     GET of "cost instant until"), a refused one deletes it (GETDEL). A
//     settle that finds a record pending gives nothing back (its
//     reserve's run may yet be refused, and giving back a cost never held
//     would loosen the limit) and keeps its charge (below): the reserve
//     whose confirmation then finds its record gone gives its own cost
//     back. A live record makes the hit a
//     repeated reserve: answered allowed with what a peek would read (the
//     answer less its own charge), its charge undone after the answer. A
//     lapsed record found there is taken over after the answer (GETDEL,
//     its cost given back by whoever's GETDEL returned it, and the new
//     record SET … NX if the run was allowed).
//   - a settle: the kind's plain hit of its cost, GETDEL key!hold:ID and
//     ZREM key!holds ID in the pipeline. A live confirmed record makes it
//     a settle of that hold: the held cost is given back after the answer
//     (into the window of its instant for a window; at the settle's
//     instant for a bucket, as much of it as is still ahead of that
//     instant in the state the settle read, so that given back after the
//     settle's charge it leaves what giving it back first would; a log
//     removes the hold's own members, what of them is still in it) and
//     the charge is kept even if it did not fit: a window's or a log's,
//     in Redis already, stays; a bucket's, which a refusal left out, is
//     charged again as a count_refused charge after the answer, before
//     the held cost is given back, so that no moment counts neither. Its answer is limits.Settle's on the state
//     the hit read (a window's counts, a bucket's TAT); a log's, which
//     did not read its members, is the plain hit's count moved by the
//     cost given back, its charge the newest entry. A pending record
//     (the settle came within a round trip of its reserve's answer,
//     before the confirmation) makes it keep its charge as a settle of a
//     live hold does, and the reserve, finding its record gone, gives its
//     own cost back if it was admitted; if it was refused, the settle's
//     charge stays even where a plain hit would not have fitted
//     (stricter: the request's cost charged, though it was refused). No
//     record or a lapsed one makes it a plain hit,
//     exactly as without a Hold (a lapsed cost given back as well: the
//     settle's GETDEL owns it).
//   - a reserve is decided with limits.ReserveLimit (all or nothing,
//     count_refused or not). On a sliding log its members are named by
//     the id (ZADD … NX, so that a repeat adds none). On a concurrency
//     limit so are its slots, held until the earlier of its instant +
//     the period and the lease's end; a settle removes
//     those members (ZREM of the first slotsAtOnce in the pipeline, the
//     others after the answer) and charges nothing; a settle of no hold
//     frees nothing.
//   - every hit of a domain with holds (Lease set) reads, in the same
//     pipeline, up to lapseScan ids of the key whose lease has ended
//     (ZRANGE key!holds -inf now BYSCORE LIMIT); after the answer it
//     GETDELs their records, and gives back the costs its GETDEL returned:
//     a lapsed hold is given back once, by one caller, after the answer
//     of the first call on the key to see it (which still counts it:
//     stricter by one decision, never looser).
//
// So a reserve and a settle are one round trip each, and the work after
// the answer is that of an undo: until it is done, the held cost counts
// (stricter, never looser). A hit without a Hold sends what it always
// did. A lockout decides a hold's plain hit as any hit's, but a repeated
// reserve and a settle of a live hold start no lock (lockedHit.quiet).
// The previous window's count that a sliding window keeps as final
// (prevCounts) does not see a cost given back into it: stricter, until
// that window has gone.

// The suffixes of a hold's keys: no other key ends in "!hold:…" or
// "!holds" (lockout.go).
const (
	holdSep     = "!hold:"
	holdsSuffix = "!holds"
)

// lapseScan is how many lapsed holds one hit finds and gives back.
const lapseScan = 4

func holdKey(key, id string) string { return key + holdSep + id }
func holdsKey(key string) string    { return key + holdsSuffix }

// holdRecord is what a hold's record keeps: its cost, its instant and
// its lease's end (µs), and whether its reserve's run is still to be
// known admitted (pending: written "?cost at until" in the reserve's
// pipeline, confirmed after the answer of an admitted run).
type holdRecord struct {
	cost, at, until int64
	pending         bool
}

func (r holdRecord) String() string {
	s := strconv.FormatInt(r.cost, 10) + " " + strconv.FormatInt(r.at, 10) + " " + strconv.FormatInt(r.until, 10)
	if r.pending {
		return "?" + s
	}
	return s
}

// recordOf reads a record from a SET … GET or a GETDEL: found false for
// none.
func recordOf(cmd *redis.StringCmd) (holdRecord, bool, error) {
	v, err := cmd.Result()
	switch {
	case errors.Is(err, redis.Nil):
		return holdRecord{}, false, nil
	case err != nil:
		return holdRecord{}, false, err
	}
	var rec holdRecord
	v, rec.pending = strings.CutPrefix(v, "?")
	var parts [3]int64
	for i := range parts {
		f, rest, _ := strings.Cut(v, " ")
		n, perr := strconv.ParseInt(f, 10, 64)
		if perr != nil {
			return holdRecord{}, false, fmt.Errorf("%w under key %s", errMalformed, cmd.Args()[1])
		}
		parts[i], v = n, rest
	}
	rec.cost, rec.at, rec.until = parts[0], parts[1], parts[2]
	return rec, true, nil
}

// holdTTL is the TTL of a record of a hold of l from at for lease µs, in
// milliseconds: the longer of the lease and the time its cost matters
// (a window's, until the count stops mattering), and a second, so that a
// call finds it lapsed and gives its cost back.
func holdTTL(l limits.Limit, at, lease int64) int64 {
	life := l.PeriodMicros()
	if isWindow(l.Algorithm) {
		life = windowEnd(l, at) - at
	}
	return ttlMillis(max(lease, life)) + 1000
}

// windowEnd is when the count of at's window stops mattering: its end,
// or the next one's for a sliding window.
func windowEnd(l limits.Limit, at int64) int64 {
	f := limits.WindowFrame(l, at)
	if l.Algorithm == limits.SlidingWindow {
		return f.Next
	}
	return f.End
}

// holdRole is what a hit does with its hold.
type holdRole uint8

const (
	holdOnly    holdRole = iota // no reserve, no settle: the lapse scan only
	holdReserve                 // limits.Hit.Reserves
	holdSettle                  // limits.Hit.Settles
)

// holdHit is a hit with a Hold: the kind's hit and the hold's commands.
type holdHit struct {
	pending
	s   *Store
	key string
	id  string
	// setKey and recKey are the key's set of holds and, for a reserve or
	// a settle, its id's record (holdsKey, holdKey), made once for the
	// hit's commands.
	setKey, recKey string
	limit          limits.Limit
	cost           int64
	now            int64
	latest         int64 // Store.latest, for an undo decided here
	role           holdRole
	slots          bool // a concurrency limit's: its slots are named by the id
	named          bool // a reserve whose members are named by the id (isNamed)
	// lapsed reads the key's lapsed holds; rec is a reserve's SET … GET
	// or a settle's GETDEL; mine is the record a reserve writes.
	lapsed *redis.StringSliceCmd
	rec    *redis.StringCmd
	mine   holdRecord
	// confirm is an admitted reserve's SET … XX GET of its record, sent
	// after the answer if its run is allowed (refundLater).
	confirm *redis.StringCmd
	writes  writes
	// owns is set on a reserve whose SET wrote the record; done on a hit
	// whose decide queued all its charge needs (undo then does nothing);
	// undone once its run is refused, read by work after the answer.
	owns, done, undone bool
	confirmWanted      bool
}

// newHoldHit queues in wk the commands of hit h, which has a Hold, at
// now: its kind's and its hold's.
func (s *Store) newHoldHit(ctx context.Context, i int, h *limits.Hit, now int64, prevs *prevCounts, wk *work, later bool) pending {
	lease := h.Hold.Lease.Microseconds()
	hh := &holdHit{s: s, key: h.Key, id: h.Hold.ID, limit: h.Limit, cost: h.Cost, now: now, latest: s.latest(now),
		slots: h.Limit.Algorithm == limits.Concurrency && !h.Limit.Blocks()}
	hh.setKey = holdsKey(h.Key)
	hh.lapsed = redis.NewStringSliceCmd(ctx, "zrange", hh.setKey, "-inf", now, "byscore", "limit", 0, lapseScan)
	wk.Cmds = append(wk.Cmds, hh.lapsed)
	switch {
	case h.Reserves():
		res := limits.NewReservation(h.Limit, h.Cost, now, h.Hold.Lease)
		hh.role, hh.mine = holdReserve, holdRecord{cost: res.Cost, at: res.At, until: res.Until}
		hh.recKey = holdKey(h.Key, hh.id)
		hh.pending = s.newReserve(ctx, i, h, now, prevs, wk, later)
		hh.limit, hh.named = limits.ReserveLimit(h.Limit, h.Hold.Lease), isNamed(h.Limit)
		ttl := holdTTL(h.Limit, now, lease)
		pending := hh.mine
		pending.pending = true
		hh.rec = redis.NewStringCmd(ctx, "set", hh.recKey, pending.String(), "px", ttl, "nx", "get")
		hh.confirm = redis.NewStringCmd(ctx, "set", hh.recKey, hh.mine.String(), "px", ttl, "xx", "get")
		wk.Cmds = append(wk.Cmds, hh.rec,
			hh.writes.keep(redis.NewIntCmd(ctx, "zadd", hh.setKey, "nx", hh.mine.until, hh.id)),
			hh.writes.keep(redis.NewIntCmd(ctx, "pexpire", hh.setKey, ttl)))
	case h.Settles():
		hh.role, hh.recKey = holdSettle, holdKey(h.Key, hh.id)
		hh.rec = redis.NewStringCmd(ctx, "getdel", hh.recKey)
		wk.Cmds = append(wk.Cmds, hh.rec, hh.writes.keep(redis.NewIntCmd(ctx, "zrem", hh.setKey, hh.id)))
		if hh.slots {
			hh.pending = newSlotsRelease(ctx, h, now, wk)
		} else {
			hh.pending = s.newPending(ctx, i, h, now, prevs, wk, later)
		}
	default:
		hh.pending = s.newPending(ctx, i, h, now, prevs, wk, later)
	}
	return hh
}

// isNamed reports whether a hold's reserve on l adds members named by its
// id (holdMembers): a concurrency limit's slots, a sliding log's entries.
func isNamed(l limits.Limit) bool {
	return !l.Blocks() && (l.Algorithm == limits.Concurrency || l.Algorithm == limits.SlidingLog)
}

// newReserve queues in wk the kind's hit of reserve h, decided with
// limits.ReserveLimit (all or nothing): a concurrency limit's and a
// sliding log's with members named by the id.
func (s *Store) newReserve(ctx context.Context, i int, h *limits.Hit, now int64, prevs *prevCounts, wk *work, later bool) pending {
	rh := *h
	rh.Limit = limits.ReserveLimit(h.Limit, h.Hold.Lease)
	switch {
	case !isNamed(h.Limit):
		return s.newPending(ctx, i, &rh, now, prevs, wk, later)
	case h.Limit.Algorithm == limits.Concurrency:
		return s.lockedIf(ctx, newHoldSlots(ctx, i, h, now, s.pipes, wk), h, now, wk)
	}
	return s.lockedIf(ctx, newHoldLog(ctx, i, &rh, now, wk), h, now, wk)
}

// lockedIf wraps p in its lockout, if h's limit has one (newPending).
func (s *Store) lockedIf(ctx context.Context, p pending, h *limits.Hit, now int64, wk *work) pending {
	if h.Limit.BlockFor > 0 {
		return newLockedHit(ctx, p, h, now, wk, false)
	}
	return p
}

// decide decides the kind's hit, then what its hold makes of it; the
// lapsed holds the pipeline found are given back after the answer.
func (hh *holdHit) decide(ctx context.Context, back *work) (limits.Result, int64, error) {
	old, found, err := hh.record()
	if err != nil {
		return limits.Result{}, 0, err
	}
	live := found && old.until > hh.now
	if lk, ok := hh.pending.(*lockedHit); ok && live && (hh.role == holdReserve || !old.pending) {
		lk.quiet = true // a repeat's, or a settle's, charge is not a request's
	}
	r, again, err := hh.pending.decide(ctx, back)
	if err != nil || again > 0 {
		return r, again, err
	}
	if err := firstErr(hh.writes.err(), hh.sweep(ctx, back)); err != nil {
		return limits.Result{}, 0, err
	}
	switch {
	case hh.role == holdReserve && live:
		return hh.repeated(ctx, back, r), 0, nil
	case hh.role == holdReserve:
		hh.owns = !found
		if found { // lapsed: taken over
			hh.takeOver(ctx, back, old, r.Allowed)
		} else if r.Allowed {
			hh.confirmed(back)
		}
		r.Hold = limits.HoldRefused
		if r.Allowed {
			r.Hold = limits.HoldReserved
		}
		if hh.named {
			r = hh.heldUntil(r)
		}
	case hh.role == holdSettle && live && !old.pending:
		return hh.settled(ctx, back, r, old), 0, nil
	case hh.role == holdSettle && live:
		// The reserve's confirmation has not run yet (the settle came
		// right after its answer): its charge is kept as a settle's, and
		// the reserve, finding its record gone, gives its own cost back.
		// Decided as a plain hit, a refused charge would be undone and
		// the actual cost never charged.
		hh.done = true
		hh.keepCharge(ctx, back, r)
		r.Hold = limits.HoldSettled
		return r, 0, nil
	case hh.role == holdSettle:
		// A pending record's reserve gives its own cost back, if admitted,
		// when it finds the record gone (confirmed).
		if found && !old.pending { // lapsed: the settle's GETDEL owns its cost
			hh.giveBack(ctx, back, hh.id, old)
		}
		r.Hold = limits.HoldUnheld
	}
	return r, 0, nil
}

// record is the record the hit's SET … GET or GETDEL found.
func (hh *holdHit) record() (holdRecord, bool, error) {
	if hh.rec == nil {
		return holdRecord{}, false, nil
	}
	return recordOf(hh.rec)
}

// repeated answers a reserve of an id held already: allowed, with what a
// peek reads (the kind's answer less the hit's own charge), charging
// nothing: its charge is undone after the answer.
func (hh *holdHit) repeated(ctx context.Context, back *work, r limits.Result) limits.Result {
	hh.done = true
	if hh.named { // its ZADD … NX added none of the id's members
		if !r.Allowed {
			// A refusal's count is the set's less the members the hit
			// would have added, which were the first reserve's.
			r.Remaining = max(0, r.Remaining-hh.cost)
		}
		r = hh.heldUntil(limits.Result{Allowed: true, Remaining: r.Remaining, ResetAfter: r.ResetAfter})
		r.Hold = limits.HoldRepeated
		return r
	}
	hh.unCharge(ctx, back, r.Allowed)
	if st, ok := hh.stateRead(); ok {
		r = limits.Repeated(hh.limit, st, hh.now)
	} else if r.Allowed {
		r.Remaining = min(r.Remaining+hh.cost, hh.limit.Capacity())
	}
	return limits.Result{Allowed: true, Remaining: r.Remaining, ResetAfter: r.ResetAfter, Hold: limits.HoldRepeated}
}

// unCharge queues in back what takes back the kind's charge of the hit:
// its undo, or for a count_refused limit, whose undo keeps it, a refund
// of an allowed charge (a refused one, over the limit, stays counted:
// stricter).
func (hh *holdHit) unCharge(ctx context.Context, back *work, allowed bool) {
	switch {
	case !hh.limit.CountRefused:
		hh.pending.undo(ctx, back, undoing{latest: hh.latest})
	case allowed:
		hh.s.queueHit(ctx, back, hh.key, algorithmOnly(hh.limit), -hh.cost, hh.now)
	}
}

// settled answers a settle of a live hold, old: its cost given back, the
// settle's kept whether it fits or not, both after the answer; the
// answer is the charge's with old's cost given back where it counts.
func (hh *holdHit) settled(ctx context.Context, back *work, r limits.Result, old holdRecord) limits.Result {
	hh.done = true
	if hh.slots {
		hh.giveBack(ctx, back, hh.id, old)
		hh.freeRest(ctx, back, old.cost)
		r.Hold = limits.HoldSettled
		return r
	}
	hh.keepCharge(ctx, back, r)
	// Given back last, after the charge: until then both count (stricter,
	// never looser).
	hh.giveBack(ctx, back, hh.id, old)
	if exact, ok := hh.settledAnswer(old); ok {
		exact.Hold = limits.HoldSettled
		return exact
	}
	// The algorithm's answer: the lock neither decides a settle nor is
	// moved by it.
	credit := hh.credit(old)
	r.Locked, r.Delay = false, 0
	if r.Allowed {
		r.Remaining = min(r.Remaining+credit, hh.limit.Capacity())
	} else {
		r.Allowed = hh.cost <= r.Remaining+credit
		r.Remaining = max(0, min(r.Remaining+credit-hh.cost, hh.limit.Capacity()))
		if r.Allowed {
			r.RetryAfter = 0
		}
	}
	if hh.cost > 0 {
		// A log's charge, kept, is its newest entry: all of the log is
		// free a period after it, and a refused charge fits no sooner.
		r.ResetAfter = micros(hh.limit.PeriodMicros())
		if !r.Allowed {
			r.RetryAfter = r.ResetAfter
		}
	}
	r.Hold = limits.HoldSettled
	return r
}

// keepCharge keeps a settle's charge whether it fitted or not. A
// window's or a log's charge of at most N is in Redis already, refused or
// not, and stays as it is: taken back and charged again, it would leave a
// moment when the held cost is given back and the actual one not yet
// charged, in which a concurrent reserve could pass where it does not
// fit. A bucket's refused hit changed nothing, nor did a window's or a
// log's of more than N (it only read): its charge goes again, as a
// count_refused one, after the answer.
func (hh *holdHit) keepCharge(ctx context.Context, back *work, r limits.Result) {
	l := hh.limit
	if r.Allowed || hh.cost <= 0 {
		return
	}
	if isBucket(l.Algorithm) || hh.cost > l.Requests && !l.CountRefused {
		hh.pending.undo(ctx, back, undoing{latest: hh.latest})
		hh.s.queueHit(ctx, back, hh.key, algorithmOnly(hh.limit), hh.cost, hh.now)
	}
}

// credit is how much of old's cost, given back, counts where the
// settle's charge was decided: all of it, but for a window when old's is
// an earlier one, and a log when old's charge has left it.
func (hh *holdHit) credit(old holdRecord) int64 {
	l := hh.limit
	switch {
	case isWindow(l.Algorithm) && limits.WindowFrame(l, old.at).W != limits.WindowFrame(l, hh.now).W:
		return 0
	case l.Algorithm == limits.SlidingLog && old.at <= hh.now-l.PeriodMicros():
		return 0
	}
	return old.cost
}

// undo queues in back what takes the hit's charge back, its run refused:
// the kind's undo, and a reserve's record, deleted (unrecord).
func (hh *holdHit) undo(ctx context.Context, back *work, u undoing) {
	hh.undone = true
	if hh.done {
		return
	}
	hh.pending.undo(ctx, back, u)
	if hh.owns {
		hh.unrecord(ctx, back)
	}
}

// refundLater is the kind's held-back refund and, for an admitted
// reserve, its record's confirmation: sent if the run is allowed.
func (hh *holdHit) refundLater() []redis.Cmder {
	cmds := hh.pending.refundLater()
	if hh.owns && hh.confirm != nil && hh.confirmWanted {
		cmds = append(slices.Clip(cmds), hh.confirm)
	}
	return cmds
}

// resend sends the kind's hit again (a bucket's: resender), the hold's
// commands as the first pipeline read them.
func (hh *holdHit) resend(ctx context.Context, h *limits.Hit, at int64, wk *work, last bool) pending {
	inner, ok := hh.pending.(resender)
	if !ok {
		return nil
	}
	again := *hh
	again.pending = inner.resend(ctx, h, at, wk, last)
	return &again
}
