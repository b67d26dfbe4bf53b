package watch

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// within is the correctness bound for a callback: the service must reload
// within 2 s of a change.
const within = 2 * time.Second

// noPoll disables the fallback, so that a scenario test proves fsnotify
// alone sees the change.
var noPoll = Options{Debounce: 30 * time.Millisecond, Poll: -1}

// recorder counts onChange calls and notices overlapping ones.
type recorder struct {
	calls   chan struct{}
	n       atomic.Int32
	inside  atomic.Bool
	overlap atomic.Bool
	// during, when set, runs inside each call with the call's number
	// (from 1), to change the files while the call runs.
	during func(n int)
	trace  *trace
}

func (r *recorder) onChange() {
	if r.inside.Swap(true) {
		r.overlap.Store(true)
	}
	n := int(r.n.Add(1))
	if r.during != nil {
		r.during(n)
	}
	r.inside.Store(false)
	select {
	case r.calls <- struct{}{}:
	default:
	}
}

// wait fails the test unless a call arrives within the bound.
func (r *recorder) wait(t *testing.T, what string) {
	t.Helper()
	select {
	case <-r.calls:
	case <-time.After(within):
		t.Fatalf("%s: no callback within %v", what, within)
	}
}

// waitFast is wait for a change that is whole the moment it is made (a
// rename, a ConfigMap swap): it must be called back after the debounce
// alone, without settling. from is the trace's length before the change.
func (r *recorder) waitFast(t *testing.T, what string, from int) {
	t.Helper()
	r.wait(t, what)
	to := r.trace.waitFor(t, what+": the call", from, is(stepCalled))
	if n := r.trace.count(from, to, stepSettle); n != 0 {
		t.Errorf("%s: settled %d times before the call, want none", what, n)
	}
}

// trace records the steps of a Watcher's Run, so that a test waits for the
// step it needs rather than for a while.
type trace struct {
	mu    sync.Mutex
	steps []step
	more  chan struct{} // a step was added since the last receive
}

// observe makes w report its steps to a new trace.
func observe(w *Watcher) *trace {
	tr := &trace{more: make(chan struct{}, 1)}
	w.observe = func(s step) {
		tr.mu.Lock()
		tr.steps = append(tr.steps, s)
		tr.mu.Unlock()
		select {
		case tr.more <- struct{}{}:
		default:
		}
	}
	return tr
}

// len is the number of steps so far: the from of a later waitFor.
func (tr *trace) len() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.steps)
}

// waitFor waits, within the bound, for a step at index from or later that
// ok accepts, and returns the index after it.
func (tr *trace) waitFor(t *testing.T, what string, from int, ok func(step) bool) int {
	t.Helper()
	deadline := time.After(within)
	for {
		tr.mu.Lock()
		for ; from < len(tr.steps); from++ {
			if ok(tr.steps[from]) {
				tr.mu.Unlock()
				return from + 1
			}
		}
		tr.mu.Unlock()
		select {
		case <-tr.more:
		case <-deadline:
			t.Fatalf("%s: not within %v", what, within)
		}
	}
}

// count is the number of steps of kind k at indexes from to to (not
// included).
func (tr *trace) count(from, to int, k stepKind) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n := 0
	for _, s := range tr.steps[from:to] {
		if s.kind == k {
			n++
		}
	}
	return n
}

// is accepts the steps of a kind.
func is(k stepKind) func(step) bool {
	return func(s step) bool { return s.kind == k }
}

// looked accepts a look at the contents, whatever it found.
func looked(s step) bool { return s.kind == stepUnchanged || s.kind == stepCalled }

// eventOn accepts an event about the file named name.
func eventOn(name string) func(step) bool {
	return func(s step) bool { return s.kind == stepEvent && filepath.Base(s.name) == filepath.Base(name) }
}

