package metrics

import "github.com/prometheus/client_golang/prometheus"

// RedisUndosFailed exports, as rls_store_redis_undos_failed_total, what
// the Redis store sent after its answers and Redis did not do
// (redisstore.Store.BackFailed), read from failed at each scrape: each
// left a refused hit's charge counted until its key expires, stricter,
// never looser, so that a Redis that drops them shows before its quotas
// look short.
func (m *Metrics) RedisUndosFailed(failed func() int64) {
	m.Registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "rls_store_redis_undos_failed_total",
		Help: "Undos of refused charges (with the refunds, expiries and lock starts sent with them) that Redis did not apply: each left a charge counted until its key expires.",
	}, func() float64 { return float64(failed()) }))
}
