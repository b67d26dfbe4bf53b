// Package watch tells its caller when files it reads have changed, so that
// it can read them again without a restart: the limits config, and the
// gRPC server's certificate, key and client CAs.
//
// A Watcher watches directories, never single files: an editor that saves by
// writing a temporary file and renaming it over the original, a file deleted
// and recreated, and a Kubernetes ConfigMap or Secret update (which renames a
// new `..data` symlink over the old one) all replace the file's inode, and a
// watch on the old inode would go quiet. So it watches the directories that
// hold the files and the directories their symlinks resolve to,
// re-resolving after every change, and treats any event there as a possible
// change. A periodic check of the files' sizes, modification times and
// symlink targets backs this up where fsnotify sees nothing (some network
// filesystems).
//
// A possible change is then confirmed by the files' contents: the callback
// runs only when the bytes of the files (or which files a directory holds)
// differ from what they were at the last call, or at New. A touch, a
// ConfigMap update to identical data, or a save that writes the same bytes
// is no change, and the caller keeps what it built from the files, caches
// included. The caller still reads the files itself, and must keep what it
// had when they do not load.
//
// A change is handed to the callback only once it is whole. A file
// replaced at once (a rename over it, a ConfigMap's `..data` swap) is whole
// when seen, and is called back after the debounce. A file written in place
// (rewritten, appended to, or created and then written) may be seen half
// way, when it is only its first lines: a valid limits file that lacks the
// limits after them. So such a change is called back only once a second
// look, at least Options.Settle after the look that found it, finds the
// files' sizes, modification times and bytes as they were; a change seen by
// the poll, which cannot tell how it was made, is treated the same. A write
// that pauses for less than Settle is thus never called back half done,
// and an in-place edit takes effect about Debounce + Settle after its last
// write.
package watch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
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
	DefaultSettle   = 500 * time.Millisecond
)

// Options tunes a Watcher. The zero value is ready to use: a 100 ms debounce,
// a 1 s poll and a 500 ms settle time.
type Options struct {
	// Debounce is how long the files must stay quiet after an event before
	// their contents are looked at, so that one save, which is several
	// events, gives one call. Zero means DefaultDebounce. Under a steady
	// stream of events the look is delayed by at most about a second more
	// than Debounce.
	Debounce time.Duration

	// Poll is the period of the fallback check, which compares a fingerprint
	// of the files (names, sizes, modification times, symlink targets) with
	// the one taken at the last look at their contents, and looks again
	// when it differs. Zero means DefaultPoll; a negative value disables
	// the check.
	Poll time.Duration

	// Settle is how long a change written in place must stay as it was
	// before it is called back, so that a write still under way is not: a
	// file rewritten in place is, for a while, only its first lines. Zero
	// means DefaultSettle, which outlasts a writer's pause of 400 ms and
	// still calls back an edit seen by the poll, or made under a steady
	// stream of events, within 2 s (the service's reload bound); a negative
	// value calls back every change after the debounce alone.
	Settle time.Duration
}

// Watcher calls back when the contents of some files change. Make one with
// New and use it with Run. Its methods are safe to call from any goroutine,
// but Run runs only once.
type Watcher struct {
	targets  []target
	logger   *zap.Logger
	debounce time.Duration
	poll     time.Duration
	settle   time.Duration // 0: no settling
	fs       *fsnotify.Watcher

	// last and seen are the fingerprint and the contents taken by New;
	// from then on only Run's goroutine uses them.
	last string
	seen contents

	// ignoreEvents makes Run drop every fsnotify event, so that tests can
	// exercise the poll alone.
	ignoreEvents bool
	// observe, when set, hears each step Run takes, so that tests can wait
	// for a step instead of for a while. It runs on Run's goroutine.
	observe func(step)

	started   atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

// target is one watched path.
type target struct {
	path string // absolute
	dir  bool   // a directory of limits files
}

// step is what Run just did, for Watcher.observe.
type step struct {
	kind stepKind
	name string   // stepEvent: the file the event is about
	dirs []string // stepSync: the directories watched after the sync
}

type stepKind int

const (
	stepReady     stepKind = iota // Run is about to wait for its first event
	stepEvent                     // an fsnotify event was taken
	stepSync                      // the watches were brought up to date
	stepPoll                      // the poll looked at the fingerprint
	stepUnchanged                 // the contents were looked at and found as they were
	stepSettle                    // the contents had changed in place: they must stay so for Settle
	stepCalled                    // the contents had changed and onChange returned
)

// New starts watching paths, each a file or a directory of limits files
// (the entries config.DirFiles lists), and takes the fingerprint and the
// contents that Run compares against. Watches are set before New returns,
// so that a change made after New returns is not lost: a caller that reads
// the files after New (not before) never misses a change. The directory
// that holds a file (or the directory itself) must exist; the file need
// not. The caller must call Run, or Close if it will not.
func New(logger *zap.Logger, opts Options, paths ...string) (*Watcher, error) {
	if logger == nil {
		logger = zap.NewNop()
	}
	if len(paths) == 0 {
		return nil, errors.New("watch: no path to watch")
	}
	w := &Watcher{
		logger:   logger,
		debounce: opts.Debounce,
		poll:     opts.Poll,
		settle:   max(opts.Settle, 0),
	}
	if w.debounce <= 0 {
		w.debounce = DefaultDebounce
	}
	if w.poll == 0 {
		w.poll = DefaultPoll
	}
	if opts.Settle == 0 {
		w.settle = DefaultSettle
	}
	for _, path := range paths {
		t, err := newTarget(path)
		if err != nil {
			return nil, fmt.Errorf("watch %s: %w", path, err)
		}
		w.targets = append(w.targets, t)
	}

	var err error
	w.fs, err = fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", w, err)
	}
	if err := w.sync(); err != nil {
		_ = w.fs.Close()
		return nil, fmt.Errorf("watch %s: %w", w, err)
	}
	// The fingerprint first: a change between the two is then seen by the
	// poll as well as by the events.
	w.last = w.fingerprint()
	w.seen = w.contents()
	return w, nil
}