// start runs a Watcher on path until the test ends, then checks that Run
// returned promptly and never overlapped its calls.
func start(t *testing.T, path string, opts Options, tweak ...func(*Watcher)) *recorder {
	t.Helper()
	return run(t, &recorder{}, opts, tweak, path)
}

// run is start with a recorder of the test's and any number of paths.
func run(t *testing.T, r *recorder, opts Options, tweak []func(*Watcher), paths ...string) *recorder {
	t.Helper()
	w, err := New(zap.NewNop(), opts, paths...)
	if err != nil {
		t.Fatalf("New(%q): %v", paths, err)
	}
	for _, f := range tweak {
		f(w)
	}
	r.calls = make(chan struct{}, 1000)
	r.trace = observe(w)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx, r.onChange)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("Run did not return within 5s of cancel")
		}
		if r.overlap.Load() {
			t.Error("onChange was called concurrently with itself")
		}
	})
	return r
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// modes runs a scenario with the Watcher given the file and given its
// directory.
func modes(t *testing.T, f func(t *testing.T, dir, file, watched string)) {
	for _, mode := range []string{"file", "dir"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "limits.yaml")
			watched := file
			if mode == "dir" {
				watched = dir
			}
			f(t, dir, file, watched)
		})
	}
}

func TestEditInPlace(t *testing.T) {
	modes(t, func(t *testing.T, dir, file, watched string) {
		write(t, file, "domain: a\n")
		r := start(t, watched, noPoll)
		f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString("# edited\n"); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		r.wait(t, "append")
		write(t, file, "domain: b\n") // truncate and rewrite
		r.wait(t, "rewrite")
	})
}

func TestRenameOverTemp(t *testing.T) {
	modes(t, func(t *testing.T, dir, file, watched string) {
		write(t, file, "domain: a\n")
		r := start(t, watched, noPoll)
		tmp := filepath.Join(dir, ".limits.yaml.tmp")
		from := r.trace.len()
		write(t, tmp, "domain: b\n")
		if err := os.Rename(tmp, file); err != nil {
			t.Fatal(err)
		}
		r.waitFast(t, "rename over", from)
		// The watch survives the replaced inode: a second save is seen too.
		from = r.trace.len()
		write(t, tmp, "domain: c\n")
		if err := os.Rename(tmp, file); err != nil {
			t.Fatal(err)
		}
		r.waitFast(t, "second rename over", from)
	})
}

func TestDeleteRecreate(t *testing.T) {
	modes(t, func(t *testing.T, dir, file, watched string) {
		write(t, file, "domain: a\n")
		r := start(t, watched, noPoll)
		if err := os.Remove(file); err != nil {
			t.Fatal(err)
		}
		r.wait(t, "delete")
		write(t, file, "domain: b\n")
		r.wait(t, "recreate")
	})
}

func TestMissingFileCreated(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "limits.yaml")
	r := start(t, file, noPoll)
	write(t, file, "domain: a\n")
	r.wait(t, "create")
}

func TestNewFileInDir(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), "domain: a\n")
	r := start(t, dir, noPoll)
	write(t, filepath.Join(dir, "b.yml"), "domain: b\n")
	r.wait(t, "new file")
}

// configMap lays out dir as the kubelet mounts a ConfigMap: the data in a
// timestamped directory, `..data` pointing at it, and each key a symlink
// through `..data`.
type configMap struct {
	t   *testing.T
	dir string
	gen int
	cur string // current timestamped directory
}

func newConfigMap(t *testing.T, content string) *configMap {
	c := &configMap{t: t, dir: t.TempDir()}
	c.publish(content)
	if err := os.Symlink(filepath.Join("..data", "limits.yaml"), filepath.Join(c.dir, "limits.yaml")); err != nil {
		t.Fatal(err)
	}
	return c
}

