package server

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/envoy-rls/envoy-rls/internal/metrics"
	"github.com/envoy-rls/envoy-rls/internal/watch"
	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

// filesSource is the config's source without -xds-server: the -config
// path, one limits file or a directory of them, which config.Load and the
// watcher both take as it is, so that one source serves either.
type filesSource struct {
	path        string
	lo          config.Options
	needsConfig bool // -healthy-needs-config
	log         *zap.Logger
	// watch was started before the first load, so that a change made
	// while the server starts, after the load and before the watcher
	// runs, is reloaded rather than missed. Nil when the path cannot be
	// watched: reload is off.
	watch *watch.Watcher
	cur   atomic.Pointer[config.Config] // the config in force
	m     *metrics.Metrics              // set by count, before serve
}

// openFiles starts watching the config, then loads it: in that order, as
// watchAndLoad does for the TLS files, so that no change goes unseen. A
// config that cannot be watched is still served, without reload; that is
// logged only once the config has loaded, so that an invalid one is the
// plain error alone. loaded, when not nil, runs right after the load: a
// test's way into the window, until the watcher runs, that the watcher must
// cover.
func openFiles(o *Options, log *zap.Logger, loaded func()) (*filesSource, error) {
	w, werr := watch.New(log, watch.Options{}, o.configPath)
	cfg, err := o.loadOptions().Load(o.configPath)
	if loaded != nil {
		loaded()
	}
	if err != nil {
		if werr == nil {
			w.Close() //nolint:errcheck // nothing to do about a watch that fails to close
		}
		return nil, o.missingConfig(err)
	}
	if werr != nil {
		log.Warn("config reload is off", zap.Error(werr))
		w = nil
	}
	// An empty config (only -allow-empty-config lets a directory load
	// empty) is said once the metrics are there (configInForce).
	s := &filesSource{path: o.configPath, lo: o.loadOptions(), needsConfig: o.healthyNeedsConfig, log: log, watch: w}
	s.cur.Store(cfg)
	return s, nil
}

func (s *filesSource) ready(context.Context) bool { return true }
func (s *filesSource) config() *config.Config     { return s.cur.Load() }
func (s *filesSource) healthy() bool              { return hasDomainIfNeeded(s.needsConfig, s.cur.Load()) }
func (s *filesSource) name() string               { return s.path }

// count counts the first load, and reports it.
func (s *filesSource) count(m *metrics.Metrics) {
	s.m = m
	m.Reload(true, time.Now())
	configInForce(s.cur.Load(), s.path, m, s.log, false)
}

// serve reloads the config whenever the watcher calls back (then calls
// loaded): when the contents of its file or directory change, and once a
// change written in place has settled, so that a file caught half written
// is not served. A config that does not load is refused with the same
// message as at startup, and the last good one stays in effect. A change
// that leaves the files' bytes as they were (a touch, a ConfigMap update to
// the same data) is no reload: the watcher does not call back, so the
// snapshot and the over-limit cache stay, and nothing is logged or counted.
func (s *filesSource) serve(ctx context.Context, wg *sync.WaitGroup, svc *rls.Service, loaded func()) {
	if s.watch == nil {
		return
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.watch.Run(ctx, func() {
			cfg, err := s.lo.Load(s.path)
			if err != nil {
				s.m.Reload(false, time.Now())
				s.log.Error("config reload refused, keeping the last good config", zap.String("error", err.Error()))
				return
			}
			svc.SetIndex(descriptors.NewIndex(cfg))
			s.cur.Store(cfg)
			s.m.Reload(true, time.Now())
			configInForce(cfg, s.path, s.m, s.log, true)
			loaded()
		})
	}()
}

// close stops the watcher when the server stops, or does not start; after
// the watcher's Run, which closes it too, it is harmless.
func (s *filesSource) close() {
	if s.watch != nil {
		s.watch.Close() //nolint:errcheck // nothing to do about a watch that fails to close
	}
}
