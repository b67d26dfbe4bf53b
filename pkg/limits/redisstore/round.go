package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/envoy-rls/envoy-rls/internal/redispipe"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// Decide implements limits.Store. All hits go out in one pipeline, which a
// cluster client splits into one round trip per node; with batching, that
// pipeline also carries the hits of concurrent calls, and a call whose ctx
// ends first returns at once, its hits failed with ctx's error.
//
// A run of hits is a hit on its own or a run of joint hits (Hit.Joint
// chains a hit to the next, up to the first hit without it); each hit of a
// run is decided on its own, and the run is charged only if every one of
// them allows (count_refused limits always keep their charge). The hits of
// one call are decided in order: a run that names a key an earlier run of
// the call names goes in a later round, after the earlier one has been
// decided (and undone), with the same instant.
//
// The keys of a joint run must share a hash tag (so that a cluster keeps
// them on one master) and differ: a run that repeats a key is not sent,
// every hit of it failed with limits.ErrRepeatedKey, as the embedded store
// does.
//
// Each result carries its own error, so a failure of one command (its node
// down, a key of the wrong type) leaves the others decided; a failure of
// one hit of a joint run, or an invalid limit in it, sets the error on
// every hit of the run, since the run cannot be decided without it (its
// other charges are undone). Hits beyond len(results) are not decided.
func (s *Store) Decide(ctx context.Context, hits []limits.Hit, results []limits.Result) {
	if len(results) < len(hits) {
		hits = hits[:len(results)]
	}
	if len(hits) == 0 {
		return
	}
	at, err := s.now(ctx, hits)
	if err != nil {
		failFrom(results[:len(hits)], err)
		return
	}
	dl, ok := ctx.Deadline()
	s.prevs.observe(dl, ok, time.Now())
	for first := 0; first < len(hits); {
		next, held := s.decideRound(ctx, hits, results, first, at)
		if held {
			first, at.provisional = next, false // the later rounds at the same instant
			continue
		}
		// A provisional instant that Redis's clock belied: its charges
		// are being undone, and the round goes again at the estimate.
		now, err := s.asked(ctx)
		if err != nil {
			failFrom(results[first:len(hits)], err)
			return
		}
		at = instant{micros: now}
	}
}

// failFrom sets err on every result.
func failFrom(results []limits.Result, err error) {
	for i := range results {
		results[i] = limits.Result{Err: err}
	}
}

// instant is the instant of a call, in µs since the epoch. A provisional
// one is this host's wall clock, read at local (localMicros), for a call
// that found no estimate of Redis's clock (Store.now): its round's
// pipeline carries a TIME, and its decisions stand only if that TIME
// shows Redis's clock could have read micros at local (redisClock.holds).
type instant struct {
	micros, local int64
	provisional   bool
}

// pending is one hit of a round, its commands queued in the call's
// pipeline: what every kind (window.go, bucket.go, log.go,
// concurrency.go, a block rule's, and a lockout around any of them,
// lockout.go) answers to, so that a round is the same loop for every
// kind: plan queues each hit's commands, one send, decide for each, the
// undos of the refused runs, and what they queue goes after the answer.
type pending interface {
	// decide decides the hit from its replies with package limits'
	// function, the one the embedded store decides with, and queues in
	// back what the decision sends after the answer (a window's missing
	// PEXPIRE, a lock's start). A later instant again > 0 asks for the
	// hit to be sent again at it (resender).
	decide(ctx context.Context, back *work) (res limits.Result, again int64, err error)
	// undo queues in back what takes the hit's charge back, its run
	// refused; its answer does not wait for it.
	undo(ctx context.Context, back *work, u undoing)
	// refundLater is a refund's commands held back until its run is
	// allowed (refundsLater), nil for any other hit.
	refundLater() []redis.Cmder
}

// resender is a hit that may ask to be sent again at a later instant
// (pending.decide): a bucket's (bucket.go). resend queues in wk the hit
// h at that instant, as the last attempt if last.
type resender interface {
	resend(ctx context.Context, h *limits.Hit, at int64, wk *work, last bool) pending
}

func (wh *windowHit) refundLater() []redis.Cmder { return wh.refund }
func (bh *bucketHit) refundLater() []redis.Cmder { return bh.refund }

// blockHit is a hit of a block rule (limits.Limit.Blocks): refused
// without a command, since Redis keeps nothing for it; its run is refused
// with it. A hit whose resend failed takes its place: nothing of it to
// undo.
type blockHit struct{}

func (blockHit) decide(context.Context, *work) (limits.Result, int64, error) {
	return limits.Result{}, 0, nil
}
func (blockHit) undo(context.Context, *work, undoing) {}
func (blockHit) refundLater() []redis.Cmder           { return nil }

