// Package watch tells the service when its limits path may have changed, so
// that it can reload without a restart.
//
// A Watcher watches directories, never single files: an editor that saves by
// writing a temporary file and renaming it over the original, a file deleted
// and recreated, and a Kubernetes ConfigMap update (which renames a new
// `..data` symlink over the old one) all replace the file's inode, and a
// watch on the old inode would go quiet. So it watches the directory that
// holds the limits files and the directories their symlinks resolve to,
// re-resolving after every change, and treats any event there as a possible
// change. A periodic fingerprint check backs this up where fsnotify sees
// nothing (some network filesystems).
//
// The callback means "may have changed": the caller re-reads the config and
// keeps the old one if the new one is invalid or the same.
package watch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"go.uber.org/zap"
)

// Default values of Options.
const (
	DefaultDebounce = 100 * time.Millisecond
	DefaultPoll     = time.Second
)

// Options tunes a Watcher. The zero value is ready to use: a 100 ms debounce
// and a 1 s poll.
type Options struct {
	// Debounce is how long the path must stay quiet after an event before
	// the callback runs, so that one save, which is several events, gives
	// one call. Zero means DefaultDebounce. Under a steady stream of events
	// the call is delayed by at most about a second more than Debounce.
	Debounce time.Duration

	// Poll is the period of the fallback check, which compares a fingerprint
	// of the limits files (names, sizes, modification times, symlink
	// targets) with the one taken by New or at the last call, and calls
	// back when it differs. Zero means DefaultPoll; a negative value disables the check.
	Poll time.Duration
}

// Watcher calls back when a limits path, a file or a directory of *.yaml and
// *.yml files, may have changed. Make one with New and use it with Run.
// Its methods are safe to call from any goroutine, but Run runs only once.
type Watcher struct {
	path     string // absolute
	dir      bool   // path is a directory of limits files
	logger   *zap.Logger
	debounce time.Duration
	poll     time.Duration
	fs       *fsnotify.Watcher

	// last is the fingerprint taken by New; from then on only Run's
	// goroutine uses it.
	last string

	// ignoreEvents makes Run drop every fsnotify event, so that tests can
	// exercise the poll alone.
	ignoreEvents bool

	started   atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

// New starts watching path, a limits file or a directory of limits files,
// and takes the fingerprint that Run's poll compares against. Watches are
// set before New returns, so a change made between New and Run is not lost.
// The directory that holds the file (or the directory itself) must exist;
// the file need not. The caller must call Run, or Close if it will not.
func New(path string, logger *zap.Logger, opts Options) (*Watcher, error) {
	if logger == nil {
		logger = zap.NewNop()
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", path, err)
	}
	w := &Watcher{
		path:     abs,
		logger:   logger,
		debounce: opts.Debounce,
		poll:     opts.Poll,
	}
	if w.debounce <= 0 {
		w.debounce = DefaultDebounce
	}
	if w.poll == 0 {
		w.poll = DefaultPoll
	}
	fi, err := os.Stat(abs)
	switch {
	case err == nil:
		w.dir = fi.IsDir()
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("watch %s: %w", path, err)
	}
	if !w.dir {
		if _, err := os.Stat(filepath.Dir(abs)); err != nil {
			return nil, fmt.Errorf("watch %s: directory: %w", path, err)
		}
	}

	w.fs, err = fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", path, err)
	}
	if err := w.sync(); err != nil {
		_ = w.fs.Close()
		return nil, fmt.Errorf("watch %s: %w", path, err)
	}
	w.last = fingerprint(w.path, w.dir)
	return w, nil
}

// Close stops the watches. Run calls it on return; call it directly only
// when Run will not be called. Calling it more than once is harmless.
func (w *Watcher) Close() error {
	w.closeOnce.Do(func() { w.closeErr = w.fs.Close() })
	return w.closeErr
}