// publish does what the kubelet does on an update: write a new timestamped
// directory, point `..data_tmp` at it, rename that over `..data`, and
// remove the old directory.
func (c *configMap) publish(content string) {
	t := c.t
	t.Helper()
	c.gen++
	ts := fmt.Sprintf("..2026_11_30_07_56_%02d.%d", c.gen, 1000+c.gen)
	if err := os.Mkdir(filepath.Join(c.dir, ts), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(c.dir, ts, "limits.yaml"), content)
	tmp := filepath.Join(c.dir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(c.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if c.cur != "" {
		if err := os.RemoveAll(filepath.Join(c.dir, c.cur)); err != nil {
			t.Fatal(err)
		}
	}
	c.cur = ts
}

func TestConfigMapSwap(t *testing.T) {
	for _, mode := range []string{"file", "dir"} {
		t.Run(mode, func(t *testing.T) {
			c := newConfigMap(t, "domain: a\n")
			watched := c.dir
			if mode == "file" {
				watched = filepath.Join(c.dir, "limits.yaml")
			}
			r := start(t, watched, noPoll)
			from := r.trace.len()
			c.publish("domain: b\n")
			r.waitFast(t, "first swap", from)
			from = r.trace.len()
			c.publish("domain: c\n")
			r.waitFast(t, "second swap", from)
			// An edit in the new data directory is seen without the poll,
			// so the watch followed the swap there.
			real, err := filepath.EvalSymlinks(c.dir)
			if err != nil {
				t.Fatal(err)
			}
			cur := filepath.Join(real, c.cur)
			r.trace.waitFor(t, "a watch on the swapped-in directory", 0, func(s step) bool {
				return s.kind == stepSync && slices.Contains(s.dirs, cur)
			})
			from = r.trace.len()
			write(t, filepath.Join(c.dir, c.cur, "limits.yaml"), "domain: d\n")
			r.wait(t, "edit in the swapped-in directory")
			// An edit in place, unlike the swaps, settles first.
			to := r.trace.waitFor(t, "the edit's call", from, is(stepCalled))
			if r.trace.count(from, to, stepSettle) == 0 {
				t.Error("edit in the swapped-in directory: called back without settling")
			}
		})
	}
}

// A file written in place in two parts, with a pause between them, is
// called back whole only, and once: its first part alone is a valid limits
// file with no limits, which a reload must not serve. The watcher runs with
// the defaults, as the service runs it.
func TestInPlaceWriteSettles(t *testing.T) {
	const (
		first = "domain: x\n"
		rest  = "descriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n"
		pause = 400 * time.Millisecond
	)
	for _, tc := range []struct {
		name string
		dir  bool // watch the directory, not the file
		new  bool // the file is created by the write
	}{
		{"rewrite, file", false, false},
		{"rewrite, dir", true, false},
		{"new file, dir", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "limits.yaml")
			watched := file
			if tc.dir {
				watched = dir
			}
			if tc.new {
				write(t, filepath.Join(dir, "a.yaml"), "domain: a\n")
			} else {
				write(t, file, "domain: a\n")
			}
			// Each call reads the file, as a reload does.
			var mu sync.Mutex
			var read []string
			r := &recorder{during: func(int) {
				data, err := os.ReadFile(file)
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				read = append(read, string(data))
				mu.Unlock()
			}}
			run(t, r, Options{}, nil, watched)

			f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			from := r.trace.len()
			if _, err := f.WriteString(first); err != nil {
				t.Fatal(err)
			}
			wrote := time.Now()
			// The watcher looks during the pause, finds the first part
			// alone, and holds it back.
			r.trace.waitFor(t, "a look at the first part", from, is(stepSettle))
			time.Sleep(time.Until(wrote.Add(pause))) // the writer's pause, the scenario itself
			paused := time.Since(wrote)
			if _, err := f.WriteString(rest); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			r.wait(t, "the whole file")
			mu.Lock()
			defer mu.Unlock()
			if len(read) != 1 || read[0] != first+rest {
				t.Errorf("called back with %q after a pause of %v, want once with the whole file %q",
					read, paused.Round(time.Millisecond), first+rest)
			}
		})
	}
}

