package metrics

import "github.com/prometheus/client_golang/prometheus"

var (
	memoryKeysDesc = prometheus.NewDesc("rls_memory_store_keys",
		"Keys held by the embedded store, expired ones not yet removed included.", nil, nil)
	memoryEvictionsDesc = prometheus.NewDesc("rls_memory_store_evictions_total",
		"Live keys the embedded store dropped to stay within -max-keys; each forgets its quota, so a growing count means -max-keys is too small.", nil, nil)
	memoryExpiredDesc = prometheus.NewDesc("rls_memory_store_expired_total",
		"Keys the embedded store removed because their state had expired.", nil, nil)
)

// NewMemoryStoreCollector returns a collector of the embedded store's
// counters, read from stats at each scrape (memory.Store.Stats: keys held,
// live keys evicted, expired keys removed):
//
//	metrics.NewMemoryStoreCollector(func() (int, uint64, uint64) {
//		st := store.Stats()
//		return st.Keys, st.Evictions, st.Expired
//	})
func NewMemoryStoreCollector(stats func() (keys int, evictions, expired uint64)) prometheus.Collector {
	return memoryStoreCollector(stats)
}

type memoryStoreCollector func() (int, uint64, uint64)

func (c memoryStoreCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- memoryKeysDesc
	ch <- memoryEvictionsDesc
	ch <- memoryExpiredDesc
}

func (c memoryStoreCollector) Collect(ch chan<- prometheus.Metric) {
	keys, evictions, expired := c()
	ch <- prometheus.MustNewConstMetric(memoryKeysDesc, prometheus.GaugeValue, float64(keys))
	ch <- prometheus.MustNewConstMetric(memoryEvictionsDesc, prometheus.CounterValue, float64(evictions))
	ch <- prometheus.MustNewConstMetric(memoryExpiredDesc, prometheus.CounterValue, float64(expired))
}

var (
	overLimitKeysDesc = prometheus.NewDesc("rls_over_limit_cache_keys",
		"Keys the local over-limit cache holds: refused by Redis, answered here until their reset.", nil, nil)
	overLimitLocalDesc = prometheus.NewDesc("rls_over_limit_cache_answers_total",
		"Hits the over-limit cache refused locally, without a Redis round trip.", nil, nil)
)

// NewOverLimitCacheCollector returns a collector of the over-limit cache
// (-over-limit-cache), read from stats at each scrape (overlimit.Cache: Len
// and LocalAnswers). The share of refusals it answers tells how much of an
// attack's load stays off Redis.
func NewOverLimitCacheCollector(stats func() (keys int, local uint64)) prometheus.Collector {
	return overLimitCacheCollector(stats)
}

type overLimitCacheCollector func() (int, uint64)

func (c overLimitCacheCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- overLimitKeysDesc
	ch <- overLimitLocalDesc
}

func (c overLimitCacheCollector) Collect(ch chan<- prometheus.Metric) {
	keys, local := c()
	ch <- prometheus.MustNewConstMetric(overLimitKeysDesc, prometheus.GaugeValue, float64(keys))
	ch <- prometheus.MustNewConstMetric(overLimitLocalDesc, prometheus.CounterValue, float64(local))
}

var (
	mastersDesc = prometheus.NewDesc("rls_store_masters",
		"Masters of the Redis Cluster that hold slots, as the last check of them found (every health check, and a reload of the cluster's map after a call found a node unreachable).", nil, nil)
	mastersDownDesc = prometheus.NewDesc("rls_store_masters_unreachable",
		"Masters of the Redis Cluster that did not answer the last check: the keys of their slots take the failure mode until they answer or their replicas take over.", nil, nil)
	mastersFastDesc = prometheus.NewDesc("rls_store_masters_failing_fast",
		"Masters of the Redis Cluster whose calls kept timing out, so that calls for their keys now take the failure mode at once, without waiting, until a probe is answered.", nil, nil)
)

// NewClusterMastersCollector returns a collector of what the last check of
// a Redis Cluster's masters found, read from masters at each scrape
// (redisstore.Store.Masters and MastersFailingFast): how many hold slots,
// how many of those did not answer, how many fail their calls fast.
func NewClusterMastersCollector(masters func() (total, unreachable, failingFast int)) prometheus.Collector {
	return clusterMastersCollector(masters)
}

type clusterMastersCollector func() (int, int, int)

func (c clusterMastersCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- mastersDesc
	ch <- mastersDownDesc
	ch <- mastersFastDesc
}

func (c clusterMastersCollector) Collect(ch chan<- prometheus.Metric) {
	total, down, fast := c()
	ch <- prometheus.MustNewConstMetric(mastersDesc, prometheus.GaugeValue, float64(total))
	ch <- prometheus.MustNewConstMetric(mastersDownDesc, prometheus.GaugeValue, float64(down))
	ch <- prometheus.MustNewConstMetric(mastersFastDesc, prometheus.GaugeValue, float64(fast))
}

var (
	evictedDesc = prometheus.NewDesc("rls_store_redis_evicted_keys_total",
		"Keys Redis evicted to make room (INFO evicted_keys, summed over the masters): each a limit's count, lock or held slot that may have restarted from nothing. Any growth means maxmemory-policy is not noeviction and memory ran out.", nil, nil)
	evictsDesc = prometheus.NewDesc("rls_store_redis_evicts",
		"1 while Redis has a maxmemory and a maxmemory-policy other than noeviction: it may evict the service's keys (every one has a TTL, so volatile-* policies too). Set noeviction.", nil, nil)
	fullDesc = prometheus.NewDesc("rls_store_redis_memory_full",
		"1 while Redis is out of memory under noeviction: it refuses every charge, and every hit takes its limit's failure mode.", nil, nil)
	missingDesc = prometheus.NewDesc("rls_store_permissions_missing",
		"ACL rules (commands, the keys, the reset channel) the Redis user lacks for what the service sends: every call they concern takes the failure mode until they are added.", nil, nil)
	lostDesc = prometheus.NewDesc("rls_store_state_lost_total",
		"Times Redis was found to have lost the service's state (FLUSHALL, a restart without persistence): every limit's counts, locks and held slots restarted from nothing.", nil, nil)
)

// RedisInspection is what the inspections of Redis found
// (redisstore.Store.Inspection).
type RedisInspection struct {
	Evicted      int64
	Evicts, Full bool
	Missing      int
	Lost         uint64
}

// NewRedisInspectionCollector returns a collector of what the last
// inspection of Redis found, read from inspection at each scrape.
func NewRedisInspectionCollector(inspection func() RedisInspection) prometheus.Collector {
	return redisInspectionCollector(inspection)
}

type redisInspectionCollector func() RedisInspection

func (c redisInspectionCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{evictedDesc, evictsDesc, fullDesc, missingDesc, lostDesc} {
		ch <- d
	}
}

func (c redisInspectionCollector) Collect(ch chan<- prometheus.Metric) {
	in := c()
	ch <- prometheus.MustNewConstMetric(evictedDesc, prometheus.CounterValue, float64(in.Evicted))
	ch <- prometheus.MustNewConstMetric(evictsDesc, prometheus.GaugeValue, flag(in.Evicts))
	ch <- prometheus.MustNewConstMetric(fullDesc, prometheus.GaugeValue, flag(in.Full))
	ch <- prometheus.MustNewConstMetric(missingDesc, prometheus.GaugeValue, float64(in.Missing))
	ch <- prometheus.MustNewConstMetric(lostDesc, prometheus.CounterValue, float64(in.Lost))
}
