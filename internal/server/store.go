package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/envoy-rls/envoy-rls/internal/metrics"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/breaker"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
	"github.com/envoy-rls/envoy-rls/pkg/limits/hotkey"
	"github.com/envoy-rls/envoy-rls/pkg/limits/memory"
	"github.com/envoy-rls/envoy-rls/pkg/limits/overlimit"
	"github.com/envoy-rls/envoy-rls/pkg/limits/redisstore"
	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

// serviceOptions are the rls.Options that decide what a descriptor
// matches, its key, its state and its failure mode: the server and explain
// both start from them, so that explain shows what the server does.
func (o *Options) serviceOptions(store *storeHandle, log *zap.Logger, m *metrics.Metrics) rls.Options {
	so := rls.Options{
		Logger:         log,
		Metrics:        m,
		Store:          store.Store,
		Local:          store.local,
		MaxDelay:       o.maxDelay,
		StoreTimeout:   o.storeTimeout,
		StoreInProcess: store.inProcess,
		FailureMode:    o.failureMode,
		KeyPrefix:      o.redisKeyPrefix,
		HashValues:     o.hashValues,
		ShadowMode:     o.shadowMode,
		// What callers may do.
		RefuseNegativeHits: !o.negativeHits,
		OnConfigChange:     store.onConfigChange,
	}
	// The profile, and what answers carry: envoyproxy/ratelimit's headers
	// first, then the service's own.
	o.answers.apply(&so)
	if o.responseHeaders {
		so.Headers = append(so.Headers, rls.IETFHeaders)
	}
	if o.json429Body {
		so.Headers = append(so.Headers, rls.JSON429Body)
	}
	return so
}

// storeHandle is a store with what the server needs around it.
type storeHandle struct {
	limits.Store
	// local is the embedded store that decides for failure_mode local while
	// Redis fails; nil when the embedded store is the store.
	local limits.Store
	ping  func(context.Context) error // nil for the embedded store
	// redis is the Redis client, for the RLQS demands; nil for the
	// embedded store.
	redis redis.UniversalClient
	// inProcess is set for the embedded store (rls.Options.StoreInProcess).
	inProcess bool
	close     func() error
	// onConfigChange is called on every config change (rls.Options); nil
	// when nothing needs to hear of it.
	onConfigChange func()
}

// openStore opens the store the options name: the embedded store, or a
// Redis (single, Sentinel or Cluster) behind the breaker and the
// over-limit cache, with the embedded store beside it for failure_mode
// local. A tracer, when set, traces the pipelines sent to Redis. inForce
// is the config in force, whose limits the inspections of Redis check the
// permissions of; nil for a store that only reads (explain), whose
// inspections then write nothing.
func openStore(o *Options, m *metrics.Metrics, log *zap.Logger, tracer trace.Tracer, inForce func() *config.Config) (*storeHandle, error) {
	mem := memory.New(memory.Options{MaxKeys: o.maxKeys})
	m.Registry.MustRegister(metrics.NewMemoryStoreCollector(func() (int, uint64, uint64) {
		st := mem.Stats()
		return st.Keys, st.Evictions, st.Expired
	}))
	if !o.usesRedis() {
		log.Info("using the embedded store: limits are per instance", zap.Int("max_keys", o.maxKeys))
		return &storeHandle{Store: mem, inProcess: true, close: mem.Close}, nil
	}
	seeds := splitAddrs(o.redisCluster)
	redis.SetLogger(redisLogger{log.Named("go-redis")})
	client, err := redisstore.NewClient(redisClientOptions(o, seeds))
	if err != nil {
		mem.Close()
		return nil, err
	}
	s := redisstore.New(client, redisStoreOptions(o, m, log, tracer, inForce))
	ping := func(ctx context.Context) error { return o.refusal(s.Ping(ctx)) }
	warmUp(ping, log)
	registerRedisCollectors(m, s, len(seeds) > 0)
	h := &storeHandle{local: mem, ping: ping, redis: client, close: func() error {
		s.Close() // the merged pipelines in flight, before their client
		mem.Close()
		return client.Close()
	}}
	h.Store, h.onConfigChange = guardRedis(o, s, len(seeds) > 0, m, log)
	log.Info("using Redis", zap.Bool("cluster", len(seeds) > 0), zap.Bool("sentinel", o.redisSentinel != ""),
		zap.Bool("over_limit_cache", o.overLimitCache))
	return h, nil
}

