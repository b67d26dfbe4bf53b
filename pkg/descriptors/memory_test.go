package descriptors_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/internal/memtest"
	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// memoryFile is a limits file of n descriptors in keys of 100 values
// each, as an operator writes many: exact values and some wildcards, a
// limit each in flow style, a rate_limits list on every seventh, about 70
// bytes a descriptor.
func memoryFile(n int) []byte {
	units := []string{"second", "minute", "hour", "day"}
	var b strings.Builder
	b.WriteString("domain: large\ndescriptors:\n")
	for i := range n {
		k, v := i/100, i%100
		wildcard := ""
		if v%10 == 9 {
			wildcard = "-*"
		}
		fmt.Fprintf(&b, "  - key: k%d\n    value: v%d%s\n", k, v, wildcard)
		if v%7 == 0 {
			fmt.Fprintf(&b, "    rate_limits: [{unit: second, requests_per_unit: 10}, {unit: day, requests_per_unit: %d}]\n", 1000+v)
			continue
		}
		fmt.Fprintf(&b, "    rate_limit: {unit: %s, requests_per_unit: %d}\n", units[v%4], 1+k*v%1000)
	}
	return []byte(b.String())
}

// heapSampler records the largest HeapInuse it sees, every millisecond,
// until stopped.
type heapSampler struct {
	peak atomic.Uint64
	stop chan struct{}
	done chan struct{}
}

func sampleHeap() *heapSampler {
	s := &heapSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > s.peak.Load() {
				s.peak.Store(ms.HeapInuse)
			}
			select {
			case <-s.stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	return s
}

func (s *heapSampler) end() uint64 {
	close(s.stop)
	<-s.done
	return s.peak.Load()
}

// loadIndex loads the file at path and indexes it, as a reload does.
func loadIndex(t *testing.T, path string) *descriptors.Index {
	t.Helper()
	c, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return descriptors.NewIndex(c)
}

// liveBound is how many times its file a large config may take, live, at
// the peak of its load and index: go.yaml.in/yaml/v3 builds its tree of
// the whole document before decoding it, about 24 times the file on this
// shape, and the decoded types live beside it; 10 times would need a
// decoder that does not build the tree. The load took 54 times the file
// before its decoded scalars stopped holding the tree's nodes and its
// field lines became lists.
const liveBound = 46

// A large config, loaded and indexed as a reload does, peaks under
// liveBound times its file in live heap above what was in use before,
// and nothing of it stays once a small config replaces it. The heap is
// measured with the collector running at every 10 % of growth, so that it
// is the live heap (the default lets garbage double it, at the
// collector's whim). RLS_CONFIG_MEMORY=100000 runs it at 100,000
// descriptors (8.9 MB of YAML); the default is 20,000.
func TestLargeConfigMemory(t *testing.T) {
	n := 20_000
	if env := os.Getenv("RLS_CONFIG_MEMORY"); env != "" {
		var err error
		if n, err = strconv.Atoi(env); err != nil || n <= 0 {
			t.Fatalf("RLS_CONFIG_MEMORY=%q: want a number of descriptors", env)
		}
	}
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	dir := t.TempDir()
	large, small := filepath.Join(dir, "large.yaml"), filepath.Join(dir, "small.yaml")
	data := memoryFile(n)
	if err := os.WriteFile(large, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(small, memoryFile(10), 0o644); err != nil {
		t.Fatal(err)
	}
	size := uint64(len(data))
	data = nil
	base := memtest.HeapAfterGC()

	s := sampleHeap()
	ix := loadIndex(t, large)
	peak := s.end() - base
	held := memtest.HeapAfterGC() - base
	runtime.KeepAlive(ix)
	ix = loadIndex(t, small)
	after := int64(memtest.HeapAfterGC()) - int64(base)
	runtime.KeepAlive(ix)

	t.Logf("%d descriptors, %d bytes of YAML: peak %d bytes above the base (%.1f× the file), %d held by the index (%.1f×), %d after a small config",
		n, size, peak, float64(peak)/float64(size), held, float64(held)/float64(size), after)
	if peak > liveBound*size {
		t.Errorf("the load peaked at %d bytes above the base, want under %d× the file (%d)", peak, liveBound, liveBound*size)
	}
	if after > int64(size) {
		t.Errorf("after a small config replaced it, %d bytes above the base stay, want none of the large one (under %d)", after, size)
	}
}