// A change that leaves the bytes as they were is no change: no call, for
// a touch, a save of the same bytes, a ConfigMap update to identical data
// and a new file a directory does not load; the next real change is
// called back.
func TestSameContentsNoCall(t *testing.T) {
	for _, tc := range []struct {
		name string
		dir  bool
		same func(t *testing.T, c *configMap) // changes nothing a reader sees
	}{
		{"touch", false, func(t *testing.T, c *configMap) {
			later := time.Now().Add(time.Hour)
			if err := os.Chtimes(filepath.Join(c.dir, c.cur, "limits.yaml"), later, later); err != nil {
				t.Fatal(err)
			}
		}},
		{"same bytes", false, func(t *testing.T, c *configMap) {
			write(t, filepath.Join(c.dir, c.cur, "limits.yaml"), "domain: a\n")
		}},
		{"configmap swap to the same data", false, func(t *testing.T, c *configMap) {
			c.publish("domain: a\n")
		}},
		{"configmap swap to the same data, dir", true, func(t *testing.T, c *configMap) {
			c.publish("domain: a\n")
		}},
		{"dotfile, dir", true, func(t *testing.T, c *configMap) {
			write(t, filepath.Join(c.dir, ".limits.yaml.swp"), "domain: z\n")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newConfigMap(t, "domain: a\n")
			watched := filepath.Join(c.dir, "limits.yaml")
			if tc.dir {
				watched = c.dir
			}
			r := start(t, watched, noPoll)
			tc.same(t, c)
			// A barrier, as in TestDebounce: once the watcher has looked
			// after the event of a later write, it has made every call the
			// change leads to.
			barrier := filepath.Join(c.dir, "barrier.txt")
			write(t, barrier, "")
			from := r.trace.waitFor(t, "the barrier's event", 0, eventOn(barrier))
			r.trace.waitFor(t, "the look after the barrier", from, looked)
			if n := r.n.Load(); n != 0 {
				t.Fatalf("callbacks for unchanged contents: got %d, want 0", n)
			}
			c.publish("domain: b\n")
			r.wait(t, "a real change after it")
		})
	}
}

// One Watcher watches several files: a change to any is called back.
func TestSeveralFiles(t *testing.T) {
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	write(t, cert, "cert 1")
	write(t, key, "key 1")
	r := run(t, &recorder{}, noPoll, nil, cert, key)
	write(t, key, "key 2")
	r.wait(t, "key changed")
	write(t, cert, "cert 2")
	r.wait(t, "cert changed")
}

func TestDebounce(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "limits.yaml")
	write(t, file, "domain: a\n")
	r := start(t, file, Options{Debounce: 150 * time.Millisecond, Poll: -1})
	from := 0
	for i := range 5 {
		write(t, file, fmt.Sprintf("domain: a%d\n", i))
		// The next write once the watcher has this one's event, so that
		// every write resets the debounce.
		from = r.trace.waitFor(t, "the event of a write", from, eventOn(file))
	}
	r.wait(t, "burst")
	// A barrier: inotify queues a watcher's events in order, so once the
	// watcher has the event of a later write it has every event of the
	// burst, and once it has looked after that, it has made every call the
	// burst leads to.
	barrier := filepath.Join(dir, "barrier.txt")
	write(t, barrier, "")
	from = r.trace.waitFor(t, "the barrier's event", from, eventOn(barrier))
	r.trace.waitFor(t, "the look after the barrier", from, looked)
	if n := r.n.Load(); n < 1 || n > 2 {
		t.Errorf("callbacks after a burst of 5 writes: got %d, want 1 or 2", n)
	}
}

