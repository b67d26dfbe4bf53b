package rlqs

import (
	"context"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/rlqs/internal/share"
)

// division is this instance's division of one bucket: every client's
// demand as read at one instant, kept for a refresh period so that the
// reports in between cost a write each, not a read of the whole fleet.
// Its fields are guarded by Service.mu.
type division struct {
	snap *share.Division // nil before the first read
	at   time.Time       // when snap was read
	// fallback is set when the store was out of reach at the read: snap
	// then holds this instance's own clients, who divide part of the
	// limit among themselves.
	fallback bool
	err      error // the store's, at a fallback read
	// part is this instance's part of the limit at the last good read:
	// what its own clients held. 1 before any.
	part float64
	// due makes the next report read again whatever snap's age: a client
	// joined or left on this instance, which it knows for sure.
	due    bool
	flight chan struct{} // closed when the read under way, if any, ends
	// late are the clients that joined while a read was under way: the
	// next report reads again unless that read held them all.
	late    []string
	holders int // the streams here that hold the bucket
}

// divisionOf is what one report divides one bucket by: a snapshot and the
// part of the limit it shares out.
type divisionOf struct {
	snap     *share.Division
	part     float64
	fallback bool
	err      error
}

// want is one divided bucket of a report, as the divisions need it.
type want struct {
	key    string
	client string
	rate   float64 // the limit, for this instance's part at a read
	joined bool    // the client's first report of the bucket here
}

// divisions returns the division of each bucket, reading the store for
// those whose division is older than the refresh period (or due, or not
// read yet) in one call. A bucket being read by another report is waited
// for, not read again: many streams reporting a stale bucket at once cause
// one read.
func (s *Service) divisions(ctx context.Context, wants []want, now time.Time) []divisionOf {
	out := make([]divisionOf, len(wants))
	var lead []int                   // the buckets this report reads
	waits := map[int]chan struct{}{} // the buckets another report is reading
	entries := make([]*division, len(wants))
	s.mu.Lock()
	for i, w := range wants {
		e := s.divs[w.key]
		if e == nil {
			e = &division{part: 1}
			s.divs[w.key] = e
		}
		entries[i] = e
		if w.joined {
			e.holders++
			if e.flight != nil {
				e.late = append(e.late, w.client)
			} else {
				e.due = true
			}
		}
		switch {
		case e.flight != nil:
			waits[i] = e.flight
		case e.snap == nil || e.due || now.Sub(e.at) >= s.opts.Refresh:
			e.flight, e.due = make(chan struct{}), false
			lead = append(lead, i)
		}
	}
	s.mu.Unlock()
	if len(lead) > 0 {
		s.read(ctx, wants, entries, lead, now)
	}
	for _, done := range waits {
		select {
		case <-done:
		case <-ctx.Done():
			// The stream is over: its answer will not be sent.
		}
	}
	s.mu.Lock()
	for i, e := range entries {
		out[i] = divisionOf{snap: e.snap, part: e.part, fallback: e.fallback, err: e.err}
		if e.snap == nil { // the stream ended before the read it waited on
			out[i].snap = share.NewDivision(nil)
		}
		if !e.fallback {
			out[i].part = 1
		}
	}
	s.mu.Unlock()
	return out
}

// read reads the demands of the buckets lead (indexes into wants and
// entries) and keeps them. With the store out of reach each bucket is
// divided among this instance's own clients, within the part of the limit
// they held at the last good read.
func (s *Service) read(ctx context.Context, wants []want, entries []*division, lead []int, now time.Time) {
	keys := make([]string, len(lead))
	for j, i := range lead {
		keys[j] = wants[i].key
	}
	// The read serves every report waiting on it: it is not cancelled
	// with the stream that happened to lead it.
	ctx = context.WithoutCancel(ctx)
	all, err := s.store.ReadAll(ctx, keys)
	var local []map[string]share.Demand
	if s.store != DemandStore(s.local) {
		local, _ = s.local.ReadAll(ctx, keys)
	}
	snaps := make([]*share.Division, len(lead))
	parts := make([]float64, len(lead))
	for j, i := range lead {
		switch {
		case err != nil:
			snaps[j] = share.NewDivision(local[j])
		case local != nil:
			snaps[j] = share.NewDivision(all[j])
			parts[j] = held(snaps[j], wants[i].rate, s.opts.Floor, local[j])
		default:
			snaps[j] = share.NewDivision(all[j])
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for j, i := range lead {
		e := entries[i]
		e.snap, e.at, e.fallback, e.err = snaps[j], now, err != nil, err
		if err == nil && local != nil {
			e.part = parts[j]
		}
		for _, id := range e.late {
			if !e.snap.Has(id) {
				e.due = true
			}
		}
		e.late = e.late[:0]
		close(e.flight)
		e.flight = nil
		if e.holders <= 0 && s.divs[wants[i].key] == e {
			delete(s.divs, wants[i].key) // every holder left during the read
		}
	}
}

// held is the part of rate that this instance's clients (local) hold in
// snap's division with floor.
func held(snap *share.Division, rate, floor float64, local map[string]share.Demand) float64 {
	if !(rate > 0) {
		return 1
	}
	sum := 0.0
	for id := range local {
		if d, ok := snap.Clients()[id]; ok {
			sum += snap.Share(rate, floor, id, d)
		}
	}
	return sum / rate
}

// release notes that one stream here no longer holds key: the others here
// read its demands again at their next report, and a bucket no stream
// holds any more is forgotten, its part of the limit read afresh if one
// comes back.
func (s *Service) release(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.divs[key]
	if e == nil {
		return
	}
	e.holders--
	e.due = true
	if e.holders <= 0 && e.flight == nil {
		delete(s.divs, key)
	}
}
