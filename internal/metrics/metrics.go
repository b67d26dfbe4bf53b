// Package metrics holds the service's Prometheus collectors. Every label set
// is bounded by the loaded config, never by request values: a domain that is
// not configured is counted as "unknown" and a rule by its name or config
// path, so that no client can create series at will.
//
// The service records each descriptor's decision and each call once
// (Decided, Request): the families that count them, its own and
// envoyproxy/ratelimit's when EnableRatelimit turned them on at start-up
// (ratelimit.go), are this package's matter, not the decision's.
package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/envoy-rls/envoy-rls/internal/topk"
	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
)

// Outcomes of one descriptor's decision, the values of the outcome label.
const (
	OutcomeOK          = "ok"
	OutcomeOverLimit   = "over_limit"
	OutcomeShadowOver  = "shadow_over_limit"
	OutcomeQuotaOver   = "quota_over_limit"
	OutcomeNeverFits   = "over_limit_never_fits"
	OutcomeFailedAllow = "store_failed_allow"
	OutcomeFailedDeny  = "store_failed_deny"
	OutcomeUnlimited   = "unlimited"
	OutcomeNoLimit     = "no_limit"
)

// UnknownDomain is the domain label of every request for a domain that no
// limits file configures.
const UnknownDomain = "unknown"

// durationBuckets, in seconds, span a decision on the embedded store (100 µs)
// to Envoy's longest useful deadline.
var durationBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .02, .05, .1, .25, 1}

// Metrics is the set of collectors. A nil *Metrics records nothing, which is
// what tests that do not look at metrics pass.
type Metrics struct {
	Registry *prometheus.Registry

	decisions     *prometheus.CounterVec
	storeErrors   *prometheus.CounterVec
	requests      *prometheus.CounterVec
	latency       prometheus.Histogram
	storeLatency  prometheus.Histogram
	reloads       *prometheus.CounterVec
	configSuccess prometheus.Gauge
	configTime    prometheus.Gauge
	configDomains prometheus.Gauge
	configLimits  prometheus.Gauge
	storeUp       prometheus.Gauge
	localDecided  prometheus.Counter
	breakerOpen   prometheus.Gauge
	redisRuns     prometheus.Histogram
	refused       *prometheus.CounterVec
	holds         *prometheus.CounterVec // holds.go
	statsdSent    prometheus.Counter
	statsdDropped prometheus.Counter
	ratelimit     *ratelimitStats // envoyproxy/ratelimit's stats (ratelimit.go); nil when off
	admin         *prometheus.CounterVec
	browser       *prometheus.CounterVec
	top           *topk.Board // the refusals GET /top reports; nil when off

	// warnCrossed counts the hits that crossed a warn_at threshold (warn.go).
	warnCrossed *prometheus.CounterVec
	// candidates and candidateRefusals count the decisions of the
	// limits' candidates (candidate.go).
	candidates, candidateRefusals *prometheus.CounterVec

	// configNotLoaded and storeRefused: operators' mistakes the service
	// serves through (ConfigNotLoaded, StoreRefused).
	configNotLoaded prometheus.Gauge
	storeRefused    prometheus.Gauge

	storeUpMu sync.Mutex
	// storeSeen is when a store call last set storeUp: a health check
	// started before it is older news.
	storeSeen time.Time
}

