package metrics

import (
	_ "embed" // DefaultRatelimitMapper
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/statsd_exporter/pkg/mapper"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
)

// envoyproxy/ratelimit's stats. envoyproxy/ratelimit counts statsd-style
// stats (`ratelimit.service.rate_limit.DOMAIN.KEY.over_limit`) and, with
// USE_PROMETHEUS, serves them through a statsd_exporter mapper that turns
// each name into a Prometheus family and labels. Dashboards and alerts
// (Envoy Gateway's among them) are written against what that mapper makes,
// so envoy-rls counts the same stat names by the same rules and applies a
// mapper config with the same library: the built-in one, or the user's.
//
// Mapping happens once per stat name, not per decision: each stat key gets
// its six counters the first time it is counted, and a decision on a
// config node whose stat key does not depend on the request finds them by
// the node, without building the key.

// DefaultRatelimitMapper is the mapper config applied when
// RatelimitOptions.MapperYAML is empty: the families envoyproxy/ratelimit
// serves without PROMETHEUS_MAPPER_YAML.
//
//go:embed ratelimit_mapper.yaml
var DefaultRatelimitMapper string

// DefaultNearLimitRatio is envoyproxy/ratelimit's NEAR_LIMIT_RATIO default.
const DefaultNearLimitRatio = 0.8

// DefaultValuesBytes bounds the memory of the stat keys that hold request
// values (RatelimitOptions.ValuesBytes).
const DefaultValuesBytes = 32 << 20

// RatelimitOptions configure envoyproxy/ratelimit's stats
// (Metrics.EnableRatelimit).
type RatelimitOptions struct {
	// MapperYAML is a statsd_exporter mapper config; empty means
	// DefaultRatelimitMapper.
	MapperYAML string
	// NearLimitRatio is the share of a limit past which hits count as
	// near_limit; zero means DefaultNearLimitRatio (the smallest float32
	// above zero gives every limit a threshold of 0). It must be at most 1.
	NearLimitRatio float32
	// Statsd keeps the stats for a statsd sink as well, by their stat
	// names, which FlushStatsd hands over at each flush (statsd.go).
	Statsd bool
	// NoFamilies leaves the Prometheus families out (RatelimitGatherer is
	// nil): the stats go to the statsd sink alone.
	NoFamilies bool
	// ValuesBytes bounds the memory, as estimated, of the stat keys that
	// hold request values (detailed_metric, value_to_metric, values.go);
	// zero means DefaultValuesBytes. The keys the config alone names are
	// not bounded: the config bounds them.
	ValuesBytes int64
	// ValuesFull, when not nil, is called once, the first time a stat key
	// of request values is dropped for the bound, so that it is said once
	// rather than at every drop.
	ValuesFull func()
}

// RatelimitHit is one descriptor's part in envoyproxy/ratelimit's stats
// (Decision.Hit): a descriptor that a limit applied to, and what its store
// said.
type RatelimitHit struct {
	Domain  string
	Entries []descriptors.Entry
	// Path is the config node the walk matched at each level; Node is the
	// last of them when the walk ended on the last entry, else nil (Envoy's
	// limit override, which needs no node).
	Path []*descriptors.Node
	Node *descriptors.Node
	// Hits is the descriptor's cost, hits_addend.
	Hits uint64
	// Decided reports that the limit decided the hits (the store, or the
	// embedded store for failure mode local); false when a failure mode
	// answered, and only total_hits counts them.
	Decided bool
	// Limit is the limit's size, and Before and After the count on it
	// before and after the hits, as a fixed window holds them.
	Limit, Before, After uint64
	// Over reports that the limit refused the hits, whatever the answer
	// was (shadow and quota modes answer OK).
	Over bool
	// Local reports a refusal the local over-limit cache answered
	// (LOCAL_CACHE_SIZE_IN_BYTES there): all its hits are over_limit, and
	// over_limit_with_local_cache as well.
	Local bool
	// Shadow is the node's own shadow_mode; -shadow-mode does not count
	// under shadow_mode, as SHADOW_MODE does not.
	Shadow bool
}

