package metrics

import "github.com/prometheus/client_golang/prometheus"

// newCandidates are the families of the limits' candidates (a limit tried
// beside the enforced one, never enforced): the hits each decided, and
// those it would have refused, so that the share it would refuse is a
// ratio of their rates. A series only for a rule with a candidate, so
// that a config without candidates exports nothing new.
func newCandidates() (decisions, wouldRefuse *prometheus.CounterVec) {
	decisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rls_candidate_decisions_total",
		Help: "Hits a rule's candidate limit decided (on counters of its own, never enforced), by domain and rule.",
	}, []string{"domain", "rule"})
	wouldRefuse = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rls_candidate_would_refuse_total",
		Help: "Hits a rule's candidate limit would have refused had it been enforced, by domain and rule; the answer is the enforced limit's.",
	}, []string{"domain", "rule"})
	return decisions, wouldRefuse
}

// CandidateDecided counts one hit that the candidate of rule in domain
// decided, and whether it would have refused it.
func (m *Metrics) CandidateDecided(domain, rule string, wouldRefuse bool) {
	if m == nil {
		return
	}
	m.candidates.WithLabelValues(domain, rule).Inc()
	if wouldRefuse {
		m.candidateRefusals.WithLabelValues(domain, rule).Inc()
	}
}