// undoing is what an undo needs beyond the hit: whether the hit itself was
// allowed, and the latest instant (µs) a concurrent hit may have been
// decided at (Store.latest).
type undoing struct {
	allowed bool
	latest  int64
}

// span is one run of a round: hits[first..last].
type span struct{ first, last int }

// roundOnStack is the number of hits and runs a round holds on the stack,
// without allocating: a call is a few hits.
const roundOnStack = 8

// decideRound decides the runs of hits from first on, up to the first run
// that names a key an earlier one of the round names, and returns where it
// stopped: one pass that queues every hit's commands, one send, one pass
// that decides, one that undoes the refused runs, and their send.
//
// A round at a provisional instant (held false) whose TIME belies it
// decides nothing: its charges are undone aside (takeBack), and the call
// decides the runs from first again.
func (s *Store) decideRound(ctx context.Context, hits []limits.Hit, results []limits.Result, first int, at instant) (end int, held bool) {
	// A round's runs, and each hit's pending commands, by index in the
	// call's hits (nil for a hit of a run that was not sent).
	var runsOnStack [roundOnStack]span
	var pendOnStack [roundOnStack]pending
	pend := pendOnStack[:]
	if len(hits) > roundOnStack {
		pend = make([]pending, len(hits))
	}
	wk := &work{}
	var asked *redispipe.ClockAsk
	switch {
	case at.provisional && s.cluster:
		asked = s.pipes.Ask() // a master's TIME, beside the charges
	case at.provisional:
		wk.Clock = &redispipe.Probe{} // first in the pipeline, before the charges
	}
	runs, end := s.plan(ctx, hits, results, first, at, runsOnStack[:0], pend, wk)
	if wk.Decisions == 0 {
		return end, true
	}
	if len(wk.Cmds) == 0 { // every run is a block rule's: nothing sent, nothing charged
		at.provisional = false
	} else {
		s.send(ctx, wk)
	}
	if wk.Err != nil {
		s.expiries.forget()
		// The call stopped waiting: its commands may still be running, and
		// their replies are not for it to read.
		for _, r := range runs {
			failRun(hits, results, r, wk.Err)
		}
		return end, true
	}
	if at.provisional {
		if err := s.timeFor(ctx, wk, asked); err != nil {
			// The TIME failed, as the charges after it may have: the round
			// fails, its charges counted (stricter, never looser).
			for _, r := range runs {
				failRun(hits, results, r, err)
			}
			return end, true
		}
		if !s.pipes.Clock().Holds(at.local, at.micros) {
			s.takeBack(ctx, hits, results, runs, pend)
			return first, false
		}
	}
	back := &work{}
	s.decideHits(ctx, hits, results, runs, pend, back)
	s.undoRefused(ctx, results, runs, pend, back, s.latest(at.micros))
	s.sendBack(ctx, back)
	return end, true
}

// timeFor waits for the TIME that checks a provisional instant: the one
// in wk's pipeline on a single Redis, the master's sent beside it (asked)
// on a cluster, out at the same time, so that it costs no round trip more.
func (s *Store) timeFor(ctx context.Context, wk *work, asked *redispipe.ClockAsk) error {
	if asked == nil {
		return wk.Clock.Err()
	}
	return asked.Wait(ctx)
}

// takeBack undoes, aside, every charge of a round decided at a provisional
// instant that Redis's clock belied, as if each of its runs were refused:
// whatever it allowed was decided at the wrong instant. A bucket keeps its
// charge (keepBuckets: stricter, never looser), as does a count_refused
// limit's; its refunds only read (plan), so the round going again applies
// them once.
func (s *Store) takeBack(ctx context.Context, hits []limits.Hit, results []limits.Result, runs []span, pend []pending) {
	back := &work{}
	s.decideHits(ctx, hits, results, runs, pend, back)
	for _, r := range runs {
		for i := r.first; i <= r.last; i++ {
			if results[i].Err == nil {
				pend[i].undo(ctx, back, undoing{allowed: results[i].Allowed, latest: keepBuckets})
			}
		}
	}
	if len(back.Cmds) > 0 {
		s.sendAside(ctx, back)
	}
}

// keepBuckets is an instant (µs) so late that a bucket's undo given it as
// the latest a concurrent hit was decided at gives nothing back (and
// times 1000, in ns, still fits an int64).
const keepBuckets = int64(1) << 52