// ratelimitStats holds envoyproxy/ratelimit's stats. It is safe for
// concurrent use.
type ratelimitStats struct {
	registry  *prometheus.Registry
	mapper    *mapper.MetricMapper
	nearRatio float32

	// byNode holds the statSet of every config node whose stat key does not
	// depend on the request (*descriptors.Node to *statSet); reload forgets
	// it, since a new config has new nodes.
	byNode sync.Map

	mu       sync.RWMutex
	byKey    map[string]*statEntry // by sanitized stat key
	series   map[string]*series    // by family and labels
	families map[string]familyInfo
	// descs holds each family's Desc by its label names: the series of a
	// family share it.
	descs map[string]*sharedDesc
	// values bounds the stat keys of request values (values.go).
	values valueKeys

	redisErrors, serviceErrors, loadSuccess, loadError, globalShadow counterRef
	// methods holds the call stats of each gRPC method, by its full name.
	methods map[string]*methodStats
	// withFamilies reports that the Prometheus families are kept; sd holds
	// the statsd sink's counters and samples, nil without one.
	withFamilies bool
	sd           *statsdStats

	keyBufs sync.Pool // *[]byte
}

// EnableRatelimit turns on envoyproxy/ratelimit's stats, counted from then
// on by Decided, Request, GlobalShadow, RatelimitCall and Reload beside the
// service's own families, and served by RatelimitGatherer: which families
// the decision's records reach is settled here, at start-up. Call it
// before the Metrics is shared; a mapper config that does not load is an
// error.
func (m *Metrics) EnableRatelimit(o RatelimitOptions) error {
	if m == nil {
		return errors.New("metrics: no Metrics to enable envoyproxy/ratelimit's stats on")
	}
	r, err := newRatelimitStats(o)
	if err != nil {
		return err
	}
	if err := m.Registry.Register(valueCollector{r}); err != nil {
		return err
	}
	m.ratelimit = r
	return nil
}

func newRatelimitStats(o RatelimitOptions) (*ratelimitStats, error) {
	if o.NearLimitRatio == 0 {
		o.NearLimitRatio = DefaultNearLimitRatio
	}
	if !(o.NearLimitRatio > 0 && o.NearLimitRatio <= 1) {
		return nil, fmt.Errorf("near limit ratio %v: want more than 0 and at most 1", o.NearLimitRatio)
	}
	text := o.MapperYAML
	if text == "" {
		text = DefaultRatelimitMapper
	}
	mp := &mapper.MetricMapper{Logger: slog.New(slog.DiscardHandler)}
	if err := mp.InitFromYAMLString(text); err != nil {
		return nil, fmt.Errorf("statsd mapper: %w", err)
	}
	r := &ratelimitStats{
		registry:  prometheus.NewRegistry(),
		mapper:    mp,
		nearRatio: o.NearLimitRatio,
		byKey:     make(map[string]*statEntry),
		series:    make(map[string]*series),
		families:  make(map[string]familyInfo),
		descs:     make(map[string]*sharedDesc),
		methods:   make(map[string]*methodStats),
		values:    valueKeys{max: o.ValuesBytes, full: o.ValuesFull},

		withFamilies: !o.NoFamilies,
	}
	if r.values.max <= 0 {
		r.values.max = DefaultValuesBytes
	}
	if r.withFamilies {
		r.values.base += valueKeyFamilies
	}
	if o.Statsd {
		r.sd = newStatsdStats()
		r.values.base += valueKeyStatsd
	}
	r.keyBufs.New = func() any { b := make([]byte, 0, 128); return &b }
	r.redisErrors = r.counter("ratelimit.service.call.should_rate_limit.redis_error")
	r.serviceErrors = r.counter("ratelimit.service.call.should_rate_limit.service_error")
	r.loadSuccess = r.counter("ratelimit.service.config_load_success")
	r.loadError = r.counter("ratelimit.service.config_load_error")
	r.globalShadow = r.counter("ratelimit.service.global_shadow_mode")
	if err := r.registry.Register(seriesCollector{r}); err != nil {
		return nil, err
	}
	return r, nil
}

