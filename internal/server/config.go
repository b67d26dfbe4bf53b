package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"runtime/debug"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/envoy-rls/envoy-rls/internal/metrics"
	"github.com/envoy-rls/envoy-rls/internal/watch"
	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

// startConfig is the config the server starts with, and the watcher that
// reloads it.
type startConfig struct {
	cfg *config.Config
	// watch was started before cfg was read, so that a change made while
	// the server starts, after the read and before the watcher runs, is
	// reloaded rather than missed. Nil when the config cannot be watched:
	// reload is off.
	watch *watch.Watcher
	// xds is the xDS client that the config comes from instead (xds.go).
	xds *xdsSource
}

// loadConfig starts watching the config, then loads it: in that order, as
// watchAndLoad does for the TLS files, so that no change goes unseen. A
// config that cannot be watched is still served, without reload; that is
// logged only once the config has loaded, so that an invalid one is the
// plain error alone. loaded, when not nil, runs right after the load: a
// test's way into the window, until the watcher runs, that the watcher must
// cover.
func loadConfig(o *Options, log *zap.Logger, loaded func()) (*startConfig, error) {
	if o.xds.server != "" {
		return startXDS(o, log)
	}
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
	return &startConfig{cfg: cfg, watch: w}, nil
}

// missingConfig is err, the load's error, naming the setting to check
// when the path itself is missing: RUNTIME_ROOT in the drop-in, -config
// (or RLS_CONFIG) otherwise. The line still starts with the path, as
// every error of a limits file does.
func (o *Options) missingConfig(err error) error {
	var ce *config.Error
	if errors.As(err, &ce) && ce.File == o.configPath && errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: check %s", err, o.setting("config"))
	}
	return err
}

// close stops the watcher when the server stops, or does not start; after
// the watcher's Run, which closes it too, it is harmless.
func (s *startConfig) close() {
	if s.xds != nil {
		s.xds.close()
	}
	if s.watch != nil {
		s.watch.Close() //nolint:errcheck // nothing to do about a watch that fails to close
	}
}

// startReload reloads the config from path whenever w, its watcher, calls
// back (then calls loaded): when the contents of its file or directory change, and once a change
// written in place has settled, so that a file caught half written is not
// served. A config that does not load is refused with the same
// message as at startup, and the last good one stays in effect. A change
// that leaves the files' bytes as they were (a touch, a ConfigMap update to
// the same data) is no reload: the watcher does not call back, so the
// snapshot and the over-limit cache stay, and nothing is logged or counted.
func startReload(ctx context.Context, wg *sync.WaitGroup, w *watch.Watcher, path string, lo config.Options, svc *rls.Service, m *metrics.Metrics, log *zap.Logger, loaded func()) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		w.Run(ctx, func() {
			cfg, err := lo.Load(path)
			if err != nil {
				m.Reload(false, time.Now())
				log.Error("config reload refused, keeping the last good config", zap.String("error", err.Error()))
				return
			}
			svc.SetIndex(descriptors.NewIndex(cfg))
			m.Reload(true, time.Now())
			configInForce(cfg, path, m, log, true)
			loaded()
		})
	}()
}

// configInForce reports the config just put in force, from source (the
// -config path or the xDS server): its size in the metrics and, when it
// has no domain, a warning; reloaded, a reload of a file, is logged too
// (the xDS client logs its snapshots). It then hands the memory of the
// load, and of the config it replaced, back to the system: the runtime
// would return it only over minutes, and a large config's load takes many
// times its file (the YAML decoder's tree of it), which would stay
// resident long after a small config replaced it. The forced collection
// this takes is one more on a reload, a rare event, and runs apart: the
// reload, and the xDS client's ACK, do not wait for it.
func configInForce(cfg *config.Config, source string, m *metrics.Metrics, log *zap.Logger, reloaded bool) {
	n := cfg.Count()
	m.ConfigInForce(n.Domains, n.Limits)
	m.ConfigNotLoaded(len(cfg.NotLoaded))
	if len(cfg.NotLoaded) > 0 {
		// Served all the same, at every load alike: a start that refused
		// what a reload had taken would crash-loop every pod at its next
		// restart.
		log.Warn("not loaded from the config directory: only its *.yaml and *.yml files are, not other files nor subdirectories",
			zap.String("source", source), zap.Strings("not_loaded", cfg.NotLoaded))
	}
	if ws := cfg.Warnings(); len(ws) > 0 {
		// Served all the same: a refusal would stop, at its next start, a
		// server that served the file before.
		log.Warn("the limits hold what loads but is most likely not meant", zap.String("source", source), zap.Strings("warnings", ws))
	}
	switch {
	case n.Domains == 0:
		// Empty means no limits, every request allowed: the rule stays, as
		// envoyproxy/ratelimit's for an emptied runtime directory, but it
		// must not pass for an ordinary reload.
		log.Warn("the config in force is empty: no limits, every request is allowed until limits are loaded again", zap.String("source", source))
	case reloaded:
		log.Info("config reloaded", zap.Int("domains", n.Domains), zap.Int("limits", n.Limits))
	}
	go debug.FreeOSMemory()
}

// configHealth is the line of /healthz about the config in force in ix.
func configHealth(ix *descriptors.Index) string {
	n := len(ix.Config().Domains)
	switch {
	case !ix.Loaded():
		return "config: none yet"
	case n == 0:
		return "config: empty: no limits, every request is allowed"
	case n == 1:
		return "config: 1 domain"
	}
	return fmt.Sprintf("config: %d domains", n)
}
