package metrics

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"

	"github.com/envoy-rls/envoy-rls/internal/memtest"
	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
)

// discardSink takes a statsd flush and keeps its size.
type discardSink struct{ counters int }

func (s *discardSink) Counter(string, uint64) { s.counters++ }
func (s *discardSink) Gauge(string, uint64)   {}
func (s *discardSink) Timer(string, uint64)   {}

// TestStatValuesMemory drives RLS_STAT_VALUES distinct detailed_metric
// values (400,000 by default) through envoyproxy/ratelimit's stats, with
// the Prometheus families and a statsd sink, and reports the heap they
// hold, the size and time of a scrape, and how many of the last values
// are counted. It runs only with RLS_STAT_VALUES set (BENCHMARKS.md):
//
//	RLS_STAT_VALUES=400000 go test -run TestStatValuesMemory -v ./internal/metrics/
func TestStatValuesMemory(t *testing.T) {
	n, err := strconv.Atoi(os.Getenv("RLS_STAT_VALUES"))
	if err != nil {
		t.Skip("RLS_STAT_VALUES is not set")
	}
	for _, c := range []struct {
		name string
		o    RatelimitOptions
	}{
		{"prometheus", RatelimitOptions{}},
		{"statsd", RatelimitOptions{Statsd: true, NoFamilies: true}},
		{"both", RatelimitOptions{Statsd: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := within(walk(t, descriptors.Entry{Key: "client", Value: "x"}), 1, 0)
			before := memtest.HeapAfterGC()
			if mib, err := strconv.Atoi(os.Getenv("RLS_STAT_VALUES_MIB")); err == nil {
				c.o.ValuesBytes = int64(mib) << 20
			}
			m := enabled(t, c.o)
			start := time.Now()
			for i := range n {
				h.Entries = []descriptors.Entry{{Key: "client", Value: "user-" + strconv.Itoa(i)}}
				hit(m, h)
			}
			took := time.Since(start)
			after := memtest.HeapAfterGC()
			var size int
			var scrape time.Duration
			if g := m.RatelimitGatherer(); g != nil {
				start := time.Now()
				mfs, err := g.Gather()
				if err != nil {
					t.Fatal(err)
				}
				var b bytes.Buffer
				enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
				for _, mf := range mfs {
					enc.Encode(mf) //nolint:errcheck // into a buffer
				}
				scrape, size = time.Since(start), b.Len()
			}
			var sink discardSink
			m.FlushStatsd(&sink)
			// The last value, and one never seen: are they counted?
			h.Entries = []descriptors.Entry{{Key: "client", Value: "user-new"}}
			hit(m, h)
			counted := 0
			for _, v := range []string{"user-" + strconv.Itoa(n-1), "user-new"} {
				if m.ratelimitCounted("edge.client_" + v) {
					counted++
				}
			}
			t.Logf("%d values in %v: heap %.1f MB -> %.1f MB (+%.1f MB); scrape %.1f MB in %v; statsd flush %d counters; of the last and a new value %d counted; %s",
				n, took.Round(time.Millisecond), mb(before), mb(after), mb(after)-mb(before), float64(size)/(1<<20), scrape.Round(time.Millisecond), sink.counters, counted, m.valuesHeld())
			runtime.KeepAlive(m)
		})
	}
}

func mb(b uint64) float64 { return float64(b) / (1 << 20) }

// valuesHeld says what the bound of the stat keys of request values
// holds, when there is one.
func (m *Metrics) valuesHeld() string {
	v := &m.ratelimit.values
	m.ratelimit.mu.RLock()
	defer m.ratelimit.mu.RUnlock()
	return fmt.Sprintf("%d keys held, estimated %.1f MB, %d evicted", v.n, mb(uint64(v.bytes)), v.evicted.Load())
}

// ratelimitCounted reports whether the stat key key has counters.
func (m *Metrics) ratelimitCounted(key string) bool {
	r := m.ratelimit
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.byKey[key] != nil
}