// RatelimitGatherer returns envoyproxy/ratelimit's families beside the
// service's own, for the listener that serves them; nil when they are off.
func (m *Metrics) RatelimitGatherer() prometheus.Gatherer {
	if m == nil || m.ratelimit == nil || !m.ratelimit.withFamilies {
		return nil
	}
	return prometheus.Gatherers{m.Registry, m.ratelimit.registry}
}

// RatelimitOn reports whether envoyproxy/ratelimit's stats are counted, so
// that the gRPC edge (RatelimitCall) can skip timing calls for them.
func (m *Metrics) RatelimitOn() bool { return m != nil && m.ratelimit != nil }

// RatelimitCall counts one unary gRPC call of fullMethod
// (/package.Service/Method) that took d, as envoyproxy/ratelimit counts
// every unary call its gRPC server answers, health checks included, by the
// method's name.
func (m *Metrics) RatelimitCall(fullMethod string, d time.Duration) {
	if !m.RatelimitOn() {
		return
	}
	r := m.ratelimit
	r.mu.RLock()
	ms := r.methods[fullMethod]
	r.mu.RUnlock()
	if ms == nil {
		ms = r.newMethodStats(fullMethod)
	}
	ms.requests.add(1)
	if ms.responseTime != nil {
		// envoyproxy/ratelimit times calls in whole milliseconds.
		ms.responseTime.Observe(float64(d.Milliseconds()) * ms.scale)
	}
	if r.sd != nil {
		r.sd.time(ms, d)
	}
}

// callError counts a ShouldRateLimit call answered with an error, by
// envoyproxy/ratelimit's kind: ErrRedis or ErrService (any other is not
// counted).
func (r *ratelimitStats) callError(errType string) {
	switch errType {
	case ErrRedis:
		r.redisErrors.add(1)
	case ErrService:
		r.serviceErrors.add(1)
	}
}

// envoyproxy/ratelimit's kinds of failed call, the err_type label.
const (
	// ErrRedis is a call that failed because the store did.
	ErrRedis = "redis_error"
	// ErrService is a call the service refused (an empty domain, no
	// descriptors).
	ErrService = "service_error"
)

// ratelimitReload counts a config load, as Reload records one.
func (m *Metrics) ratelimitReload(ok bool) {
	if !m.RatelimitOn() {
		return
	}
	if ok {
		m.ratelimit.loadSuccess.add(1)
		// The nodes of the old config are not matched again.
		m.ratelimit.byNode.Clear()
		return
	}
	m.ratelimit.loadError.add(1)
}

// methodStats are the call stats of one gRPC method: its requests, and
// the observer of its response times (nil when dropped) with the mapping's
// scale; timerName is the response time's stat name, for a statsd sink.
type methodStats struct {
	requests     counterRef
	responseTime prometheus.Observer
	scale        float64
	timerName    string
}

// newMethodStats maps the stat names of fullMethod's calls and keeps them.
// The methods are the server's, a bounded set.
func (r *ratelimitStats) newMethodStats(fullMethod string) *methodStats {
	method := "unknown"
	if _, m, ok := strings.Cut(strings.TrimPrefix(fullMethod, "/"), "/"); ok {
		method = m
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if ms, ok := r.methods[fullMethod]; ok {
		return ms
	}
	ms := &methodStats{requests: r.counterLocked("ratelimit_server." + method + ".total_requests"),
		timerName: "ratelimit_server." + method + ".response_time"}
	if r.withFamilies {
		ms.responseTime, ms.scale = r.observerLocked(ms.timerName)
	}
	r.methods[fullMethod] = ms
	return ms
}