// New registers the collectors on a fresh registry, with the Go and process
// collectors beside them.
func New() *Metrics {
	r := prometheus.NewRegistry()
	m := &Metrics{Registry: r}
	m.initRequestFamilies()
	m.initConfigFamilies()
	m.initStoreFamilies()
	m.statsdSent, m.statsdDropped, m.admin = sinkCounters()
	m.configNotLoaded, m.storeRefused = mistakeGauges()
	m.warnCrossed = newWarnCrossed()
	r.MustRegister(m.warnCrossed)
	m.candidates, m.candidateRefusals = newCandidates()
	r.MustRegister(m.candidates, m.candidateRefusals)
	m.holds = holdsCounter()
	r.MustRegister(m.decisions, m.storeErrors, m.requests, m.latency, m.storeLatency,
		m.reloads, m.configSuccess, m.configTime, m.configDomains, m.configLimits, m.configNotLoaded, m.storeRefused, m.storeUp, m.localDecided, m.breakerOpen, m.redisRuns, m.refused, m.holds,
		m.statsdSent, m.statsdDropped, m.admin, m.browser,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// initRequestFamilies makes the families of the calls and their
// descriptors: decisions, requests, their latency, and the calls refused
// before any work.
func (m *Metrics) initRequestFamilies() {
	m.decisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rls_decisions_total",
		Help: "Descriptor decisions by domain, rule and outcome.",
	}, []string{"domain", "rule", "outcome"})
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rls_requests_total",
		Help: "ShouldRateLimit calls by overall code (ok, over_limit, invalid, unavailable).",
	}, []string{"code"})
	m.latency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "rls_request_duration_seconds",
		Help:    "Time to answer one ShouldRateLimit call.",
		Buckets: durationBuckets,
	})
	m.refused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rls_refused_total",
		Help: "Connections and calls refused at a bound before any work: grpc_connection and http_connection (the listener's -*-max-connections), grpc_call (-max-in-flight, -max-in-flight-per-connection), grpc_resets (a gRPC connection closed past -grpc-max-resets), json_body (a /json body past the bound of the bodies being read).",
	}, []string{"what"})
	m.browser = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rls_browser_refused_total",
		Help: "HTTP calls refused as a page's in a browser, before any work, by endpoint (json, top, reset, rlqs, usage) and reason: cross_site (Sec-Fetch-Site cross-site or same-site), foreign_origin (an Origin other than the address called, or a Host that is a name), content_type (a reset whose body is not application/json).",
	}, []string{"endpoint", "reason"})
}

// initConfigFamilies makes the families of the config's loads and of the
// config in force.
func (m *Metrics) initConfigFamilies() {
	m.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rls_config_reloads_total",
		Help: "Limits config reloads by result (success, failure).",
	}, []string{"result"})
	m.configSuccess = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "rls_config_last_reload_successful",
		Help: "Whether the last attempt to load the limits config succeeded (1) or kept the old config (0).",
	})
	m.configDomains = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "rls_config_domains",
		Help: "Domains in the config in force; 0 is an empty config, under which every request is allowed.",
	})
	m.configLimits = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "rls_config_limits",
		Help: "Limits (rate_limit bodies, unlimited ones included) in the config in force.",
	})
	m.configTime = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "rls_config_last_reload_success_timestamp_seconds",
		Help: "When the config in effect was loaded.",
	})
}

// initStoreFamilies makes the families of the store: its calls, their
// errors and latency, whether it answers, and what stands in when it
// does not.
func (m *Metrics) initStoreFamilies() {
	m.storeErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rls_store_errors_total",
		Help: "Store calls that failed or timed out, by kind.",
	}, []string{"kind"})
	m.storeLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "rls_store_duration_seconds",
		Help:    "Time of one store call (all descriptors of a request).",
		Buckets: durationBuckets,
	})
	m.storeUp = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "rls_store_up",
		Help: "Whether the store answers (1) or is unavailable (0): as the latest store call found it, or, while no calls come, a periodic health check.",
	})
	m.localDecided = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "rls_local_fallback_decisions_total",
		Help: "Descriptors decided on this instance's embedded store because the shared store failed (failure_mode local).",
	})
	m.breakerOpen = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "rls_store_circuit_open",
		Help: "Whether the store's circuit breaker is open (failing fast without calling the store).",
	})
	m.redisRuns = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "rls_redis_pipeline_runs",
		Help:    "Script runs (a hit, or the limits of one descriptor) that one pipeline to Redis carried: how well concurrent calls share round trips (a cluster splits a pipeline by node).",
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512},
	})
}

// mistakeGauges are the gauges of operators' mistakes the service serves
// through: files of the config directory not loaded, a Redis refusing
// the settings.
func mistakeGauges() (notLoaded, refused prometheus.Gauge) {
	notLoaded = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "rls_config_not_loaded_files",
		Help: "Entries of the -config directory in force that were not loaded: files not named *.yaml or *.yml, and subdirectories (each logged at the load).",
	})
	refused = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "rls_store_refused",
		Help: "1 while Redis answers but refuses the service's settings (password, database, TLS), a configuration error that /healthz reports; 0 otherwise.",
	})
	return notLoaded, refused
}

