package server

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync"

	"go.uber.org/zap"

	"github.com/envoy-rls/envoy-rls/internal/httpapi"
	"github.com/envoy-rls/envoy-rls/internal/watch"
	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

// usageOptions say whether GET /v1/usage, the tenants' read of what is
// left of their limits, is served on -http-addr, and what it requires:
// off unless one is set, since a path that answered 404 must keep doing
// so for whoever did not ask for it.
type usageOptions struct {
	// on serves it without a token (-usage-endpoint).
	on bool
	// tokenFile holds the bearer tokens a call must present; set, it
	// serves the endpoint too. A tenant's token is not an admin's: the
	// admin endpoints keep -admin-token-file's.
	tokenFile string
}

func usageFlags(fs *flag.FlagSet, u *usageOptions) {
	fs.BoolVar(&u.on, "usage-endpoint", false, "serve GET /v1/usage on -http-addr: what is used, held and left of every limit of a descriptor, read without consuming (a bearer token of -tenant-token-file required when it is set)")
	fs.StringVar(&u.tokenFile, "tenant-token-file", "", "file of bearer tokens (one a line: TOKEN or NAME TOKEN, 16 characters at least; reread when it changes) that GET /v1/usage requires; serves it on -http-addr")
}

func (u usageOptions) serves() bool { return u.on || u.tokenFile != "" }

// usage is GET /v1/usage of a running server: its tokens and their file's
// watch.
type usage struct {
	tokens *reloading[httpapi.Tokens] // nil without -tenant-token-file
	watch  *watch.Watcher             // nil when the file cannot be watched
	log    *zap.Logger
}

// newUsage returns the endpoint o asks for, nil when it is off. A token
// file that does not load stops the start.
func newUsage(o *Options, log *zap.Logger) (*usage, error) {
	if !o.usage.serves() {
		return nil, nil
	}
	u := &usage{log: log.Named("usage")}
	if path := o.usage.tokenFile; path != "" {
		var err error
		if u.tokens, u.watch, err = watchedTokens(path, "tenant tokens", u.log); err != nil {
			return nil, fmt.Errorf("-tenant-token-file: %w", err)
		}
	}
	return u, nil
}

// watchedTokens loads the token file at path, and returns it with the
// watch that reloads it (nil when the file cannot be watched: it is then
// read once).
func watchedTokens(path, what string, log *zap.Logger) (*reloading[httpapi.Tokens], *watch.Watcher, error) {
	tokens := &reloading[httpapi.Tokens]{files: []string{path}, what: what, log: log, read: func() (*httpapi.Tokens, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		return httpapi.ParseTokens(b)
	}}
	w, err := watch.New(log, watch.Options{}, path)
	if err != nil {
		log.Warn(what+" reload is off: the file cannot be watched", zap.Error(err))
	}
	if err := tokens.load(); err != nil {
		if w != nil {
			w.Close() //nolint:errcheck // the error that matters is the load's
		}
		return nil, nil, err
	}
	return tokens, w, nil
}

// wire serves the endpoint from svc in ho, the HTTP API's options.
func (u *usage) wire(ho *httpapi.Options, svc *rls.Service) {
	if u == nil {
		return
	}
	ho.Usage = svc
	if u.tokens != nil {
		ho.UsageTokens = u.tokens.get
	}
}

// serve starts the token file's watch.
func (u *usage) serve(bg context.Context, wg *sync.WaitGroup) {
	if u == nil {
		return
	}
	if u.watch != nil {
		wg.Add(1)
		go func() { defer wg.Done(); u.watch.Run(bg, u.tokens.reload) }()
	}
	tokens := 0
	if u.tokens != nil {
		tokens = u.tokens.get().Len()
	}
	u.log.Info("serving GET /v1/usage", zap.Int("tokens", tokens))
}

// close stops the token file's watch.
func (u *usage) close() {
	if u != nil && u.watch != nil {
		u.watch.Close() //nolint:errcheck // nothing to do about a watch that fails to close
	}
}
