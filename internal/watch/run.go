package watch

import (
	"context"
	"errors"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
	"go.uber.org/zap"
)

// runState is the state of one Run: what the latest look found, the debounce
// of events, and a change written in place that is settling.
type runState struct {
	w        *Watcher
	ctx      context.Context
	onChange func()

	// last and seen are what the latest look found; digest is the
	// contents of the latest call (or of New), which a change differs
	// from.
	last   string
	seen   contents
	digest [32]byte

	maxWait      time.Duration
	timer        *time.Timer
	pending      bool
	pendingSince time.Time

	// written holds the files fsnotify reported written since the latest
	// look, and blind tells that events may have been lost since: either
	// makes a change found by the next look one that must settle.
	written map[string]bool
	blind   bool
	// settling tells that seen is a change written in place, first seen at
	// settleFrom; settleTimer fires when it is due to be looked at again.
	// Events do not push it back: a steady stream of them must not delay
	// the call, and a look compares the files themselves.
	settleTimer *time.Timer
	settling    bool
	settleFrom  time.Time

	poll        *time.Ticker // nil without polling
	pollC       <-chan time.Time
	lastSyncErr string
}

func newRun(ctx context.Context, w *Watcher, onChange func()) *runState {
	r := &runState{w: w, ctx: ctx, onChange: onChange, last: w.last, seen: w.seen, digest: w.seen.digest,
		maxWait: max(w.debounce, time.Second), written: make(map[string]bool)}
	r.timer = time.NewTimer(time.Hour)
	r.timer.Stop()
	r.settleTimer = time.NewTimer(time.Hour)
	r.settleTimer.Stop()
	if w.poll > 0 {
		r.poll = time.NewTicker(w.poll)
		r.pollC = r.poll.C
	}
	return r
}

// stop stops the timers.
func (r *runState) stop() {
	r.timer.Stop()
	r.settleTimer.Stop()
	if r.poll != nil {
		r.poll.Stop()
	}
}

// next waits for one thing to happen and handles it; false when Run must
// return.
func (r *runState) next() bool {
	w := r.w
	select {
	case <-r.ctx.Done():
		return false
	case ev, ok := <-w.fs.Events:
		if !ok {
			return false
		}
		r.event(ev)
	case err, ok := <-w.fs.Errors:
		if !ok {
			return false
		}
		w.logger.Warn("watch: fsnotify error", zap.Stringer("paths", w), zap.Error(err))
		if errors.Is(err, fsnotify.ErrEventOverflow) && !w.ignoreEvents {
			r.blind = true
			r.arm() // events were lost: one of them may have been a change
		}
	case <-r.timer.C:
		r.look("event")
	case <-r.settleTimer.C:
		r.look("settle")
	case <-r.pollC:
		if r.pending {
			return true // the debounce will look, and re-read then
		}
		r.resync()
		if fp := w.fingerprint(); fp != r.last {
			r.look("poll")
		}
		w.note(step{kind: stepPoll})
	}
	return true
}

// event is fsnotify's event: it arms the debounce.
func (r *runState) event(ev fsnotify.Event) {
	w := r.w
	if w.ignoreEvents {
		return
	}
	w.logger.Debug("watch: event", zap.String("name", ev.Name), zap.Stringer("op", ev.Op))
	if ev.Has(fsnotify.Write) {
		r.written[filepath.Clean(ev.Name)] = true
	}
	r.arm()
	w.note(step{kind: stepEvent, name: ev.Name})
}

// resync re-resolves symlinks: after a ConfigMap swap the files live in a
// new directory, which must be watched for later in-place edits.
func (r *runState) resync() {
	w := r.w
	msg := ""
	if err := w.sync(); err != nil {
		msg = err.Error()
	}
	w.note(step{kind: stepSync, dirs: w.fs.WatchList()})
	if msg == r.lastSyncErr {
		return
	}
	if msg != "" {
		w.logger.Warn("watch: cannot watch every directory; changes there are seen by the poll only",
			zap.Stringer("paths", w), zap.String("error", msg))
	} else {
		w.logger.Info("watch: watching every directory again", zap.Stringer("paths", w))
	}
	r.lastSyncErr = msg
}

// look reads the files again and calls back a change, unless it was
// written in place and has yet to settle.
func (r *runState) look(reason string) {
	w := r.w
	r.timer.Stop()
	r.pending = false
	if r.ctx.Err() != nil {
		return
	}
	r.resync()
	// The fingerprint before the contents, as in New.
	prevFP, prev := r.last, r.seen
	r.last, r.seen = w.fingerprint(), w.contents()
	unsure := r.blind || reason == "poll"
	wrote := r.written
	r.written, r.blind = make(map[string]bool), false
	switch {
	case r.seen.digest == r.digest:
		r.settling = false
		r.settleTimer.Stop()
		w.logger.Debug("watch: files unchanged", zap.Stringer("paths", w), zap.String("reason", reason))
		w.note(step{kind: stepUnchanged})
		return
	case r.settling && r.last == prevFP && r.seen.digest == prev.digest:
		if time.Since(r.settleFrom) < w.settle {
			return // an event's look, before the settle timer's
		}
	case w.settle > 0 && (unsure || inPlace(prev, r.seen, wrote)):
		r.settling, r.settleFrom = true, time.Now()
		r.settleTimer.Reset(w.settle)
		w.logger.Debug("watch: files changed in place, waiting for them to settle",
			zap.Stringer("paths", w), zap.String("reason", reason), zap.Duration("settle", w.settle))
		w.note(step{kind: stepSettle})
		return
	}
	r.settling = false
	r.settleTimer.Stop()
	r.digest = r.seen.digest
	w.logger.Debug("watch: files changed", zap.Stringer("paths", w), zap.String("reason", reason))
	r.onChange()
	w.note(step{kind: stepCalled})
}

// arm starts the debounce, or pushes it back, but not past maxWait from
// the first event: a busy directory cannot starve the call.
func (r *runState) arm() {
	now := time.Now()
	switch {
	case !r.pending:
		r.pending, r.pendingSince = true, now
		r.timer.Reset(r.w.debounce)
	case now.Sub(r.pendingSince) < r.maxWait:
		r.timer.Reset(r.w.debounce)
	}
	// Otherwise events have kept coming for maxWait: let the timer fire
	// as set.
}
