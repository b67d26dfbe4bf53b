package hotkey

import (
	"context"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// decide answers h from its key's share, or plans what to send for it: a
// charge that takes or tops up the share (with a bucket's unused tokens
// given back before it), or h itself, plainly. A hit that finds the key's
// sync in flight and no share waits for it (at most until ctx ends) once.
func (s *Store) decide(ctx context.Context, h *limits.Hit, i int, r *limits.Result, sc *scratch) {
	for waited := false; ; waited = true {
		wait := s.try(h, i, s.now(), r, sc, waited)
		if wait == nil {
			return
		}
		select {
		case <-wait:
		case <-ctx.Done():
			sc.add(*h, plan{i: i}) // the store answers it with ctx's error
			return
		}
	}
}

// try is one attempt of decide; it returns the sync to wait for, if any.
func (s *Store) try(h *limits.Hit, i int, now time.Time, r *limits.Result, sc *scratch, waited bool) <-chan struct{} {
	sh, e := s.entry(h.Key, h.Limit, now)
	defer sh.Unlock()
	if e.limit != h.Limit { // changed while the old one's sync is in flight
		sc.add(*h, plan{i: i})
		return nil
	}
	e.lastUse = now
	if e.usable(h.Cost, now) {
		*r = e.admit(h.Cost, now)
		s.local.Add(1)
		return nil
	}
	if e.wait != nil && !waited && !sc.planned() {
		return e.wait
	}
	if want := e.want(h.Cost, now); e.wait == nil && want > h.Cost {
		s.plan(h, i, e, want, now, sc)
		return nil
	}
	sc.add(*h, plan{i: i, e: e, kind: observe})
	return nil
}

// plan starts a sync of e: the charge that brings the share to want, the
// hit of cost h.Cost included, on the plain limit's counters, never
// charged when refused (a count_refused limit's refusal would be).
func (s *Store) plan(h *limits.Hit, i int, e *entry, want int64, now time.Time, sc *scratch) {
	s.syncs.Add(1)
	e.wait = make(chan struct{})
	lease := *h
	lease.Limit.CountRefused = false
	carry := e.carry(now)
	if back := e.giveBack(now); back > 0 {
		r := lease
		r.Cost = -back
		sc.add(r, plan{i: -1, e: e, kind: refund})
	}
	e.left = carry
	lease.Cost = max(0, want-carry)
	sc.add(lease, plan{i: i, e: e, kind: charge, cost: h.Cost})
}

// apply reads the store's answers: a plain hit's is its caller's; a hit
// of the mode sent plainly also tells its entry what remains; a charge
// grants a share and answers its hit from it, or, refused, leaves its hit
// to be sent again plainly (sc.retry).
func (s *Store) apply(sc *scratch, results []limits.Result) {
	for k := range sc.plans {
		p, r := sc.plans[k], sc.results[k]
		switch p.kind {
		case plain:
			results[p.i] = r
		case observe:
			s.direct.Add(1)
			results[p.i] = r
			if r.Err == nil {
				sh := s.keys.Shard(sc.hits[k].Key)
				sh.Lock()
				p.e.learn(r, sc.sent)
				sh.Unlock()
			}
		case charge:
			s.settle(p, sc.hits[k], r, sc, results)
		}
	}
}

// settle ends a sync with its charge's answer r.
func (s *Store) settle(p plan, lease limits.Hit, r limits.Result, sc *scratch, results []limits.Result) {
	sh, e := s.keys.Shard(lease.Key), p.e
	sh.Lock()
	defer sh.Unlock()
	close(e.wait)
	e.wait = nil
	now := s.now()
	switch {
	case r.Err != nil:
		// The store's error is the hit's: its failure mode decides it.
		results[p.i] = limits.Result{Err: r.Err}
		return
	case r.Allowed:
		s.charged.Add(uint64(lease.Cost))
		e.grant(r, sc.sent, lease.Cost)
	default:
		e.learn(r, sc.sent)
	}
	if e.left >= p.cost && (r.Allowed || e.window() && now.Before(e.windowEnd)) {
		results[p.i] = e.admit(p.cost, now)
		return
	}
	sc.retry = append(sc.retry, p)
}
