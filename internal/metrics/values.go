package metrics

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// The stat keys of request values. detailed_metric and value_to_metric
// put a request's values in its stat key, so callers choose how many keys
// there are: each holds six stat names, their series and their statsd
// counters. They are bounded by the memory they are estimated to hold
// (RatelimitOptions.ValuesBytes) rather than by their number, since a key
// is as long as its values. A new key past the bound makes room by
// dropping the keys counted least recently (an approximation of LRU, as
// Redis evicts: the oldest of a few sampled), their Prometheus series and
// statsd counters with them, so that new values are always counted and
// values still in use stay; a dropped key that comes back starts again
// from zero, which Prometheus reads as a counter reset.

// Estimated memory of a key of request values: what its series (five
// sharing their families' descriptions, and a family of its own for
// over_limit_with_local_cache, which no mapping names) and its statsd
// counters hold besides the key's bytes, and what each byte of the key
// costs (in six stat names, series ids, label values and that family's
// name). Measured with TestStatValuesMemory (BENCHMARKS.md), rounded up.
const (
	valueKeyFamilies = 3840
	valueKeyStatsd   = 2432
	valueKeyPerByte  = 24
)

// evictSample is how many keys an eviction looks at to find the least
// recently counted.
const evictSample = 8

// valueKeys is the accounting of the stat keys of request values. Its
// fields but the atomics are under ratelimitStats.mu.
type valueKeys struct {
	max   int64 // the bound, in bytes
	base  int64 // a key's estimated memory besides its bytes' (valueKey*)
	bytes int64 // held, as estimated
	n     int   // keys held

	// tick is the clock of last use: it moves by two at each key made,
	// which takes the odd time before it, and a key counted takes its
	// time, so that a key counted since the last was made is newer than
	// that one.
	tick             atomic.Uint64
	evicted, dropped atomic.Uint64

	// full is called once (fullOnce), after the lock is released, once
	// hitFull says the bound was first reached.
	full     func()
	fullOnce sync.Once
	hitFull  atomic.Bool
}

// cost is the memory key is estimated to hold.
func (v *valueKeys) cost(key string) int64 { return v.base + valueKeyPerByte*int64(len(key)) }

// touch marks e as counted now.
func (v *valueKeys) touch(e *statEntry) {
	if t := v.tick.Load(); e.last.Load() != t {
		e.last.Store(t)
	}
}

// makeRoomLocked accounts for e, a new key of request values, dropping
// the least recently counted keys until it fits; false, and e is not
// kept, when it cannot fit on its own.
func (r *ratelimitStats) makeRoomLocked(e *statEntry) bool {
	v := &r.values
	e.cost = v.cost(e.key)
	if e.cost > v.max {
		v.dropped.Add(1)
		v.hitFull.Store(true)
		return false
	}
	for v.bytes+e.cost > v.max {
		oldest := r.oldestLocked()
		if oldest == nil {
			break
		}
		r.evictLocked(oldest)
		v.hitFull.Store(true)
	}
	v.bytes += e.cost
	v.n++
	e.last.Store(v.tick.Add(2) - 1)
	return true
}

// oldestLocked returns the least recently counted of a few evictable
// keys, taken where the map's iteration starts (a random place).
func (r *ratelimitStats) oldestLocked() *statEntry {
	var oldest *statEntry
	seen := 0
	for _, e := range r.byKey {
		if !e.evictable.Load() {
			continue
		}
		if oldest == nil || e.last.Load() < oldest.last.Load() {
			oldest = e
		}
		if seen++; seen == evictSample {
			break
		}
	}
	return oldest
}

// evictLocked drops e, and the series and statsd counters no other key
// counts into: the scrape no longer serves them, nor a flush sends them
// (what they counted since the last flush is lost, and counted in
// rls_statsd_dropped_total).
func (r *ratelimitStats) evictLocked(e *statEntry) {
	delete(r.byKey, e.key)
	r.values.bytes -= e.cost
	r.values.n--
	r.values.evicted.Add(1)
	for _, c := range e.set {
		if c.s != nil {
			if c.s.refs--; c.s.refs == 0 {
				r.forgetSeriesLocked(c.s)
			}
		}
		if c.sd != nil {
			if c.sd.refs--; c.sd.refs == 0 {
				r.sd.forgetLocked(c.sd)
			}
		}
	}
}

// forgetSeriesLocked drops s, and its family's description and name
// when no other series has them (a family of its own, as a stat key of
// request values gets for over_limit_with_local_cache).
func (r *ratelimitStats) forgetSeriesLocked(s *series) {
	delete(r.series, s.id)
	d := r.descs[s.descID]
	if d.refs--; d.refs == 0 {
		delete(r.descs, s.descID)
	}
	f := r.families[s.family]
	if f.series--; f.series == 0 {
		delete(r.families, s.family)
	} else {
		r.families[s.family] = f
	}
}

// pin makes e, found by a key the config alone names, a key that is not
// evicted: a static node keeps its counters for as long as the config.
// It reports false when e was evicted already.
func (r *ratelimitStats) pin(e *statEntry) bool {
	if !e.evictable.Load() {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !e.evictable.Load() {
		return true
	}
	if r.byKey[e.key] != e {
		return false
	}
	e.evictable.Store(false)
	r.values.bytes -= e.cost
	r.values.n--
	return true
}

// sayFull calls full once the bound has first been reached.
func (v *valueKeys) sayFull() {
	if v.full != nil && v.hitFull.Load() {
		v.fullOnce.Do(v.full)
	}
}

// valueCollector serves the accounting of the stat keys of request
// values among the service's own families.
type valueCollector struct{ r *ratelimitStats }

var _ prometheus.Collector = valueCollector{}

var (
	valueKeysDesc = prometheus.NewDesc("rls_stat_values",
		"Stat keys of envoyproxy/ratelimit's stats that hold request values (detailed_metric, value_to_metric) kept.", nil, nil)
	valueBytesDesc = prometheus.NewDesc("rls_stat_values_bytes",
		"Memory the stat keys of request values are estimated to hold, within -stat-values-max-mib.", nil, nil)
	valueEvictedDesc = prometheus.NewDesc("rls_stat_values_evicted_total",
		"Stat keys of request values dropped, with their series and statsd counters, to make room within -stat-values-max-mib for new ones: the least recently counted.", nil, nil)
	valueDroppedDesc = prometheus.NewDesc("rls_stat_values_dropped_total",
		"Stat keys of request values not counted at all: each larger than -stat-values-max-mib on its own.", nil, nil)
)

func (valueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- valueKeysDesc
	ch <- valueBytesDesc
	ch <- valueEvictedDesc
	ch <- valueDroppedDesc
}

func (c valueCollector) Collect(ch chan<- prometheus.Metric) {
	v := &c.r.values
	c.r.mu.RLock()
	n, bytes := v.n, v.bytes
	c.r.mu.RUnlock()
	ch <- prometheus.MustNewConstMetric(valueKeysDesc, prometheus.GaugeValue, float64(n))
	ch <- prometheus.MustNewConstMetric(valueBytesDesc, prometheus.GaugeValue, float64(bytes))
	ch <- prometheus.MustNewConstMetric(valueEvictedDesc, prometheus.CounterValue, float64(v.evicted.Load()))
	ch <- prometheus.MustNewConstMetric(valueDroppedDesc, prometheus.CounterValue, float64(v.dropped.Load()))
}
