package server

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/envoy-rls/envoy-rls/internal/metrics"
	"github.com/envoy-rls/envoy-rls/internal/xds"
	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

// xdsSource is the config's source when -xds-server is set: the xDS
// client, run from before the listeners open (the first snapshot may be
// what the service waits for), and, once the server runs, the service
// its snapshots are swapped into and the metrics that count them.
type xdsSource struct {
	o      *xdsOptions
	log    *zap.Logger
	client *xds.Client
	stop   context.CancelFunc
	done   chan struct{}
	// first is closed when the first snapshot is applied.
	first     chan struct{}
	firstOnce sync.Once

	mu  sync.Mutex
	cfg *config.Config // the last snapshot applied; nil before the first
	// What count and serve attached; nil before.
	m      *metrics.Metrics
	svc    *rls.Service
	loaded func()
	// loads are the snapshots applied (true) and refused (false) before
	// the metrics were there, for them to count.
	loads []load
}

type load struct {
	ok bool
	at time.Time
}

// openXDS starts the xDS client. The service starts with no config (every
// call UNAVAILABLE), and takes the first snapshot's once it is applied:
// before the listeners open without -xds-force-start (ready), whenever it
// comes with it.
func openXDS(o *Options, log *zap.Logger) (*xdsSource, error) {
	s := &xdsSource{o: &o.xds, done: make(chan struct{}), first: make(chan struct{}), log: log}
	co := o.xds.clientOptions(o.loadOptions())
	co.Apply, co.Refused, co.Logger = s.apply, s.refused, log
	c, err := xds.New(co)
	if err != nil {
		return nil, err
	}
	s.client = c
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	go func() { defer close(s.done); c.Run(ctx) }()
	log.Info("taking the limits from xDS", zap.String("server", o.xds.server), zap.String("node_id", o.xds.nodeID),
		zap.Bool("tls", o.xds.tls), zap.Bool("client_certificate", o.xds.tlsCert != ""), zap.Bool("force_start", o.xds.forceStart))
	// No config until the first snapshot: the service answers UNAVAILABLE
	// until then (with -xds-force-start), and Envoy's failure mode decides.
	return s, nil
}

// apply is the client's Apply: the snapshot's config swapped in and
// counted, then loaded told (outside the lock: it asks healthy).
func (s *xdsSource) apply(_ string, c *config.Config) {
	s.mu.Lock()
	s.cfg = c
	if s.svc != nil {
		s.svc.SetIndex(descriptors.NewIndex(c))
	}
	s.record(true)
	if s.m != nil { // before, count reports it
		configInForce(c, s.o.server, s.m, s.log, false)
	}
	s.firstOnce.Do(func() { close(s.first) })
	loaded := s.loaded
	s.mu.Unlock()
	if loaded != nil {
		loaded()
	}
}

// refused is the client's Refused: counted as a refused reload.
func (s *xdsSource) refused(string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.record(false)
}

// record records a load in the metrics, or for them (s.mu held).
func (s *xdsSource) record(ok bool) {
	if s.m == nil {
		s.loads = append(s.loads, load{ok, time.Now()})
		return
	}
	s.m.Reload(ok, time.Now())
}

// ready holds the start, without -xds-force-start, until the first
// snapshot is applied, which the service then starts with: it answers
// only with limits, as from a file. It reports false if ctx ends first.
func (s *xdsSource) ready(ctx context.Context) bool {
	if s.o.forceStart {
		return true
	}
	s.log.Info("waiting for the first xDS snapshot before serving (-xds-force-start serves without one)")
	select {
	case <-s.first:
		return true
	case <-ctx.Done():
		return false
	}
}

func (s *xdsSource) config() *config.Config {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg
}

func (s *xdsSource) healthy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return hasDomainIfNeeded(s.o.healthyNeedsConfig, s.cfg)
}

func (s *xdsSource) name() string { return "xds " + s.o.server }

// count exports the client's counts, and counts the snapshots so far.
func (s *xdsSource) count(m *metrics.Metrics) {
	m.Registry.MustRegister(metrics.NewXDSCollector(s.stats))
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m = m
	for _, l := range s.loads {
		m.Reload(l.ok, l.at)
	}
	s.loads = nil
	if s.cfg != nil {
		configInForce(s.cfg, s.o.server, m, s.log, false)
	}
}

// serve hands the running service to the snapshots: one applied since
// the service was built is swapped in at once, the later ones as they
// come, each followed by loaded, and by one now for what came
// before. The client runs from openXDS until close, not under ctx.
func (s *xdsSource) serve(_ context.Context, _ *sync.WaitGroup, svc *rls.Service, loaded func()) {
	s.mu.Lock()
	s.svc, s.loaded = svc, loaded
	if s.cfg != nil && s.cfg != svc.Index().Config() {
		svc.SetIndex(descriptors.NewIndex(s.cfg))
	}
	s.mu.Unlock()
	loaded()
}

// stats are the client's counts, for the metrics.
func (s *xdsSource) stats() metrics.XDSStats {
	st := s.client.Stats()
	return metrics.XDSStats{Version: st.Version, Applied: st.Applied, Refused: st.Refused, Failures: st.Failures, Connected: st.Connected}
}

// close stops the client and waits for it.
func (s *xdsSource) close() {
	s.stop()
	<-s.done
}
