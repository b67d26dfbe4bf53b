package server

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"go.uber.org/zap"

	"github.com/envoy-rls/envoy-rls/internal/grpcguard"
	"github.com/envoy-rls/envoy-rls/internal/httpapi"
	"github.com/envoy-rls/envoy-rls/internal/metrics"
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

// A request to the HTTP API is small (MaxBodyBytes) and answered at once,
// so a client that takes longer than -http-read-timeout to send it, or to
// read the answer, is not one to wait for; a pprof profile streams for as
// long as it was asked to (30 s by default), so the debug server may write
// for longer.
const (
	httpReadHeaderTimeout = 10 * time.Second
	debugWriteTimeout     = 5 * time.Minute
	httpMaxHeaderBytes    = 64 << 10
)

// newHTTPServer returns a server of h with the HTTP bounds of o (writing
// for up to writeTimeout), whose own error log (accept errors, TLS
// handshake failures) goes to log.
func newHTTPServer(h http.Handler, o *Options, writeTimeout time.Duration, log *zap.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: min(httpReadHeaderTimeout, o.httpReadTimeout),
		ReadTimeout:       o.httpReadTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       o.httpIdleTimeout,
		MaxHeaderBytes:    httpMaxHeaderBytes,
		ErrorLog:          serverErrorLog(log, "http"),
	}
}

// boundedHTTP is l, an HTTP listener, within -http-max-connections (or
// its share of the file descriptors), each connection refused past it
// counted in m.
func boundedHTTP(o *Options, m *metrics.Metrics, l net.Listener) net.Listener {
	_, httpConns := grpcguard.ConnectionBounds(o.grpcMaxConnections, o.httpMaxConnections)
	return grpcguard.BoundListener(l, httpConns, func() { m.Refused(metrics.RefusedHTTPConnection) })
}
