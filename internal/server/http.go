package server

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"

	"go.uber.org/zap"

	"github.com/envoy-rls/envoy-rls/internal/httpapi"
	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

// explainer is what serves GET /explain: the service, or nil with
// -explain-endpoint=false.
func explainer(o *Options, svc *rls.Service) httpapi.Explainer {
	if !o.explainEndpoint {
		return nil
	}
	return svc
}

func serveHTTP(s *http.Server, l net.Listener) error {
	if err := s.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http: %w", err)
	}
	return nil
}

// withoutJSON is the HTTP API without POST /json (-json-endpoint=false),
// for an -http-addr that callers who must not decide can reach: /json
// answers 404 as an unknown path does.
func withoutJSON(api http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/json", http.NotFoundHandler())
	mux.Handle("/", api)
	return mux
}

// debugServer serves pprof. It is the only server that does: the HTTP API
// on -http-addr never does, since the debug address is meant to stay on
// loopback.
func debugServer(o *Options, log *zap.Logger) *http.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", redactedCmdline) // secrets.go
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return newHTTPServer(mux, o, debugWriteTimeout, log)
}