// plan queues in wk the commands of every run from first on, up to the
// first that repeats a key of an earlier one, keeps each hit's in pend,
// and returns the runs, appended to runs, and where it stopped. A run that
// cannot be decided (an invalid limit, a repeated key) has its error set
// here and sends nothing.
func (s *Store) plan(ctx context.Context, hits []limits.Hit, results []limits.Result, first int, at instant, runs []span, pend []pending, wk *work) ([]span, int) {
	now, prevs := at.micros, s.prevs
	if at.provisional {
		prevs = coldPrevs // no previous window's count taken as final on it
	}
	end := first
	for end < len(hits) {
		last := end
		for last < len(hits)-1 && hits[last].Joint {
			last++
		}
		if end > first && repeats(hits[first:end], hits[end:last+1]) {
			break
		}
		r := span{first: end, last: last}
		end = last + 1
		if err := validate(hits[r.first : r.last+1]); err != nil {
			for i := r.first; i <= r.last; i++ {
				results[i] = limits.Result{Err: err}
			}
			continue
		}
		refunds := refundsLater(hits[r.first : r.last+1])
		for i := r.first; i <= r.last; i++ {
			h := &hits[i]
			// A count_refused limit keeps what its hit does, whatever the
			// run's verdict: its refund need not wait, but at a
			// provisional instant, which may be belied, every refund waits.
			later := h.Cost < 0 && (at.provisional || refunds && !h.Limit.CountRefused)
			if h.Hold != (limits.Hold{}) {
				pend[i] = s.newHoldHit(ctx, i, h, now, prevs, wk, later)
				continue
			}
			pend[i] = s.newPending(ctx, i, h, now, prevs, wk, later)
		}
		runs = append(runs, r)
	}
	wk.Decisions = len(runs)
	return runs, end
}

// newPending queues in wk the commands of hit i, h, at now, as its kind
// sends them, and returns it as a pending hit: the one place a round
// tells the kinds apart.
func (s *Store) newPending(ctx context.Context, i int, h *limits.Hit, now int64, prevs *prevCounts, wk *work, later bool) pending {
	var p pending
	switch a := h.Limit.Algorithm; {
	case h.Limit.Blocks():
		return blockHit{}
	case isWindow(a):
		p = newWindowHit(ctx, i, h, now, s.expiries, prevs, wk, later)
	case isBucket(a):
		p = newBucketHit(ctx, i, h, now, wk, later)
	case a == limits.Concurrency:
		p = newConcHit(ctx, i, h, now, s.members, s.pipes, wk, later)
	default:
		p = newLogHit(ctx, i, h, now, s.members, wk, later)
	}
	if h.Limit.BlockFor > 0 {
		p = newLockedHit(ctx, p, h, now, wk, later)
	}
	return p
}

// refundsLater reports whether the refunds of run must wait for its
// verdict: a run that may be refused (one of its hits consumes, or peeks)
// and also refunds. A refund taken back after a refusal would have let a concurrent
// hit in where it did not fit, so such a refund only reads in the call's
// pipeline, and is applied with the undos, if its run is allowed. The
// service never sends one (the limits of a descriptor share its cost).
func refundsLater(run []limits.Hit) bool {
	if len(run) == 1 {
		return false
	}
	refusable, refunds := false, false
	for _, h := range run {
		refusable = refusable || h.Cost >= 0
		refunds = refunds || h.Cost < 0
	}
	return refusable && refunds
}

// decideHits decides every hit of the round from its replies (pending.decide),
// those that ask to go again at a later instant sent again until they are
// decided (decideAgain).
func (s *Store) decideHits(ctx context.Context, hits []limits.Hit, results []limits.Result, runs []span, pend []pending, back *work) {
	var again []retry
	for _, r := range runs {
		for i := r.first; i <= r.last; i++ {
			again = s.decideOne(ctx, hits, results, pend, back, i, again)
		}
	}
	s.decideAgain(ctx, hits, results, again, pend, back)
}

// retry is hit i, to be sent again at instant at (pending.decide).
type retry struct {
	i  int
	at int64
}

// decideOne decides hit i into results[i], or appends it to again.
func (s *Store) decideOne(ctx context.Context, hits []limits.Hit, results []limits.Result, pend []pending, back *work, i int, again []retry) []retry {
	res, at, err := pend[i].decide(ctx, back)
	switch {
	case err != nil:
		res = limits.Result{Err: storeError(hits[i].Limit.Algorithm.String(), err)}
	case at > 0:
		return append(again, retry{i, at})
	}
	results[i] = res
	return again
}

