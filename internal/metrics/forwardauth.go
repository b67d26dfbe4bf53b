package metrics

import "github.com/prometheus/client_golang/prometheus"

// ForwardAuth is the counting of GET /v1/forward-auth/{policy}: its calls
// by policy and outcome, the forwarding headers it ignored, and the
// reloads of its file, counted as the limits file's are. The policy label takes only the names of the file
// in force ("" for a call naming none), and outcome a fixed set, so that
// no request value becomes a series.
type ForwardAuth struct {
	calls, ignored, reloads *prometheus.CounterVec
	lastReloadOK            prometheus.Gauge
}

// ForwardAuth registers the forward-auth metrics; called once, at
// start-up, when the endpoint is on.
func (m *Metrics) ForwardAuth() *ForwardAuth {
	f := &ForwardAuth{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rls_forward_auth_total",
			Help: "Forward-auth calls by policy and outcome: allowed, refused, no_descriptor (no rule built a descriptor: allowed without a decision), unknown_policy, unknown_domain, missing_forwarded, repeated_header, too_long, bad_forwarded_for, bad_request, error (the service failed: 503 or 500).",
		}, []string{"policy", "outcome"}),
		ignored: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rls_forward_auth_untrusted_forwarded_total",
			Help: "Forward-auth calls whose X-Forwarded-For or X-Real-IP was ignored because their peer is not in trusted_proxies: the peer was the client (a spoof, or a proxy missing from the list).",
		}, []string{"policy"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rls_forward_auth_reloads_total",
			Help: "Reloads of -forward-auth-config by result (success, failure: the last good file stays in force).",
		}, []string{"result"}),
		lastReloadOK: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "rls_forward_auth_last_reload_successful",
			Help: "Whether the last load of -forward-auth-config succeeded (1) or kept the last good file (0).",
		}),
	}
	f.lastReloadOK.Set(1) // the start loaded it, or did not start
	m.Registry.MustRegister(f.calls, f.ignored, f.reloads, f.lastReloadOK)
	return f
}

// Call counts one call.
func (f *ForwardAuth) Call(policy, outcome string) { f.calls.WithLabelValues(policy, outcome).Inc() }

// Ignored counts one call whose forwarding headers were ignored.
func (f *ForwardAuth) Ignored(policy string) { f.ignored.WithLabelValues(policy).Inc() }

// Reloaded counts one reload of the file, failed or not.
func (f *ForwardAuth) Reloaded(ok bool) {
	result, last := "success", 1.0
	if !ok {
		result, last = "failure", 0
	}
	f.reloads.WithLabelValues(result).Inc()
	f.lastReloadOK.Set(last)
}
