package server

import (
	"context"
	"flag"
	"fmt"
	"sync"

	"go.uber.org/zap"

	"github.com/envoy-rls/envoy-rls/internal/forwardauth"
	"github.com/envoy-rls/envoy-rls/internal/httpapi"
	"github.com/envoy-rls/envoy-rls/internal/metrics"
	"github.com/envoy-rls/envoy-rls/internal/watch"
	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

func forwardAuthFlags(fs *flag.FlagSet, path *string) {
	fs.StringVar(path, "forward-auth-config", "", "forward-auth policies (YAML; reread when it changes): serves GET /v1/forward-auth/{policy} on -http-addr for nginx's auth_request and Caddy's forward_auth (docs/forward-auth.md); empty: 404")
}

// forwardAuth is GET /v1/forward-auth/{policy} of a running server: its
// file, the file's watch, and its metrics.
type forwardAuth struct {
	config *reloading[forwardauth.Config]
	watch  *watch.Watcher // nil when the file cannot be watched
	m      *metrics.ForwardAuth
	log    *zap.Logger
}

// newForwardAuth returns the endpoint -forward-auth-config asks for, nil
// without it. A file that does not load stops the start, with its file,
// line and field.
func newForwardAuth(o *Options, m *metrics.Metrics, log *zap.Logger) (*forwardAuth, error) {
	path := o.forwardAuthConfig
	if path == "" {
		return nil, nil
	}
	f := &forwardAuth{log: log.Named("forward_auth")}
	f.config = &reloading[forwardauth.Config]{files: []string{path}, what: "forward-auth config", log: f.log,
		read: func() (*forwardauth.Config, error) { return forwardauth.Load(path) }}
	if err := f.config.load(); err != nil {
		return nil, fmt.Errorf("-forward-auth-config: %w", err)
	}
	w, err := watch.New(f.log, watch.Options{}, path)
	if err != nil {
		f.log.Warn("forward-auth config reload is off: the file cannot be watched", zap.Error(err))
	}
	f.watch = w
	f.m = m.ForwardAuth()
	return f, nil
}

// wire serves the endpoint in ho, deciding with svc.
func (f *forwardAuth) wire(ho *httpapi.Options, svc *rls.Service) {
	if f == nil {
		return
	}
	ho.ForwardAuth = &httpapi.ForwardAuth{
		Config:      f.config.get,
		KnownDomain: func(d string) bool { return svc.Index().Known(d) },
		Count:       f.m.Call,
		Ignored:     f.m.Ignored,
	}
}

// reload reads the file again; a file that does not load is logged and
// counted, and the last good one stays.
func (f *forwardAuth) reload() {
	err := f.config.load()
	f.m.Reloaded(err == nil)
	if err != nil {
		f.log.Warn("forward-auth config not reloaded, keeping the last good one", zap.Error(err))
		return
	}
	f.log.Info("forward-auth config reloaded", zap.Int("policies", f.config.get().Len()))
}

// serve starts the file's watch.
func (f *forwardAuth) serve(bg context.Context, wg *sync.WaitGroup) {
	if f == nil {
		return
	}
	if f.watch != nil {
		wg.Add(1)
		go func() { defer wg.Done(); f.watch.Run(bg, f.reload) }()
	}
	f.log.Info("serving GET /v1/forward-auth/{policy}", zap.Int("policies", f.config.get().Len()))
}

// close stops the file's watch.
func (f *forwardAuth) close() {
	if f != nil && f.watch != nil {
		f.watch.Close() //nolint:errcheck // nothing to do about a watch that fails to close
	}
}
