package metrics

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// envoyproxy/ratelimit's stats for a statsd sink (RatelimitOptions.Statsd).
// envoyproxy/ratelimit keeps its stats in lyft/gostats, which pushes them
// on an interval (STATS_FLUSH_INTERVAL): each counter as what it counted
// since the last flush, when that is not zero; each gauge as its value;
// each timer sample as it comes. The counters here are the same records
// the Prometheus families count (counterRef), under their stat names, so
// that both sinks count from one place; FlushStatsd takes what they
// counted since the last flush.

// maxTimerSamples bounds the response times kept between two flushes:
// past it a sample is dropped, and counted in rls_statsd_dropped_total,
// rather than letting a long interval under load grow the process.
const maxTimerSamples = 1 << 17

// StatsdSink takes envoyproxy/ratelimit's stats at a flush, by their stat
// names (ratelimit.service.rate_limit.DOMAIN.KEY.total_hits): a counter as
// what it counted since the last flush, a gauge as its value, a timer as
// one sample, in whole milliseconds.
type StatsdSink interface {
	Counter(name string, n uint64)
	Gauge(name string, v uint64)
	Timer(name string, ms uint64)
}

// statsdCounter is one stat name's count, and what the last flush sent of
// it (the flush's own).
type statsdCounter struct {
	name string
	n    atomic.Uint64
	sent atomic.Uint64
	// refs is the stat keys that count into it, and at its place in
	// statsdStats.counters (both under ratelimitStats.mu).
	refs, at int
}

// timerSample is one call's duration, in whole milliseconds, as
// envoyproxy/ratelimit times it.
type timerSample struct {
	m  *methodStats
	ms uint32
}

// statsdStats are the statsd sink's counters and timer samples.
type statsdStats struct {
	// counters are the counters, under ratelimitStats.mu; byName finds
	// them (a name counted twice is one counter). A flush sends a copy
	// (flushed, its own).
	counters []*statsdCounter
	byName   map[string]*statsdCounter
	flushed  []*statsdCounter
	// lost is what evicted counters had counted that no flush sent.
	lost atomic.Uint64

	samplesMu sync.Mutex
	samples   []timerSample
	dropped   uint64 // samples past maxTimerSamples, under samplesMu
	// spare is the last flush's samples, handed over and reused, so that
	// keeping a sample allocates nothing once the two have grown.
	spare []timerSample

	flushMu sync.Mutex // one flush at a time
	runtime runtimeStats
}

func newStatsdStats() *statsdStats {
	return &statsdStats{byName: make(map[string]*statsdCounter)}
}

// counterLocked finds or makes name's counter; the caller holds
// ratelimitStats.mu.
func (s *statsdStats) counterLocked(name string) *statsdCounter {
	if c, ok := s.byName[name]; ok {
		return c
	}
	c := &statsdCounter{name: name, at: len(s.counters)}
	s.byName[name] = c
	s.counters = append(s.counters, c)
	return c
}

// forgetLocked drops c, whose last stat key was evicted; what it counted
// since the last flush is lost, and counted so. The caller holds
// ratelimitStats.mu.
func (s *statsdStats) forgetLocked(c *statsdCounter) {
	delete(s.byName, c.name)
	last := s.counters[len(s.counters)-1]
	s.counters[c.at], last.at = last, c.at
	s.counters[len(s.counters)-1] = nil
	s.counters = s.counters[:len(s.counters)-1]
	if n, sent := c.n.Load(), c.sent.Load(); n > sent {
		s.lost.Add(n - sent)
	}
}

// time keeps one sample of m's response time.
func (s *statsdStats) time(m *methodStats, d time.Duration) {
	ms := min(d.Milliseconds(), 1<<32-1)
	s.samplesMu.Lock()
	if len(s.samples) < maxTimerSamples {
		s.samples = append(s.samples, timerSample{m: m, ms: uint32(ms)})
	} else {
		s.dropped++
	}
	s.samplesMu.Unlock()
}

// takeSamples returns the samples kept since the last call, and how many
// were dropped.
func (s *statsdStats) takeSamples(spare []timerSample) ([]timerSample, uint64) {
	s.samplesMu.Lock()
	defer s.samplesMu.Unlock()
	got, dropped := s.samples, s.dropped
	s.samples, s.dropped = spare[:0], 0
	return got, dropped
}