// redisStoreOptions are the options of the Redis store o names; inForce
// as openStore's.
func redisStoreOptions(o *Options, m *metrics.Metrics, log *zap.Logger, tracer trace.Tracer, inForce func() *config.Config) redisstore.Options {
	var prefix string // none: the inspections write nothing
	var needs func() redisstore.Needs
	if inForce != nil {
		prefix, needs = o.redisKeyPrefix, func() redisstore.Needs { return storeNeeds(inForce()) }
	}
	return redisstore.Options{OnPipeline: m.RedisPipeline, Tracer: tracer, ResetChannel: o.redisKeyPrefix + "resets",
		KeyPrefix: prefix, Needs: needs, RLQS: o.rlqs, Logger: log.Named("redis"), OnGate: func(addr string, shut bool) {
			if shut {
				log.Warn("cluster master not answering: its keys take the failure mode at once until a probe is answered", zap.String("master", addr))
			} else {
				log.Info("cluster master answers again, or its slots moved: its keys are decided again", zap.String("master", addr))
			}
		}}
}

// guardRedis returns s, the Redis store, behind the breaker (but on a
// cluster), the hot-key layer and the over-limit cache (with
// -over-limit-cache), and what a config change must call: the cache's
// clearing, nil without it.
func guardRedis(o *Options, s *redisstore.Store, cluster bool, m *metrics.Metrics, log *zap.Logger) (limits.Store, func()) {
	// Once Redis is found down for a store timeout, stop waiting on it:
	// answer by the failure mode at once, and probe it, first after one
	// store timeout, then backing off to twice a second. Each call's finding
	// sets rls_store_up when it changes. Not for a cluster: the breaker
	// sees one store, and calls that find one dead master would open it for
	// the keys of the live masters too; there, the store has a breaker per
	// master of its own.
	var store limits.Store = s
	if !cluster {
		store = breaker.New(s, breaker.Options{Timeout: o.storeTimeout, OnStoreUp: m.StoreUp, OnChange: func(open bool) {
			m.BreakerOpen(open)
			if open {
				log.Warn("store circuit open: answering by the failure mode without waiting for Redis")
			} else {
				log.Info("store circuit closed: Redis answers again")
			}
		}})
	}
	// The limits with a sync_interval are decided from shares this
	// instance takes of them ahead, synced once per interval (package
	// hotkey); every other hit passes through it untouched.
	hot := hotkey.New(store, hotkey.Options{})
	store = hot
	m.Registry.MustRegister(metrics.NewHotKeyCollector(func() metrics.HotKeyStats {
		st := hot.Stats()
		return metrics.HotKeyStats{Keys: st.Keys, Local: st.Local, Direct: st.Direct, Syncs: st.Syncs, Charged: st.Charged}
	}))
	// Keys Redis refused are refused here until the reset Redis gave,
	// without a round trip (-over-limit-cache); every config change
	// forgets them.
	var onConfigChange func()
	onReset := hot.Forget
	if o.overLimitCache {
		c := overlimit.New(store, overlimit.Options{})
		store, onConfigChange = c, c.Clear
		onReset = func(keys []string) { c.Forget(keys); hot.Forget(keys) }
		m.Registry.MustRegister(metrics.NewOverLimitCacheCollector(func() (int, uint64) {
			return c.Len(), c.LocalAnswers()
		}))
	}
	// The keys another instance resets (POST /reset) leave this one's
	// caches too.
	s.HearResets(onReset)
	return store, onConfigChange
}

// registerRedisCollectors exports what the inspections of Redis find
// (redisstore/inspect.go: its evictions, a full memory, missing
// permissions, lost data), the undos Redis did not apply and, on a
// cluster, its masters and those answered by the failure mode at once.
func registerRedisCollectors(m *metrics.Metrics, s *redisstore.Store, cluster bool) {
	m.Registry.MustRegister(metrics.NewRedisInspectionCollector(func() metrics.RedisInspection {
		in := s.Inspection()
		return metrics.RedisInspection{Evicted: in.Evicted, Evicts: in.Evicts(), Full: in.Full(), Missing: len(in.Missing), Lost: in.Lost}
	}))
	m.RedisUndosFailed(s.BackFailed)
	if !cluster {
		return
	}
	m.Registry.MustRegister(metrics.NewClusterMastersCollector(func() (int, int, int) {
		masters := s.Masters()
		down := 0
		for _, ms := range masters {
			if ms.Err != nil {
				down++
			}
		}
		return len(masters), down, s.MastersFailingFast()
	}))
}

