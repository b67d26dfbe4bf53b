package rlqs

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// stream is an open stream as Evict sees it.
type stream struct {
	last   atomic.Int64 // Unix nanoseconds of its last report
	cancel context.CancelCauseFunc
	done   chan struct{} // closed when its handler has returned
}

var errEvicted = errors.New("rlqs: evicted")

// enter makes a stream that reported first at now one Evict may pick.
func (s *Service) enter(cancel context.CancelCauseFunc, now time.Time) *stream {
	st := &stream{cancel: cancel, done: make(chan struct{})}
	st.last.Store(now.UnixNano())
	s.openMu.Lock()
	s.open[st] = struct{}{}
	s.openMu.Unlock()
	return st
}

// leave takes a stream out of Evict's sight once its handler returns.
func (s *Service) leave(st *stream) {
	s.openMu.Lock()
	delete(s.open, st)
	s.openMu.Unlock()
	close(st.done)
}

// Evict closes the stream that has gone longest without a report, if it
// has gone two report intervals without one, and returns a channel closed
// once its handler has returned; nil when no stream is that silent. The
// server calls it when every place of its bound on open streams is taken
// and a new stream asks for one: a live Envoy reports every interval, so
// the stream closed is not one at work, and a new Envoy is served at once
// rather than after SilentAfter. It costs a look at every open stream, on
// a refusal only.
func (s *Service) Evict() <-chan struct{} {
	bound := s.opts.Now().Add(-2 * s.opts.ReportInterval).UnixNano()
	s.openMu.Lock()
	defer s.openMu.Unlock()
	var oldest *stream
	for st := range s.open {
		if last := st.last.Load(); last <= bound && (oldest == nil || last < oldest.last.Load()) {
			oldest = st
		}
	}
	if oldest == nil {
		return nil
	}
	// Out of the set at once, so that evictions at once close a stream each.
	delete(s.open, oldest)
	oldest.cancel(errEvicted)
	return oldest.done
}
