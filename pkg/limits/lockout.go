package limits

import "time"

// A lockout is a limit with a BlockFor: "five failed logins, then locked
// for 15 minutes". A plain window forgets an attacker at its next
// boundary; a lockout keeps the key refused for BlockFor from the refusal
// that started the lock, whatever the algorithm's state says meanwhile.
//
//   - A hit that the algorithm refuses, on a key that is not locked,
//     starts a lock ending BlockFor later. A peek too (cost 0): it is
//     refused when a hit of cost 1 would be, and it is how Envoy checks a
//     request whose cost is charged after the response (a login's, only if
//     it failed), so its refusal is the refused attempt. A hit that can
//     never fit (a cost above MaxCost) does not: no attempt can succeed,
//     so it proves nothing.
//   - While locked, every hit of cost ≥ 0 (a peek too) is refused, with
//     Remaining 0 and RetryAfter and ResetAfter the time left on the lock.
//     A refusal during the lock does not extend it: the lock runs from the
//     first refusal. The refused hit is counted only if the limit is
//     count_refused (then as the algorithm counts a refused hit), so that a
//     count_refused window carries the attempts made during the lock into
//     the next one.
//   - A refund (cost < 0) lifts the lock, as it gives back what it
//     refunds; so does a reset (Resetter), which forgets the key.
//   - In a joint run, a locked limit refuses the run; a run refused by
//     another limit does not lock this one.
//
// The state keeps the lock's end (State.LockEnd) beside the algorithm's;
// the Redis store keeps it in a key of its own beside the counters, with
// the same decisions (LockAnswer).

// lockoutModifier is the lockout's entry in Modifiers. Its field is
// block_for, a duration (the limits file reads it as a Go duration, such
// as 15m: a number of seconds alone would hide its unit), which Validate
// bounds (validateBlockFor). It counts as its algorithm does: two limits
// of a list that differ only in their lock count alike.
//
// RLQS: a bucket is enforced by Envoy, with the token bucket this service
// assigns it, a share of the limit's rate, the same for every key of the
// bucket, refilled continuously. A lock keeps one key refused for a while
// after its own refusal, which no token bucket can express (it would have
// to stop refilling for that key alone, and Envoy does not tell this
// service which request was refused). So an RLQS bucket of a lockout is
// divided as the plain limit's rate, without the lock (RLQS reads
// Requests and Period alone), and the log says so when a stream first
// asks for one, rather than refusing a config that the RLS path enforces
// in full.
var lockoutModifier = Modifier{
	Name: "lockout",
	Fields: []Field{{
		Name: "block_for", Type: Duration, Noun: "block_for",
		Without: map[Algorithm]string{Concurrency: "its refusals say how many requests are in flight, not what a client did"},
	}},
	On:    func(l Limit) bool { return l.BlockFor > 0 },
	Build: func(l *Limit, r RuleFields) error { l.BlockFor = r.value("block_for").Duration; return nil },
	clear: func(l *Limit) { l.BlockFor = 0 },
	RLQS:  "a quota stream asks for a lockout (block_for): its bucket gets the limit's rate divided without the lock, which Envoy's token bucket cannot hold; ShouldRateLimit enforces it in full",
	Value: func(l Limit) any { return l.BlockFor },
}

// validateBlockFor checks BlockFor: none, or a lock that a store can keep
// (at least a millisecond, Redis's TTL resolution, at most MaxPeriod), on
// a limit whose refusal means something. A block rule refuses everything
// already, and a leaky bucket shapes: its refusal depends on the caller's
// deadline as much as on the key, so one caller's short deadline would
// lock everyone out; a concurrency limit's refusal depends on the
// requests in flight.
func (l Limit) validateBlockFor() error {
	switch {
	case l.BlockFor == 0:
		return nil
	case l.BlockFor < time.Millisecond:
		return fieldErrorf("block_for", "%s is shorter than a millisecond", l.BlockFor)
	case l.BlockFor > MaxPeriod:
		return fieldErrorf("block_for", "%s is longer than the maximum %s", l.BlockFor, MaxPeriod)
	case l.Blocks():
		return fieldErrorf("block_for", "is not for a block rule (requests_per_unit 0 refuses every request already)")
	case l.Algorithm == LeakyBucket:
		return fieldErrorf("block_for", "is not for a leaky_bucket, whose refusals depend on each caller's deadline: use token_bucket or a window")
	case l.Algorithm == Concurrency:
		return fieldErrorf("block_for", "is not for a concurrency limit, whose refusals say how many requests are in flight, not what a client did: use a window or token_bucket")
	}
	return nil
}

// BlockForMicros is BlockFor in microseconds.
func (l Limit) BlockForMicros() int64 { return l.BlockFor.Microseconds() }

// LockAnswer is a lockout's answer to a hit of cost at now, from its
// algorithm's own answer r on the key's state and the end of the key's
// lock (µs; zero or at most now: not locked). starts reports a refusal
// that starts a lock, ending at now + BlockFor. A store that keeps the
// lock apart from the algorithm's state (redisstore) decides with it, and
// so does Decide, so that every store answers alike.
func LockAnswer(l Limit, r Result, cost, end, now int64) (_ Result, starts bool) {
	switch {
	case l.BlockFor <= 0 || cost < 0:
		return r, false
	case end > now:
		return lockedResult(l, cost, end, now), false
	case !r.Allowed && cost <= l.MaxCost():
		return lockedResult(l, cost, now+l.BlockForMicros(), now), true
	}
	return r, false
}

// lockedResult is the refusal of a hit on a key locked until end.
func lockedResult(l Limit, cost, end, now int64) Result {
	left := micros(end - now)
	r := Result{ResetAfter: left, Locked: true}
	if cost <= l.MaxCost() {
		r.RetryAfter = left
	}
	return r
}

// lockout decides a hit of a limit with a BlockFor: its algorithm on the
// state, then the lock (see above).
func lockout(l Limit, s State, cost, now, maxDelay int64) Decision {
	inner := l
	inner.BlockFor = 0
	d := DecideWithin(inner, s, cost, now, maxDelay)
	end := int64(0)
	if s.Live {
		end = s.LockEnd
	}
	res, starts := LockAnswer(l, d.Result, cost, end, now)
	locked := cost >= 0 && end > now
	switch {
	case cost < 0:
		// A refund lifts the lock: its state, built anew, has none (a
		// refund changes the state of every algorithm).
		d.State.LockEnd = 0
	case locked && (!l.CountRefused || !d.Changed):
		// Refused, nothing counted: the key stays as it is, lock and all.
		d = Decision{}
	case locked:
		// count_refused: the hit is counted, and the lock stays.
		d.State.Live, d.State.LockEnd = true, end
		d.ExpireAt = max(d.ExpireAt, end)
	case starts:
		if !d.Changed {
			d.State, d.ExpireAt = s, stateExpiry(inner, s, now)
		}
		end = now + l.BlockForMicros()
		d.State.Live, d.State.LockEnd = true, end
		d.ExpireAt = max(d.ExpireAt, end)
		d.Changed, d.Locks = true, true
	}
	d.Result = res
	return d
}

// stateExpiry is the instant state s of limit l stops mattering at now, as
// the algorithm's own Decision says when it stores it (0 for an absent or
// stale key): what a lock kept beside an unchanged state must not cut
// short. Each algorithm's is its entry's (algorithmKind.expiry).
func stateExpiry(l Limit, s State, now int64) int64 {
	if !s.Live || !l.Algorithm.Implemented() || algorithms[l.Algorithm].expiry == nil {
		return 0
	}
	return algorithms[l.Algorithm].expiry(l, s, now)
}