// storeNeeds is what the limits of cfg keep in Redis, for the
// permissions probe of the store's inspections: counters always (an
// Envoy's limit override applies, with the default algorithm, to any
// descriptor of a known domain), and what each limit's algorithm and
// modifiers keep.
func storeNeeds(cfg *config.Config) redisstore.Needs {
	var ls []limits.Limit
	var walk func(ds []*config.Descriptor)
	walk = func(ds []*config.Descriptor) {
		for _, d := range ds {
			for _, r := range d.Rules {
				if !r.Unlimited {
					ls = append(ls, r.Limit)
				}
			}
			walk(d.Descriptors)
		}
	}
	for _, d := range cfg.Domains {
		walk(d.Descriptors)
	}
	n := redisstore.NeedsOf(ls...)
	n.Counters = true
	return n
}

// redisClientOptions are the options of the Redis client that o names;
// seeds are a cluster's addresses (none: a single Redis or a Sentinel's
// master).
func redisClientOptions(o *Options, seeds []string) redisstore.ClientOptions {
	return redisstore.ClientOptions{
		URL:              o.redisURL,
		Cluster:          seeds,
		Sentinel:         splitAddrs(o.redisSentinel),
		SentinelMaster:   o.redisSentinelMaster,
		SentinelPassword: o.redisSentinelPassword,
		Username:         o.redisUsername,
		Password:         o.redisPassword,
		TLS:              o.redisTLS,
		TLSCA:            o.redisTLSCA,
		TLSCert:          o.redisTLSCert,
		TLSKey:           o.redisTLSKey,
		TLSSkipHostname:  o.redisTLSSkipHostname,
		SentinelUsername: o.redisSentinelUsername,
		Timeout:          o.storeTimeout,
		PoolSize:         o.redisPoolSize,
	}
}

// warmUpBound is how long the start waits for Redis to answer a first PING.
const warmUpBound = time.Second

// warmUp opens the first Redis connection before the service answers, so
// that the first decisions do not wait on a dial, a TLS handshake and AUTH
// that -store-timeout may not cover (they would take the failure mode).
// A Redis that does not answer is logged and left to the failure mode; one
// that refuses the settings is a configuration error, which the store's
// watch says (watchStore) and health reports until they are fixed.
func warmUp(ping func(context.Context) error, log *zap.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), warmUpBound)
	defer cancel()
	var refused *refusedStore
	if err := ping(ctx); err != nil && !errors.As(err, &refused) {
		log.Warn("Redis does not answer yet: deciding by the failure mode until it does", zap.Error(err))
	}
}

// watchStore keeps the store-up gauge current while no calls come (the
// breaker sets it from the calls), and on a cluster; and tells refused
// whenever a Redis starts or stops refusing the settings. Its first check
// is at once: a Redis that refuses the settings is said there, in one
// line that names them, however slow the start's warm-up found it.
func watchStore(ctx context.Context, ping func(context.Context) error, m *metrics.Metrics, log *zap.Logger, refused func(bool)) {
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	wasUp, wasRefused := true, false
	for {
		start := time.Now()
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := ping(pctx)
		cancel()
		var rs *refusedStore
		var full *redisstore.MemoryFullError // answers, refusing charges: the inspection says it
		up, isRefused := err == nil || errors.As(err, &full), errors.As(err, &rs)
		m.StoreChecked(start, up)
		if isRefused != wasRefused {
			m.StoreRefused(isRefused)
			refused(isRefused)
		}
		switch {
		case isRefused && !wasRefused:
			log.Error("Redis refuses the settings: deciding by the failure mode, and reporting unhealthy, until they are fixed",
				zap.String("check", rs.settings), zap.Error(err))
		case isRefused:
		case wasRefused && up:
			log.Info("Redis accepts the settings again")
		case !up && (wasUp || wasRefused):
			log.Warn("store unreachable", zap.Error(err))
		case up && !wasUp:
			log.Info("store reachable again")
		}
		wasUp, wasRefused = up, isRefused
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// redisLogger routes go-redis's own messages (failed dials during an
// outage) to the service's logger instead of the standard library's.
type redisLogger struct{ log *zap.Logger }

func (l redisLogger) Printf(_ context.Context, format string, v ...any) {
	l.log.Debug(fmt.Sprintf(format, v...))
}

// streamWorkers is how many goroutines serve gRPC calls. Calls wait on
// Redis, so more than the cores are busy at once; idle workers cost only
// their stacks.
