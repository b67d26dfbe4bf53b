package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/envoy-rls/envoy-rls/internal/metrics"
	"github.com/envoy-rls/envoy-rls/internal/watch"
	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
	"github.com/envoy-rls/envoy-rls/pkg/limits/memory"
	"github.com/envoy-rls/envoy-rls/pkg/limits/overlimit"
	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

// reloadBound is how long a test waits for the watcher: well above the 2 s
// the contract allows a reload.
const reloadBound = 10 * time.Second

// secretVolume lays out dir as the kubelet mounts a ConfigMap or a Secret:
// the files in a timestamped directory, `..data` pointing at it, and each
// file a symlink through `..data`.
type secretVolume struct {
	t   *testing.T
	dir string
	gen int
	cur string
}

func newSecretVolume(t *testing.T, files map[string]string) *secretVolume {
	t.Helper()
	v := &secretVolume{t: t, dir: t.TempDir()}
	v.publish(files)
	for name := range files {
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(v.dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return v
}

// publish does what the kubelet does on an update: write a new timestamped
// directory, rename a new `..data` symlink over the old one, and remove the
// old directory.
func (v *secretVolume) publish(files map[string]string) {
	t := v.t
	t.Helper()
	v.gen++
	ts := fmt.Sprintf("..2026_11_30_07_56_%02d.%d", v.gen, 1000+v.gen)
	if err := os.Mkdir(filepath.Join(v.dir, ts), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(v.dir, ts, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tmp := filepath.Join(v.dir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(v.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if v.cur != "" {
		if err := os.RemoveAll(filepath.Join(v.dir, v.cur)); err != nil {
			t.Fatal(err)
		}
	}
	v.cur = ts
}

// eventually fails the test unless cond holds within reloadBound.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	eventuallyWithin(t, reloadBound, what, cond)
}

// eventuallyWithin is eventually with a bound of its own, for a condition
// that waits on more work than a reload of a small file (a file of
// thousands of limits, loaded under the race detector on a busy machine).
func eventuallyWithin(t *testing.T, bound time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, bound)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, with a wide bound
	}
}

// reloadsCounted returns rls_config_reloads_total{result="success"}.
func reloadsCounted(t *testing.T, m *metrics.Metrics) float64 {
	t.Helper()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "rls_config_reloads_total" {
			continue
		}
		for _, mt := range f.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == "success" {
					return mt.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestReloadSameContents: a ConfigMap update to the same data, or a touch,
// keeps the snapshot and the over-limit cache, and counts no reload; the
// next real change replaces both, counted once.
func TestReloadSameContents(t *testing.T) {
	vol := newSecretVolume(t, map[string]string{"limits.yaml": serveLimits})
	core, logs := observer.New(zapcore.DebugLevel)
	w, err := watch.New(zap.New(core), watch.Options{}, vol.dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(vol.dir)
	if err != nil {
		w.Close()
		t.Fatal(err)
	}
	mem := memory.New(memory.Options{})
	defer mem.Close()
	cache := overlimit.New(mem, overlimit.Options{})
	m := metrics.New()
	svc, err := rls.New(descriptors.NewIndex(cfg), rls.Options{Store: cache, Metrics: m, OnConfigChange: cache.Clear})
	if err != nil {
		t.Fatal(err)
	}
	// One request per hour: the second is refused, and the cache keeps it.
	for range 2 {
		if _, err := svc.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{
			Domain: "test",
			Descriptors: []*ratelimitv3.RateLimitDescriptor{{
				Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "k", Value: "v"}},
			}},
		}); err != nil {
			t.Fatal(err)
		}
	}
	if n := cache.Len(); n != 1 {
		t.Fatalf("over-limit cache after a refusal: got %d entries, want 1", n)
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	src := &filesSource{path: vol.dir, lo: config.DefaultOptions(), log: zap.New(core), watch: w, m: m}
	src.cur.Store(cfg)
	src.serve(ctx, &wg, svc, func() {})
	ix := svc.Index()

	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(vol.dir, vol.cur, "limits.yaml"), later, later); err != nil {
		t.Fatal(err)
	}
	vol.publish(map[string]string{"limits.yaml": serveLimits})
	eventually(t, "the watcher looks at the files", func() bool {
		return logs.FilterMessage("watch: files unchanged").Len() > 0
	})
	if svc.Index() != ix {
		t.Error("the same contents replaced the snapshot")
	}
	if n := cache.Len(); n != 1 {
		t.Errorf("over-limit cache after the same contents: got %d entries, want 1", n)
	}

	// A real change, after the others: the watcher takes events in order,
	// so a call for the same contents would have come first and been
	// counted.
	vol.publish(map[string]string{"limits.yaml": serveLimits + "  - key: other\n    rate_limit: {unit: second, requests_per_unit: 5}\n"})
	eventually(t, "the change takes effect", func() bool { return svc.Index() != ix })
	if n := cache.Len(); n != 0 {
		t.Errorf("over-limit cache after a change: got %d entries, want 0", n)
	}
	if got := reloadsCounted(t, m); got != 1 {
		t.Errorf("reloads counted: got %v, want 1 (the change alone)", got)
	}
	if got := logs.FilterMessage("config reloaded").Len(); got != 1 {
		t.Errorf("reloads logged: got %d, want 1 (the change alone)", got)
	}
}

// TestReloadChangeWhileStarting: a change made after the server has first
// loaded its config, before it runs the config's watcher, is reloaded: the
// watcher was started before that load. openSource's hook makes the change
// right after the load, and listen and serveOn, which serve calls next,
// widen the window before the watcher runs.
func TestReloadChangeWhileStarting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "limits.yaml")
	if err := os.WriteFile(path, []byte(serveLimits), 0o644); err != nil {
		t.Fatal(err)
	}
	o, err := parseFlags([]string{"-config", path, "-grpc-addr", "127.0.0.1:0", "-http-addr", "127.0.0.1:0",
		"-debug-addr", "", "-shutdown-timeout", "5s"}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	const other = "  - key: other\n    rate_limit: {unit: second, requests_per_unit: 5}\n"
	src, err := openSource(o, zap.NewNop(), func() {
		if err := os.WriteFile(path, []byte(serveLimits+other), 0o644); err != nil {
			t.Error(err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if src.(*filesSource).watch == nil {
		t.Fatal("openSource: no watcher, want one")
	}
	if lines := src.config().Lines(); len(lines) != 1 {
		t.Fatalf("the first load: got %q, want the one limit of the config before the change", lines)
	}
	ls, err := listen(o, zap.NewNop())
	if err != nil {
		src.close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serveOn(ctx, o, src, zap.NewNop(), ls) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("server stopped with %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Error("server did not stop within 15s")
		}
	}()
	url := "http://" + ls.http.Addr().String() + "/rlconfig"
	eventually(t, "the change made while the server started takes effect", func() bool {
		_, body := httpDo(t, "GET", url, "")
		return strings.Contains(body, "test.other: ")
	})
}