// newTarget checks that path can be watched.
func newTarget(path string) (target, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return target{}, err
	}
	t := target{path: abs}
	fi, err := os.Stat(abs)
	switch {
	case err == nil:
		t.dir = fi.IsDir()
	case !errors.Is(err, os.ErrNotExist):
		return target{}, err
	}
	if !t.dir {
		if _, err := os.Stat(filepath.Dir(abs)); err != nil {
			return target{}, fmt.Errorf("directory: %w", err)
		}
	}
	return t, nil
}

// String names the watched paths, for logs and errors.
func (w *Watcher) String() string {
	paths := make([]string, len(w.targets))
	for i, t := range w.targets {
		paths[i] = t.path
	}
	return strings.Join(paths, ", ")
}

// Close stops the watches. Run calls it on return; call it directly only
// when Run will not be called. Calling it more than once is harmless.
func (w *Watcher) Close() error {
	w.closeOnce.Do(func() { w.closeErr = w.fs.Close() })
	return w.closeErr
}

// Run calls onChange each time the contents of the files change, until ctx
// is done or the Watcher is closed, then closes the Watcher. It blocks;
// calls to onChange are made from Run's goroutine one at a time, never
// concurrently. The contents are compared as read just before a call, and
// the call reads the files again; so events that arrive during a call lead
// to one more look after it, and to one more call if the contents differ.
// Only a change made during a call and undone within a debounce after it
// can go uncalled, though the call may have read it. A change written in
// place is called back once it has settled (see the package doc).
// A second call to Run returns at once.
func (w *Watcher) Run(ctx context.Context, onChange func()) {
	if !w.started.CompareAndSwap(false, true) {
		w.logger.Error("watch: Run called more than once", zap.Stringer("paths", w))
		return
	}
	defer w.Close()
	r := newRun(ctx, w, onChange)
	defer r.stop()
	w.logger.Debug("watch: started", zap.Stringer("paths", w),
		zap.Strings("dirs", w.fs.WatchList()), zap.Duration("debounce", w.debounce),
		zap.Duration("poll", w.poll), zap.Duration("settle", w.settle))
	w.note(step{kind: stepReady})
	for r.next() {
	}
}

// note tells observe, if set, of a step.
func (w *Watcher) note(s step) {
	if w.observe != nil {
		w.observe(s)
	}
}

// sync makes the set of watched directories the one dirs computes now,
// adding new ones and dropping stale ones. It returns the errors of the
// directories it could not add.
func (w *Watcher) sync() error {
	want := w.dirs()
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

// dirs returns the directories to watch for every target, resolved and
// without duplicates (inotify gives one watch per inode, so two names for
// the same directory would share it).
func (w *Watcher) dirs() []string {
	set := make(map[string]bool)
	for _, t := range w.targets {
		t.addDirs(set)
	}
	out := make([]string, 0, len(set))
	for d := range set {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

// addDirs adds the directories to watch for t to set: the directory
// holding the file (or the directory itself), and the directories the
// watched files' symlinks resolve to. When a directory target is itself a
// symlink, or lies under one (a runtime root swapped as a whole), that
// symlink's parent is watched too, to see it being swapped.
func (t target) addDirs(set map[string]bool) {
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
	if !t.dir {
		addResolved(filepath.Dir(t.path))
		addFileDir(t.path)
		return
	}
	addResolved(t.path)
	for p := t.path; p != filepath.Dir(p); p = filepath.Dir(p) {
		if fi, err := os.Lstat(p); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			addResolved(filepath.Dir(p))
		}
	}
	for _, f := range t.files() {
		addFileDir(f)
	}
}