func TestSteadyEventsDoNotStarve(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "limits.yaml")
	noise := filepath.Join(dir, "noise.txt")
	write(t, file, "domain: a\n")
	r := start(t, file, noPoll)
	write(t, file, "domain: b\n")
	// Then events every 20 ms, well inside the debounce, for 2.5 s: the
	// call must still come within the bound.
	deadline := time.Now().Add(within)
	for i := 0; time.Now().Before(deadline.Add(500 * time.Millisecond)); i++ {
		write(t, noise, fmt.Sprint(i))
		select {
		case <-r.calls:
			if time.Now().After(deadline) {
				t.Fatalf("first callback after %v of steady events, want within %v", time.Since(deadline)+within, within)
			}
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("no callback during %v of steady events", within+500*time.Millisecond)
}

func TestNeverConcurrent(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "limits.yaml")
	write(t, file, "domain: a\n")
	// Each call changes the file again, so that events, the debounce and
	// the poll all come due while calls run; each change leads to one more
	// call, until the last.
	const calls = 20
	r := &recorder{during: func(n int) {
		if n < calls {
			if err := os.WriteFile(file, fmt.Appendf(nil, "domain: a%d\n", n), 0o644); err != nil {
				t.Error(err)
			}
		}
	}}
	run(t, r, Options{Debounce: 5 * time.Millisecond, Poll: 5 * time.Millisecond, Settle: 5 * time.Millisecond}, nil, file)
	write(t, file, "domain: a0\n")
	for i := range calls {
		r.wait(t, fmt.Sprintf("call %d", i+1))
	}
	// run's cleanup fails the test if two calls overlapped.
}

func TestEventDuringCallGivesAnotherCall(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "limits.yaml")
	write(t, file, "domain: a\n")
	entered := make(chan struct{}, 10)
	release := make(chan struct{})
	w, err := New(zap.NewNop(), noPoll, file)
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int32
	calls := make(chan struct{}, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx, func() {
			if n.Add(1) == 1 {
				entered <- struct{}{}
				<-release
			}
			calls <- struct{}{}
		})
	}()
	defer func() {
		cancel()
		<-done
	}()
	write(t, file, "domain: b\n")
	select {
	case <-entered:
	case <-time.After(within):
		close(release)
		t.Fatal("no first callback")
	}
	write(t, file, "domain: c\n") // while the first call runs
	close(release)
	for i, what := range []string{"first call", "call for the write during the first"} {
		select {
		case <-calls:
		case <-time.After(within):
			t.Fatalf("%s (call %d): not within %v", what, i+1, within)
		}
	}
}

func TestPollFallback(t *testing.T) {
	ignoreEvents := func(w *Watcher) { w.ignoreEvents = true }
	opts := Options{Poll: 50 * time.Millisecond}

	t.Run("edit", func(t *testing.T) {
		dir := t.TempDir()
		file := filepath.Join(dir, "limits.yaml")
		write(t, file, "domain: a\n")
		r := start(t, file, opts, ignoreEvents)
		write(t, file, "domain: bb\n")
		r.wait(t, "edit seen by poll")
	})
	t.Run("touch", func(t *testing.T) {
		dir := t.TempDir()
		file := filepath.Join(dir, "limits.yaml")
		write(t, file, "domain: a\n")
		r := start(t, file, opts, ignoreEvents)
		later := time.Now().Add(time.Hour)
		if err := os.Chtimes(file, later, later); err != nil {
			t.Fatal(err)
		}
		// The poll sees the new time, looks at the contents, and finds
		// them as they were.
		r.trace.waitFor(t, "a look after the touch", 0, is(stepUnchanged))
		if n := r.n.Load(); n != 0 {
			t.Errorf("callbacks after a touch: got %d, want 0", n)
		}
	})
	t.Run("new file", func(t *testing.T) {
		dir := t.TempDir()
		write(t, filepath.Join(dir, "a.yaml"), "domain: a\n")
		r := start(t, dir, opts, ignoreEvents)
		write(t, filepath.Join(dir, "b.yaml"), "domain: b\n")
		r.wait(t, "new file seen by poll")
	})
	t.Run("configmap swap", func(t *testing.T) {
		c := newConfigMap(t, "domain: a\n")
		r := start(t, filepath.Join(c.dir, "limits.yaml"), opts, ignoreEvents)
		c.publish("domain: b\n") // same size, new target
		r.wait(t, "swap seen by poll")
	})
	t.Run("quiet", func(t *testing.T) {
		dir := t.TempDir()
		write(t, filepath.Join(dir, "a.yaml"), "domain: a\n")
		r := start(t, dir, opts, ignoreEvents)
		write(t, filepath.Join(dir, "notes.txt"), "not a limits file")
		// The first poll after the write may have looked before it; the
		// second looked after.
		from := r.trace.waitFor(t, "a poll", r.trace.len(), is(stepPoll))
		r.trace.waitFor(t, "a second poll", from, is(stepPoll))
		if n := r.n.Load(); n != 0 {
			t.Errorf("callbacks with no limits file changed: got %d, want 0", n)
		}
	})
}

