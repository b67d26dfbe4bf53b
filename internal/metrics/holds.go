package metrics

import "github.com/prometheus/client_golang/prometheus"

// The outcomes of rls_holds_total that no store gives (the others are
// limits.HoldOutcome's names: reserved, refused, repeated, settled,
// unheld): a request refused for its hold, and a settle without an id,
// decided as a plain charge.
const (
	HoldInvalid         = "invalid"
	HoldSettleWithoutID = "settle_without_id"
)

// holdsCounter is rls_holds_total: what the descriptors of a domain with
// holds did with them. Its labels are bounded: domains with holds, and
// seven outcomes.
func holdsCounter() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rls_holds_total",
		Help: "Descriptors of a domain with holds, by domain and what they did with their hold: reserved, refused (nothing held), repeated (a retry of a reserve still held, charged nothing), settled, unheld (a settle without a live hold, a plain charge), invalid (the request refused: an id too long), settle_without_id (a plain charge).",
	}, []string{"domain", "outcome"})
}

// Hold counts one descriptor of domain by what it did with its hold.
func (m *Metrics) Hold(domain, outcome string) {
	if m == nil {
		return
	}
	m.holds.WithLabelValues(domain, outcome).Inc()
}
