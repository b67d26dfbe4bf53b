package metrics

import "github.com/prometheus/client_golang/prometheus"

var (
	hotKeysDesc = prometheus.NewDesc("rls_hot_key_keys",
		"Keys of limits with a sync_interval whose shares this instance holds.", nil, nil)
	hotLocalDesc = prometheus.NewDesc("rls_hot_key_local_decisions_total",
		"Hits of limits with a sync_interval admitted from a share this instance holds, without a Redis round trip.", nil, nil)
	hotDirectDesc = prometheus.NewDesc("rls_hot_key_store_decisions_total",
		"Hits of limits with a sync_interval sent to Redis plainly, one round trip each: keys not hit often enough for a share, keys near their limit, shares Redis refused.", nil, nil)
	hotSyncsDesc = prometheus.NewDesc("rls_hot_key_syncs_total",
		"Shares of limits with a sync_interval taken or topped up, one charge to Redis each.", nil, nil)
	hotChargedDesc = prometheus.NewDesc("rls_hot_key_charged_total",
		"What the shares Redis granted charged, in the limits' units: divided by the syncs, the mean share.", nil, nil)
)

// HotKeyStats is what the hot-key layer has done (hotkey.Store.Stats).
type HotKeyStats struct {
	Keys                          int
	Local, Direct, Syncs, Charged uint64
}

// NewHotKeyCollector returns a collector of the hot-key layer's figures
// (the limits with a sync_interval), read from stats at each scrape: the
// share of local decisions among the mode's is what Redis is spared.
func NewHotKeyCollector(stats func() HotKeyStats) prometheus.Collector {
	return hotKeyCollector(stats)
}

type hotKeyCollector func() HotKeyStats

// hotKeyFamilies are the collector's families, each with its type and
// its figure of the stats.
var hotKeyFamilies = []struct {
	desc  *prometheus.Desc
	typ   prometheus.ValueType
	value func(st HotKeyStats) float64
}{
	{hotKeysDesc, prometheus.GaugeValue, func(st HotKeyStats) float64 { return float64(st.Keys) }},
	{hotLocalDesc, prometheus.CounterValue, func(st HotKeyStats) float64 { return float64(st.Local) }},
	{hotDirectDesc, prometheus.CounterValue, func(st HotKeyStats) float64 { return float64(st.Direct) }},
	{hotSyncsDesc, prometheus.CounterValue, func(st HotKeyStats) float64 { return float64(st.Syncs) }},
	{hotChargedDesc, prometheus.CounterValue, func(st HotKeyStats) float64 { return float64(st.Charged) }},
}

func (c hotKeyCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, f := range hotKeyFamilies {
		ch <- f.desc
	}
}

func (c hotKeyCollector) Collect(ch chan<- prometheus.Metric) {
	st := c()
	for _, f := range hotKeyFamilies {
		ch <- prometheus.MustNewConstMetric(f.desc, f.typ, f.value(st))
	}
}