// StatsdOn reports whether envoyproxy/ratelimit's stats are kept for a
// statsd sink.
func (m *Metrics) StatsdOn() bool { return m.RatelimitOn() && m.ratelimit.sd != nil }

// FlushStatsd hands envoyproxy/ratelimit's stats to sink, as
// envoyproxy/ratelimit flushes them: the counters that counted something
// since the last flush, the Go runtime's gauges (ratelimit.go.*), and the
// response times kept since. Flushes are one at a time; nothing is
// handed over when the stats have no statsd sink.
func (m *Metrics) FlushStatsd(sink StatsdSink) {
	if !m.StatsdOn() {
		return
	}
	r := m.ratelimit
	sd := r.sd
	sd.flushMu.Lock()
	defer sd.flushMu.Unlock()
	r.mu.RLock()
	sd.flushed = append(sd.flushed[:0], sd.counters...)
	r.mu.RUnlock()
	for _, c := range sd.flushed {
		n, sent := c.n.Load(), c.sent.Load()
		if n != sent && c.sent.CompareAndSwap(sent, n) {
			sink.Counter(c.name, n-sent)
		}
	}
	clear(sd.flushed) // the evicted counters go
	sd.runtime.flush(sink)
	samples, dropped := sd.takeSamples(sd.spare)
	for _, s := range samples {
		sink.Timer(s.m.timerName, uint64(s.ms))
	}
	sd.spare = samples
	m.StatsdDropped(dropped + sd.lost.Swap(0))
}

// StatsdDropped counts stats a statsd sink dropped: stat lines a statsd
// did not take in time, or response times past the bound between flushes.
func (m *Metrics) StatsdDropped(n uint64) {
	if m != nil && n > 0 {
		m.statsdDropped.Add(float64(n))
	}
}

// StatsdSent counts stat lines a statsd sink wrote.
func (m *Metrics) StatsdSent(n uint64) {
	if m != nil && n > 0 {
		m.statsdSent.Add(float64(n))
	}
}

// runtimeStats are the Go runtime's stats envoyproxy/ratelimit's server
// pushes under ratelimit.go (gostats' runtime stats): gauges, and counters
// sent as what they counted since the last flush.
type runtimeStats struct {
	last [runtimeCounters]uint64
}

// The runtime's counters, in runtimeStats.last.
const (
	rtTotalAlloc = iota
	rtMallocs
	rtFrees
	rtPauseTotalNs
	rtNumGC
	runtimeCounters
)

var runtimeCounterNames = [runtimeCounters]string{
	"ratelimit.go.totalAlloc", "ratelimit.go.mallocs", "ratelimit.go.frees", "ratelimit.go.pauseTotalNs", "ratelimit.go.numGC",
}

func (rt *runtimeStats) flush(sink StatsdSink) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	now := [runtimeCounters]uint64{ms.TotalAlloc, ms.Mallocs, ms.Frees, ms.PauseTotalNs, uint64(ms.NumGC)}
	for i, v := range now {
		if v > rt.last[i] {
			sink.Counter(runtimeCounterNames[i], v-rt.last[i])
		}
		rt.last[i] = v
	}
	for _, g := range []struct {
		name string
		v    uint64
	}{
		{"ratelimit.go.alloc", ms.Alloc}, {"ratelimit.go.sys", ms.Sys},
		{"ratelimit.go.heapAlloc", ms.HeapAlloc}, {"ratelimit.go.heapSys", ms.HeapSys},
		{"ratelimit.go.heapIdle", ms.HeapIdle}, {"ratelimit.go.heapInuse", ms.HeapInuse},
		{"ratelimit.go.heapReleased", ms.HeapReleased}, {"ratelimit.go.heapObjects", ms.HeapObjects},
		{"ratelimit.go.nextGC", ms.NextGC}, {"ratelimit.go.lastGC", ms.LastGC},
		{"ratelimit.go.gcCPUPercent", uint64(ms.GCCPUFraction * 100)},
		{"ratelimit.go.numGoroutine", uint64(runtime.NumGoroutine())},
	} {
		sink.Gauge(g.name, g.v)
	}
}