// undoRefused queues in back the undo of every run that a hit of it
// refused, or failed: then every hit of the run fails with the first
// error. A hit that failed is not undone: whether it charged is unknown,
// and keeping a charge is stricter, never looser.
func (s *Store) undoRefused(ctx context.Context, results []limits.Result, runs []span, pend []pending, back *work, latest int64) {
	for _, r := range runs {
		refused := false
		var err error
		for i := r.first; i <= r.last; i++ {
			refused = refused || !results[i].Allowed
			if err == nil {
				err = results[i].Err
			}
		}
		if !refused {
			for i := r.first; i <= r.last; i++ {
				back.Cmds = append(back.Cmds, pend[i].refundLater()...)
			}
			continue
		}
		for i := r.first; i <= r.last; i++ {
			if results[i].Err == nil {
				pend[i].undo(ctx, back, undoing{allowed: results[i].Allowed, latest: latest})
			}
			if results[i].Hold == limits.HoldReserved {
				results[i].Hold = limits.HoldRefused // a refused run holds nothing
			}
		}
		if err != nil {
			for i := r.first; i <= r.last; i++ {
				results[i] = limits.Result{Err: err}
			}
		}
	}
}

// decideAgain sends again the hits that asked to go at the later instant
// their key has seen (bucketHit.decide), twice at most: the third
// attempt is answered as Redis decides it at its own instant. A hit sent
// again takes its first one's place in pend.
func (s *Store) decideAgain(ctx context.Context, hits []limits.Hit, results []limits.Result, again []retry, pend []pending, back *work) {
	for attempt := 0; len(again) > 0; attempt++ {
		wk := &work{Decisions: len(again)}
		sent := again[:0]
		for _, r := range again {
			if rs, ok := pend[r.i].(resender); ok {
				if p := rs.resend(ctx, &hits[r.i], r.at, wk, attempt >= 1); p != nil {
					pend[r.i] = p
					sent = append(sent, r)
					continue
				}
			}
			results[r.i] = limits.Result{Err: storeError(hits[r.i].Limit.Algorithm.String(), errNoResend)}
			pend[r.i] = blockHit{} // nothing of it to undo
		}
		if again = sent; len(again) == 0 {
			return
		}
		s.send(ctx, wk)
		if err := firstErr(wk.Err, context.Cause(ctx)); err != nil {
			for _, r := range again {
				results[r.i] = limits.Result{Err: storeError(hits[r.i].Limit.Algorithm.String(), err)}
				// Sent or not, its charge is not for this call to read:
				// nothing of it to undo.
				pend[r.i] = blockHit{}
			}
			return
		}
		next := again[:0]
		for _, r := range again {
			next = s.decideOne(ctx, hits, results, pend, back, r.i, next)
		}
		again = next
	}
}

// errNoResend fails a hit that asked to go again but cannot: a bug.
var errNoResend = errors.New("asked to go again, and cannot")

// failRun sets err, as the run's failure, on every hit of the run.
func failRun(hits []limits.Hit, results []limits.Result, r span, err error) {
	what := hits[r.first].Limit.Algorithm.String()
	if r.last > r.first {
		what = fmt.Sprintf("joint run of %d hits", r.last-r.first+1)
	}
	err = storeError(what, err)
	for i := r.first; i <= r.last; i++ {
		results[i] = limits.Result{Err: err}
	}
}

// repeats reports whether a hit of run names a key that a hit of before
// names: an earlier run's charge is undone only after the round's replies,
// so a later hit on its key would see it. Calls are a few hits long:
// comparing each pair costs less than a map.
func repeats(before, run []limits.Hit) bool {
	for i := range run {
		for j := range before {
			if before[j].Key == run[i].Key {
				return true
			}
		}
	}
	return false
}

// validate checks a run's limits and keys before anything is sent.
func validate(run []limits.Hit) error {
	joint := len(run) > 1
	if k := limits.RepeatedKey(run); k >= 0 {
		return fmt.Errorf("redisstore: joint run of %d hits: hit %d (%s): %w", len(run), k, run[k].Key, limits.ErrRepeatedKey)
	}
	for i, h := range run {
		l := h.Limit
		err := l.Validate()
		if err == nil && !l.Algorithm.Implemented() {
			err = fmt.Errorf("%w: %s", errNoAlgorithm, l.Algorithm)
		}
		if err == nil && h.Hold != (limits.Hold{}) {
			err = limits.CheckHold(h.Hold)
		}
		switch {
		case err != nil && joint:
			return fmt.Errorf("redisstore: joint run of %d hits: hit %d (%s): %w", len(run), i, h.Key, err)
		case err != nil:
			return fmt.Errorf("redisstore: %w", err)
		}
	}
	return nil
}

// errNoAlgorithm is returned for an algorithm that package limits
// implements but this store does not (yet).
var errNoAlgorithm = errors.New("no Redis commands for algorithm")

// errReply is returned for a reply that is not of the shape the command
// answers: a key that holds something else, or a proxy in the way.
var errReply = errors.New("unexpected reply")
