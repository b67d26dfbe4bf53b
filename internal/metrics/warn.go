package metrics

import "github.com/prometheus/client_golang/prometheus"

// newWarnCrossed is the family of the soft thresholds' crossings
// (warn_at): a series only for a rule with warn_at whose hits crossed one,
// so that a config without warn_at exports nothing new.
func newWarnCrossed() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rls_warn_crossed_total",
		Help: "Admitted hits that moved a limit's usage (its capacity less what remains) from below a warn_at threshold to it or above, by domain, rule and threshold.",
	}, []string{"domain", "rule", "threshold"})
}

// WarnCrossed counts one hit that crossed threshold (as the limits file
// writes it) of rule's warn_at in domain.
func (m *Metrics) WarnCrossed(domain, rule, threshold string) {
	if m == nil {
		return
	}
	m.warnCrossed.WithLabelValues(domain, rule, threshold).Inc()
}