// sinkCounters are the counters of the statsd sink and of the admin
// endpoints, which every server registers (at 0 when those are off).
func sinkCounters() (sent, dropped prometheus.Counter, admin *prometheus.CounterVec) {
	sent = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "rls_statsd_sent_total",
		Help: "Stat lines written to the statsd (-statsd-addr).",
	})
	dropped = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "rls_statsd_dropped_total",
		Help: "Stats dropped on the way to the statsd (-statsd-addr): lines it did not take within the write timeout or refused, and response times past the bound kept between two flushes.",
	})
	admin = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rls_admin_requests_total",
		Help: "Calls of the admin endpoints (GET /top, POST /reset) by endpoint and result: ok, unauthorized (no token or a wrong one: nothing done), not_found (a reset no limit matches), bad_request, error.",
	}, []string{"endpoint", "result"})
	return sent, dropped, admin
}

// Decision is one descriptor's decision, as each family records it: the
// service's own families always, envoyproxy/ratelimit's when they are on
// (EnableRatelimit, at start-up). The decision records it once, whichever
// families there are.
type Decision struct {
	// Domain, Rule and Outcome label rls_decisions_total: the configured
	// domain or UnknownDomain, the limit's name or config path, and one of
	// Outcome*.
	Domain, Rule, Outcome string
	// Stats reports that the descriptor has a part in
	// envoyproxy/ratelimit's stats, Hit; it has none without a limit, for
	// an unlimited one, a refund, or a listing that an earlier one of the
	// request carries. (A value, not a pointer: the record stays on the
	// decision's stack.)
	Stats bool
	Hit   RatelimitHit
	// Entries are the descriptor's, which the refusals' board counts
	// (EnableTop).
	Entries []descriptors.Entry
}

// Decided records one descriptor's decision.
func (m *Metrics) Decided(d *Decision) {
	if m == nil {
		return
	}
	m.decisions.WithLabelValues(d.Domain, d.Rule, d.Outcome).Inc()
	if m.ratelimit != nil && d.Stats {
		m.ratelimit.hit(&d.Hit)
	}
	if m.top != nil && (d.Outcome == OutcomeOverLimit || d.Outcome == OutcomeNeverFits) {
		m.top.Add(time.Now(), d.Domain, d.Rule, d.Entries)
	}
}

// EnableTop has every descriptor a limit refuses counted on b, by its
// rule, for GET /top. It is called at start-up, before any decision.
func (m *Metrics) EnableTop(b *topk.Board) { m.top = b }

// BrowserRefused counts one HTTP call refused as a browser's, by endpoint
// and reason (httpapi.Refused*).
func (m *Metrics) BrowserRefused(endpoint, reason string) {
	if m == nil {
		return
	}
	m.browser.WithLabelValues(endpoint, reason).Inc()
}

// Admin counts one call of an admin endpoint (top, reset) by its result
// (ok, unauthorized, not_found, bad_request, error).
func (m *Metrics) Admin(endpoint, result string) {
	if m == nil {
		return
	}
	m.admin.WithLabelValues(endpoint, result).Inc()
}

// Request records one ShouldRateLimit call: its overall code (ok,
// over_limit, invalid, unavailable) and duration in the service's own
// families, and, in envoyproxy/ratelimit's, errType when it failed as it
// counts failures (ErrRedis, ErrService; "" for a call it does not count
// as one).
func (m *Metrics) Request(code string, d time.Duration, errType string) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(code).Inc()
	m.latency.Observe(d.Seconds())
	if m.ratelimit != nil && errType != "" {
		m.ratelimit.callError(errType)
	}
}

// GlobalShadow counts a request that the service-wide shadow mode
// answered OK while its statuses say OVER_LIMIT
// (rls.ShadowOverallCode), as envoyproxy/ratelimit's global_shadow_mode
// counts them; the service's own families count its descriptors'
// outcomes instead.
func (m *Metrics) GlobalShadow() {
	if m != nil && m.ratelimit != nil {
		m.ratelimit.globalShadow.add(1)
	}
}

