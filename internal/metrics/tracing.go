package metrics

import "github.com/prometheus/client_golang/prometheus"

// TraceDrops registers rls_trace_spans_dropped_total, the spans tracing
// dropped by reason, and returns the function that counts them
// (tracing.Options.OnDropped). Only a server that traces registers it;
// reasons are the ones given, each shown at 0 from the start.
func (m *Metrics) TraceDrops(reasons ...string) func(reason string, n int) {
	dropped := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rls_trace_spans_dropped_total",
		Help: "Trace spans dropped instead of exported, by reason: queue_full (the OTLP endpoint takes them slower than they end), export_failed (an export the endpoint did not take: down, refusing, or too slow). Decisions are never held up by a span.",
	}, []string{"reason"})
	for _, r := range reasons {
		dropped.WithLabelValues(r)
	}
	m.Registry.MustRegister(dropped)
	return func(reason string, n int) { dropped.WithLabelValues(reason).Add(float64(n)) }
}
