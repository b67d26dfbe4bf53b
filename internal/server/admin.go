package server

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"sync"

	"go.uber.org/zap"

	"github.com/envoy-rls/envoy-rls/internal/httpapi"
	"github.com/envoy-rls/envoy-rls/internal/metrics"
	"github.com/envoy-rls/envoy-rls/internal/topk"
	"github.com/envoy-rls/envoy-rls/internal/watch"
	"github.com/envoy-rls/envoy-rls/pkg/rlqs"
	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

// adminOptions say where the admin endpoints (GET /top, POST /reset,
// GET /rlqs) are served, and what they require: off unless one is set.
type adminOptions struct {
	// addr is a listener of their own; empty puts them on -http-addr,
	// where tokenFile is then required.
	addr string
	// tokenFile holds the bearer tokens a call must present
	// (httpapi.ParseTokens); empty asks for none, on addr alone.
	tokenFile string
}

func adminFlags(fs *flag.FlagSet, a *adminOptions) {
	fs.StringVar(&a.tokenFile, "admin-token-file", "", "file of bearer tokens (one a line: TOKEN or NAME TOKEN, 16 characters at least; reread when it changes) that GET /top, POST /reset and GET /rlqs require; serves them on -http-addr, or on -admin-addr if set")
	fs.StringVar(&a.addr, "admin-addr", "", "address of a listener of their own for GET /top, POST /reset and GET /rlqs (a token of -admin-token-file is required there too when it is set); empty: they are off unless -admin-token-file is set")
}

func (a adminOptions) on() bool { return a.addr != "" || a.tokenFile != "" }

// admin is the admin endpoints of a running server: the board of
// refusals the decisions feed, the tokens and their file's watch, and
// the server of their own listener.
type admin struct {
	o       adminOptions
	handler http.Handler
	tokens  *reloading[httpapi.Tokens] // nil without -admin-token-file
	watch   *watch.Watcher             // nil when the file cannot be watched
	srv     *http.Server               // nil on -http-addr
	log     *zap.Logger
}

// newAdmin builds the admin endpoints o asks for, nil when they are off,
// and turns on the board of refusals in m. A token file that does not
// load stops the start.
func newAdmin(o *Options, svc *rls.Service, quotas *rlqs.Service, m *metrics.Metrics, log *zap.Logger) (*admin, error) {
	if !o.admin.on() {
		return nil, nil
	}
	a := &admin{o: o.admin, log: log.Named("admin")}
	ao := httpapi.AdminOptions{Resetter: svc, HashValues: o.hashValues, Log: a.log, Counted: m.Admin,
		BrowserRefused: m.BrowserRefused}
	if quotas != nil { // a nil *rlqs.Service is not a nil BucketExplainer
		ao.Quotas = quotas
	}
	if path := o.admin.tokenFile; path != "" {
		var err error
		if a.tokens, a.watch, err = watchedTokens(path, "admin tokens", a.log); err != nil { // usage.go
			return nil, fmt.Errorf("-admin-token-file: %w", err)
		}
		ao.Tokens = a.tokens.get
	}
	ao.Board = topk.NewBoard(topk.BoardOptions{HashValues: o.hashValues})
	m.EnableTop(ao.Board)
	a.handler = httpapi.AdminHandler(ao)
	return a, nil
}

// onHTTP returns api with the admin endpoints beside it when they are
// served on -http-addr.
func (a *admin) onHTTP(api http.Handler) http.Handler {
	if a == nil || a.o.addr != "" {
		return api
	}
	mux := http.NewServeMux()
	mux.Handle("/top", a.handler)
	mux.Handle("/reset", a.handler)
	mux.Handle("/rlqs", a.handler)
	mux.Handle("/", api)
	return mux
}

// serve starts the token file's watch, and the server of the admin
// listener l (nil on -http-addr).
func (a *admin) serve(bg context.Context, o *Options, l net.Listener, m *metrics.Metrics, wg *sync.WaitGroup, errc chan<- error) {
	if a == nil {
		return
	}
	if a.watch != nil {
		wg.Add(1)
		go func() { defer wg.Done(); a.watch.Run(bg, a.tokens.reload) }()
	}
	where := "http-addr"
	if l != nil {
		a.srv = newHTTPServer(a.handler, o, o.httpReadTimeout, a.log)
		bounded := boundedHTTP(o, m, l)
		wg.Add(1)
		go func() { defer wg.Done(); errc <- serveHTTP(a.srv, bounded) }()
		where = l.Addr().String()
	}
	tokens := 0
	if a.tokens != nil {
		tokens = a.tokens.get().Len()
	}
	a.log.Info("serving GET /top, POST /reset and GET /rlqs", zap.String("addr", where), zap.Int("tokens", tokens))
}

// stop closes the admin listener's server.
func (a *admin) stop() {
	if a != nil && a.srv != nil {
		a.srv.Close()
	}
}

// close stops the token file's watch.
func (a *admin) close() {
	if a != nil && a.watch != nil {
		a.watch.Close() //nolint:errcheck // nothing to do about a watch that fails to close
	}
}

// listenAdmin opens -admin-addr, nil when it is not set.
func listenAdmin(o *Options) (net.Listener, error) {
	if o.admin.addr == "" {
		return nil, nil
	}
	l, err := net.Listen("tcp", o.admin.addr)
	if err != nil {
		return nil, fmt.Errorf("-admin-addr: %w", err)
	}
	return l, nil
}