// StoreError counts a failed store call of the given kind (timeout, error).
func (m *Metrics) StoreError(kind string) {
	if m == nil {
		return
	}
	m.storeErrors.WithLabelValues(kind).Inc()
}

// RedisPipeline observes the script runs one pipeline to Redis carried.
func (m *Metrics) RedisPipeline(runs int) {
	if m == nil {
		return
	}
	m.redisRuns.Observe(float64(runs))
}

// StoreCall observes the duration of one store call.
func (m *Metrics) StoreCall(d time.Duration) {
	if m == nil {
		return
	}
	m.storeLatency.Observe(d.Seconds())
}

// Reload records a config load attempt.
func (m *Metrics) Reload(ok bool, at time.Time) {
	if m == nil {
		return
	}
	m.ratelimitReload(ok)
	if ok {
		m.reloads.WithLabelValues("success").Inc()
		m.configSuccess.Set(1)
		m.configTime.Set(float64(at.Unix()))
		return
	}
	m.reloads.WithLabelValues("failure").Inc()
	m.configSuccess.Set(0)
}

// JSONBodies exports the bytes that /json bodies being read hold, read
// from held at each scrape, as rls_json_body_bytes.
func (m *Metrics) JSONBodies(held func() int64) {
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "rls_json_body_bytes",
		Help: "Bytes held by the POST /json bodies being read, within their bound (json_body in rls_refused_total counts those refused at it).",
	}, func() float64 { return float64(held()) }))
}

// ConfigInForce records the size of the config just put in force.
func (m *Metrics) ConfigInForce(domains, limits int) {
	if m == nil {
		return
	}
	m.configDomains.Set(float64(domains))
	m.configLimits.Set(float64(limits))
}

// ConfigNotLoaded records how many entries of the config directory in
// force were not loaded (config.Config.NotLoaded).
func (m *Metrics) ConfigNotLoaded(n int) {
	if m == nil {
		return
	}
	m.configNotLoaded.Set(float64(n))
}

// StoreRefused records whether Redis refuses the service's settings.
func (m *Metrics) StoreRefused(refused bool) {
	if m == nil {
		return
	}
	m.storeRefused.Set(flag(refused))
}

// StoreUp records what a store call found: the store answered, or was
// unavailable. The breaker calls it when that changes
// (breaker.Options.OnStoreUp), so that under traffic the gauge follows the
// store within one store timeout rather than a health check's period.
func (m *Metrics) StoreUp(up bool) {
	if m == nil {
		return
	}
	m.storeUpMu.Lock()
	defer m.storeUpMu.Unlock()
	m.storeSeen = time.Now()
	m.setStoreUp(up)
}

// StoreChecked records a health check of the store that started at start.
// The check keeps the gauge current while no calls come (and on a store
// whose calls do not report), but a check may wait a second for its
// answer: it is dropped when a store call has set the gauge since start.
func (m *Metrics) StoreChecked(start time.Time, up bool) {
	if m == nil {
		return
	}
	m.storeUpMu.Lock()
	defer m.storeUpMu.Unlock()
	if m.storeSeen.After(start) {
		return
	}
	m.setStoreUp(up)
}

func (m *Metrics) setStoreUp(up bool) { m.storeUp.Set(flag(up)) }

// flag is a gauge's value of b: 1 while true, 0 otherwise.
func flag(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// LocalFallback counts a descriptor decided on the embedded store because
// the shared store failed.
func (m *Metrics) LocalFallback() {
	if m == nil {
		return
	}
	m.localDecided.Inc()
}

// BreakerOpen records whether the store's circuit breaker is open.
func (m *Metrics) BreakerOpen(open bool) {
	if m == nil {
		return
	}
	m.breakerOpen.Set(flag(open))
}

// What Refused counts.
const (
	RefusedGRPCConnection = "grpc_connection"
	RefusedHTTPConnection = "http_connection"
	RefusedGRPCCall       = "grpc_call"
	RefusedJSONBody       = "json_body"
	RefusedGRPCResets     = "grpc_resets"
)

// Refused counts one connection or call refused at a bound (Refused*).
func (m *Metrics) Refused(what string) {
	if m == nil {
		return
	}
	m.refused.WithLabelValues(what).Inc()
}
