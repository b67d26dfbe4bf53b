package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"runtime/debug"
	"sync"

	"go.uber.org/zap"

	"github.com/envoy-rls/envoy-rls/internal/metrics"
	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

// source is where the limits come from: the -config file or directory
// (filesSource), or an xDS server (xdsSource). The server holds one,
// opened before the listeners, and asks it, in this order: to wait for
// the config to start with (ready), for the config in force (config),
// to count its loads once the metrics are there (count), to put each
// later load in force in the running service (serve), whether the config
// lets the service report healthy (healthy), and, at the end, to stop
// (close).
type source interface {
	// ready waits until there is a config to start with, and reports
	// false if ctx ends first.
	ready(ctx context.Context) bool
	// config is the config the source last put in force; nil before the
	// first (xDS with -xds-force-start).
	config() *config.Config
	// count records the loads so far in m, which counts the later ones.
	count(m *metrics.Metrics)
	// serve swaps every later load into svc, then calls loaded, until
	// ctx ends; its goroutines, if any, are in wg.
	serve(ctx context.Context, wg *sync.WaitGroup, svc *rls.Service, loaded func())
	// healthy reports whether the config in force lets the service report
	// healthy: always, unless -healthy-needs-config (or
	// -xds-healthy-needs-config) asks for a domain in force.
	healthy() bool
	// name names the source in the log: the -config path or the xDS
	// server.
	name() string
	// close stops the source, whether or not it served.
	close()
}

var (
	_ source = (*filesSource)(nil)
	_ source = (*xdsSource)(nil)
)

// openSource opens the source the options name. The config of files is
// loaded here, a *ConfigError to Run when it does not load; loaded, when
// not nil, runs right after that load (openFiles).
func openSource(o *Options, log *zap.Logger, loaded func()) (source, error) {
	// Each error returned alone: a nil *xdsSource or *filesSource would be
	// a source that is not nil.
	if o.xds.server != "" {
		s, err := openXDS(o, log)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	s, err := openFiles(o, log, loaded)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// hasDomainIfNeeded is the healthy of both sources: true unless needs
// asks for a domain and cfg, the config in force, has none.
func hasDomainIfNeeded(needs bool, cfg *config.Config) bool {
	return !needs || cfg != nil && len(cfg.Domains) > 0
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