// Run calls onChange each time the path may have changed, until ctx is done
// or the Watcher is closed, then closes the Watcher. It blocks; calls to
// onChange are made from Run's goroutine one at a time, never concurrently,
// and events that arrive during a call lead to one more call after it.
// A second call to Run returns at once.
func (w *Watcher) Run(ctx context.Context, onChange func()) {
	if !w.started.CompareAndSwap(false, true) {
		w.logger.Error("watch: Run called more than once", zap.String("path", w.path))
		return
	}
	defer w.Close()

	last := w.last

	maxWait := max(w.debounce, time.Second)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	pending := false
	var pendingSince time.Time

	var pollC <-chan time.Time
	if w.poll > 0 {
		ticker := time.NewTicker(w.poll)
		defer ticker.Stop()
		pollC = ticker.C
	}

	var lastSyncErr string
	resync := func() {
		// Re-resolve symlinks: after a ConfigMap swap the files live in a
		// new directory, which must be watched for later in-place edits.
		msg := ""
		if err := w.sync(); err != nil {
			msg = err.Error()
		}
		if msg != lastSyncErr {
			if msg != "" {
				w.logger.Warn("watch: cannot watch every directory; changes there are seen by the poll only",
					zap.String("path", w.path), zap.String("error", msg))
			} else {
				w.logger.Info("watch: watching every directory again", zap.String("path", w.path))
			}
			lastSyncErr = msg
		}
	}
	fire := func(reason string) {
		timer.Stop()
		pending = false
		if ctx.Err() != nil {
			return
		}
		resync()
		last = fingerprint(w.path, w.dir)
		w.logger.Debug("watch: limits may have changed",
			zap.String("path", w.path), zap.String("reason", reason))
		onChange()
	}
	arm := func() {
		now := time.Now()
		switch {
		case !pending:
			pending, pendingSince = true, now
			timer.Reset(w.debounce)
		case now.Sub(pendingSince) < maxWait:
			timer.Reset(w.debounce)
		}
		// Otherwise events have kept coming for maxWait: let the timer
		// fire as set, so that a busy directory cannot starve the call.
	}

	w.logger.Debug("watch: started", zap.String("path", w.path),
		zap.Strings("dirs", w.fs.WatchList()), zap.Duration("debounce", w.debounce),
		zap.Duration("poll", w.poll))
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.fs.Events:
			if !ok {
				return
			}
			if w.ignoreEvents {
				continue
			}
			w.logger.Debug("watch: event", zap.String("name", ev.Name), zap.Stringer("op", ev.Op))
			arm()
		case err, ok := <-w.fs.Errors:
			if !ok {
				return
			}
			w.logger.Warn("watch: fsnotify error", zap.String("path", w.path), zap.Error(err))
			if errors.Is(err, fsnotify.ErrEventOverflow) && !w.ignoreEvents {
				arm() // events were lost: one of them may have been a change
			}
		case <-timer.C:
			fire("event")
		case <-pollC:
			if pending {
				continue // the debounce will call back, and re-read then
			}
			resync()
			if fp := fingerprint(w.path, w.dir); fp != last {
				fire("poll")
			}
		}
	}
}

// sync makes the set of watched directories the one dirs computes now,
// adding new ones and dropping stale ones. It returns the errors of the
// directories it could not add.
func (w *Watcher) sync() error {
	want := dirs(w.path, w.dir)
	if len(want) == 0 {
		return errors.New("no directory to watch")
	}
	have := make(map[string]bool)
	for _, d := range w.fs.WatchList() {
		have[d] = true
	}
	var errs []error
	for _, d := range want {
		if have[d] {
			delete(have, d)
			continue
		}
		if err := w.fs.Add(d); err != nil {
			errs = append(errs, fmt.Errorf("add %s: %w", d, err))
		}
	}
	for d := range have {
		// A deleted directory has already lost its watch; the error says so.
		if err := w.fs.Remove(d); err != nil && !errors.Is(err, fsnotify.ErrNonExistentWatch) {
			w.logger.Debug("watch: remove", zap.String("dir", d), zap.Error(err))
		}
	}
	return errors.Join(errs...)
}

// dirs returns the directories to watch for path, resolved and without
// duplicates (inotify gives one watch per inode, so two names for the same
// directory would share it): the directory holding the file (or the
// directory itself), and the directories the relevant files' symlinks
// resolve to. When path itself is a symlink to a directory, its parent is
// watched too, to see the symlink being swapped.
func dirs(path string, dir bool) []string {
	set := make(map[string]bool)
	addResolved := func(p string) {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			set[r] = true
		}
	}
	addFileDir := func(f string) {
		if r, err := filepath.EvalSymlinks(f); err == nil {
			set[filepath.Dir(r)] = true
		}
	}
	if dir {
		addResolved(path)
		if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			addResolved(filepath.Dir(path))
		}
		files, _ := relevantFiles(path) // a missing directory is reported by Add
		for _, f := range files {
			addFileDir(f)
		}
	} else {
		addResolved(filepath.Dir(path))
		addFileDir(path)
	}
	out := make([]string, 0, len(set))
	for d := range set {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}