func TestCancelReturnsPromptly(t *testing.T) {
	for _, name := range []string{"idle", "change pending"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "limits.yaml")
			write(t, file, "domain: a\n")
			w, err := New(zap.NewNop(), Options{Debounce: time.Hour}, file)
			if err != nil {
				t.Fatal(err)
			}
			tr := observe(w)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				w.Run(ctx, func() {})
			}()
			if name == "change pending" {
				write(t, file, "domain: b\n")
				tr.waitFor(t, "the event of the write", 0, eventOn(file))
			}
			cancel()
			select {
			case <-done:
			case <-time.After(time.Second):
				t.Fatal("Run did not return within 1s of cancel")
			}
			// Run closed the watcher: Close again is harmless.
			if err := w.Close(); err != nil {
				t.Errorf("Close after Run: %v", err)
			}
		})
	}
}

func TestRunTwiceReturns(t *testing.T) {
	dir := t.TempDir()
	w, err := New(zap.NewNop(), Options{}, dir)
	if err != nil {
		t.Fatal(err)
	}
	tr := observe(w)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx, func() {})
	}()
	tr.waitFor(t, "the first Run", 0, is(stepReady))
	second := make(chan struct{})
	go func() {
		defer close(second)
		w.Run(ctx, func() { t.Error("second Run called onChange") })
	}()
	select {
	case <-second:
	case <-time.After(within):
		t.Error("second Run did not return at once")
	}
	cancel()
	<-done
}

func TestCloseWithoutRun(t *testing.T) {
	w, err := New(zap.NewNop(), Options{}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// goleak in TestMain checks that fsnotify's goroutine is gone.
}

func TestNewErrors(t *testing.T) {
	dir := t.TempDir()
	for _, paths := range [][]string{
		{filepath.Join(dir, "missing", "limits.yaml")},
		{filepath.Join(dir, "missing", "deeper", "limits.yaml")},
		{dir, filepath.Join(dir, "missing", "limits.yaml")},
		nil,
	} {
		if w, err := New(zap.NewNop(), Options{}, paths...); err == nil {
			w.Close()
			t.Errorf("New(%q): got no error, want one", paths)
		}
	}
}

func TestOptionsDefaults(t *testing.T) {
	for _, tc := range []struct {
		opts     Options
		debounce time.Duration
		poll     time.Duration
		settle   time.Duration
	}{
		{Options{}, DefaultDebounce, DefaultPoll, DefaultSettle},
		{Options{Debounce: time.Second, Poll: 5 * time.Second, Settle: 2 * time.Second}, time.Second, 5 * time.Second, 2 * time.Second},
		{Options{Poll: -1, Settle: -1}, DefaultDebounce, -1, 0},
	} {
		w, err := New(zap.NewNop(), tc.opts, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if w.debounce != tc.debounce || w.poll != tc.poll || w.settle != tc.settle {
			t.Errorf("%+v: got debounce %v poll %v settle %v, want %v %v %v",
				tc.opts, w.debounce, w.poll, w.settle, tc.debounce, tc.poll, tc.settle)
		}
		w.Close()
	}
}
