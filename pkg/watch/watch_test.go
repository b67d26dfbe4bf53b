package watch

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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
	hold    time.Duration // how long each call takes
}

func (r *recorder) onChange() {
	if r.inside.Swap(true) {
		r.overlap.Store(true)
	}
	time.Sleep(r.hold)
	r.n.Add(1)
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

// settle waits until no call has arrived for d, and returns the count.
func (r *recorder) settle(d time.Duration) int {
	for {
		select {
		case <-r.calls:
		case <-time.After(d):
			return int(r.n.Load())
		}
	}
}

// start runs a Watcher on path until the test ends, then checks that Run
// returned promptly and never overlapped its calls.
func start(t *testing.T, path string, opts Options, tweak ...func(*Watcher)) *recorder {
	t.Helper()
	return startHold(t, path, opts, 0, tweak...)
}

func startHold(t *testing.T, path string, opts Options, hold time.Duration, tweak ...func(*Watcher)) *recorder {
	t.Helper()
	w, err := New(path, zap.NewNop(), opts)
	if err != nil {
		t.Fatalf("New(%q): %v", path, err)
	}
	for _, f := range tweak {
		f(w)
	}
	r := &recorder{calls: make(chan struct{}, 1000), hold: hold}
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
		write(t, tmp, "domain: b\n")
		if err := os.Rename(tmp, file); err != nil {
			t.Fatal(err)
		}
		r.wait(t, "rename over")
		// The watch survives the replaced inode: a second save is seen too.
		write(t, tmp, "domain: c\n")
		if err := os.Rename(tmp, file); err != nil {
			t.Fatal(err)
		}
		r.wait(t, "second rename over")
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
			c.publish("domain: b\n")
			r.wait(t, "first swap")
			c.publish("domain: c\n")
			r.wait(t, "second swap")
			// An edit in the new data directory is seen without the poll,
			// so the watch followed the swap there.
			r.settle(300 * time.Millisecond)
			write(t, filepath.Join(c.dir, c.cur, "limits.yaml"), "domain: d\n")
			r.wait(t, "edit in the swapped-in directory")
		})
	}
}

func TestDebounce(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "limits.yaml")
	write(t, file, "domain: a\n")
	r := start(t, file, Options{Debounce: 150 * time.Millisecond, Poll: -1})
	for i := range 5 {
		write(t, file, fmt.Sprintf("domain: a%d\n", i))
		time.Sleep(10 * time.Millisecond)
	}
	r.wait(t, "burst")
	if n := r.settle(500 * time.Millisecond); n < 1 || n > 2 {
		t.Errorf("callbacks after a burst of 5 writes: got %d, want 1 or 2", n)
	}
}

func TestSteadyEventsDoNotStarve(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "limits.yaml")
	noise := filepath.Join(dir, "noise.txt")
	write(t, file, "domain: a\n")
	r := start(t, file, noPoll)
	// Events every 20 ms, well inside the debounce, for 2.5 s: the call
	// must still come within the bound.
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
	// Each call takes longer than the debounce, while writes keep coming.
	r := startHold(t, file, Options{Debounce: 20 * time.Millisecond, Poll: 30 * time.Millisecond}, 100*time.Millisecond)
	for i := range 20 {
		write(t, file, fmt.Sprintf("domain: a%d\n", i))
		time.Sleep(15 * time.Millisecond)
	}
	r.wait(t, "writes")
	r.settle(300 * time.Millisecond)
	// start's cleanup fails the test if two calls overlapped.
}

func TestEventDuringCallGivesAnotherCall(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "limits.yaml")
	write(t, file, "domain: a\n")
	entered := make(chan struct{}, 10)
	release := make(chan struct{})
	w, err := New(file, zap.NewNop(), noPoll)
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
	time.Sleep(50 * time.Millisecond)
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
	t.Run("mtime only", func(t *testing.T) {
		dir := t.TempDir()
		file := filepath.Join(dir, "limits.yaml")
		write(t, file, "domain: a\n")
		r := start(t, file, opts, ignoreEvents)
		later := time.Now().Add(time.Hour)
		if err := os.Chtimes(file, later, later); err != nil {
			t.Fatal(err)
		}
		r.wait(t, "mtime change seen by poll")
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
		if n := r.settle(300 * time.Millisecond); n != 0 {
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
			w, err := New(file, zap.NewNop(), Options{Debounce: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				w.Run(ctx, func() {})
			}()
			if name == "change pending" {
				write(t, file, "domain: b\n")
				time.Sleep(50 * time.Millisecond)
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
	w, err := New(dir, zap.NewNop(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx, func() {})
	}()
	second := make(chan struct{})
	go func() {
		defer close(second)
		time.Sleep(10 * time.Millisecond)
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
	w, err := New(t.TempDir(), zap.NewNop(), Options{})
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
	for _, path := range []string{
		filepath.Join(dir, "missing", "limits.yaml"),
		filepath.Join(dir, "missing", "deeper", "limits.yaml"),
	} {
		if w, err := New(path, zap.NewNop(), Options{}); err == nil {
			w.Close()
			t.Errorf("New(%q): got no error, want one for a missing directory", path)
		}
	}
}

func TestOptionsDefaults(t *testing.T) {
	for _, tc := range []struct {
		opts     Options
		debounce time.Duration
		poll     time.Duration
	}{
		{Options{}, DefaultDebounce, DefaultPoll},
		{Options{Debounce: time.Second, Poll: 5 * time.Second}, time.Second, 5 * time.Second},
		{Options{Poll: -1}, DefaultDebounce, -1},
	} {
		w, err := New(t.TempDir(), zap.NewNop(), tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		if w.debounce != tc.debounce || w.poll != tc.poll {
			t.Errorf("%+v: got debounce %v poll %v, want %v %v", tc.opts, w.debounce, w.poll, tc.debounce, tc.poll)
		}
		w.Close()
	}
}
