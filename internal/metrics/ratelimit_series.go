package metrics

import (
	"math"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// The counts go into series that the scrape reads: plain integers, or
// floats for a mapping that scales.

// counterRef is where a stat's counts go: a series, with the mapping's
// scale, and the stat's statsd counter. A zero counterRef counts nothing
// (a mapping that drops the stat, and no statsd sink).
type counterRef struct {
	s      *series
	scale  float64
	scaled bool
	sd     *statsdCounter
}

func (c counterRef) add(v uint64) {
	if v == 0 {
		return
	}
	if c.sd != nil {
		c.sd.n.Add(v)
	}
	switch {
	case c.s == nil:
	case !c.scaled:
		c.s.ints.Add(v)
	default:
		c.s.addFloat(float64(v) * c.scale)
	}
}

// series is one Prometheus series that stats count into. Stat names that
// map to the same family and labels (two stat keys that differ past key2)
// share a series, and their counts add up, as in the exporter.
type series struct {
	desc        *prometheus.Desc
	labelValues []string
	ints        atomic.Uint64
	floatBits   atomic.Uint64
	// id is its key in ratelimitStats.series, descID its desc's in
	// descs, and refs the counters that count into it (under
	// ratelimitStats.mu): the last one evicted takes the series out of
	// the scrape.
	id, descID, family string
	refs               int
}

func (s *series) addFloat(v float64) {
	for {
		old := s.floatBits.Load()
		if s.floatBits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

func (s *series) value() float64 {
	return float64(s.ints.Load()) + math.Float64frombits(s.floatBits.Load())
}

// seriesCollector serves the counters' series. It describes nothing (the
// families appear as stats are first counted, with label names that vary
// within a family, as the exporter's do), and skips a series that has
// counted nothing, as a statsd stat never flushed is not served.
type seriesCollector struct{ r *ratelimitStats }

var _ prometheus.Collector = seriesCollector{}

func (seriesCollector) Describe(chan<- *prometheus.Desc) {}

func (c seriesCollector) Collect(ch chan<- prometheus.Metric) {
	c.r.mu.RLock()
	all := make([]*series, 0, len(c.r.series))
	for _, s := range c.r.series {
		all = append(all, s)
	}
	c.r.mu.RUnlock()
	for _, s := range all {
		if v := s.value(); v > 0 {
			// A label value that is not UTF-8 (a request's value, through
			// detailed_metric) cannot be served; the others still are.
			if m, err := prometheus.NewConstMetric(s.desc, prometheus.CounterValue, v, s.labelValues...); err == nil {
				ch <- m
			}
		}
	}
}
