package rlqs

import "github.com/prometheus/client_golang/prometheus"

var (
	streamsDesc = prometheus.NewDesc("rls_rlqs_streams",
		"RLQS streams open now: one per Envoy and domain.", nil, nil)
	bucketsDesc = prometheus.NewDesc("rls_rlqs_buckets",
		"Buckets the open RLQS streams have reported and not abandoned.", nil, nil)
	reportsDesc = prometheus.NewDesc("rls_rlqs_reports_total",
		"RLQS usage reports answered.", nil, nil)
	assignmentsDesc = prometheus.NewDesc("rls_rlqs_assignments_total",
		"Bucket actions sent, by strategy: token_bucket, allow_all, deny_all, abandon.", []string{"strategy"}, nil)
	noMatchDesc = prometheus.NewDesc("rls_rlqs_no_match_total",
		"Buckets reported that no limit matched, answered ALLOW_ALL.", nil, nil)
	overBoundDesc = prometheus.NewDesc("rls_rlqs_buckets_over_bound_total",
		"Reports of a bucket answered undivided (the limit's whole rate, kept nowhere) because its stream held -rlqs-max-buckets-per-stream buckets (bound stream) or the instance -rlqs-max-buckets (bound instance).", []string{"bound"}, nil)
	unreportedDesc = prometheus.NewDesc("rls_rlqs_buckets_unreported_total",
		"Buckets dropped because their stream had not reported them for the idle time.", nil, nil)
	storeFailuresDesc = prometheus.NewDesc("rls_rlqs_store_failures_total",
		"Divisions made without the demand store, on this instance's last known part of the limit.", nil, nil)
	silentDesc = prometheus.NewDesc("rls_rlqs_silent_streams_closed_total",
		"RLQS streams closed for sending no report, by how: timeout (-rlqs-silent-after) or evicted (the longest-silent, for a new stream while every place of -max-open-streams was taken).", []string{"how"}, nil)
	assignedDesc = prometheus.NewDesc("rls_rlqs_assigned_per_second",
		"Requests per second this instance's Envoys were last assigned, by rule (domain and place in the tree), summed over their buckets: sum it over instances.", []string{"rule"}, nil)
	limitDesc = prometheus.NewDesc("rls_rlqs_limit_per_second",
		"The limits, in requests per second, of the buckets this instance's Envoys hold, by rule, summed over the buckets: beside the assigned sum.", []string{"rule"}, nil)
)

// Collector returns the service's metrics for a Prometheus registry.
func (s *Service) Collector() prometheus.Collector { return collector{s} }

type collector struct{ s *Service }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{streamsDesc, bucketsDesc, reportsDesc, assignmentsDesc, noMatchDesc, overBoundDesc, unreportedDesc, storeFailuresDesc, silentDesc, assignedDesc, limitDesc} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	st := &c.s.stats
	gauge := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v))
	}
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge(streamsDesc, st.Streams.Load())
	gauge(bucketsDesc, st.Buckets.Load())
	counter(reportsDesc, st.Reports.Load())
	counter(assignmentsDesc, st.TokenBuckets.Load(), "token_bucket")
	counter(assignmentsDesc, st.AllowAll.Load(), "allow_all")
	counter(assignmentsDesc, st.DenyAll.Load(), "deny_all")
	counter(assignmentsDesc, st.Abandoned.Load(), "abandon")
	counter(noMatchDesc, st.NoMatch.Load())
	counter(overBoundDesc, st.OverStream.Load(), "stream")
	counter(overBoundDesc, st.OverAll.Load(), "instance")
	counter(unreportedDesc, st.Unreported.Load())
	counter(storeFailuresDesc, st.StoreFailures.Load())
	counter(silentDesc, st.Silent.Load(), "timeout")
	counter(silentDesc, st.Evicted.Load(), "evicted")
	c.s.rules.each(func(rule string, assigned, limit float64) {
		ch <- prometheus.MustNewConstMetric(assignedDesc, prometheus.GaugeValue, assigned, rule)
		ch <- prometheus.MustNewConstMetric(limitDesc, prometheus.GaugeValue, limit, rule)
	})
}
