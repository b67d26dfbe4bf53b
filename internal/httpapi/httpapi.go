// Package httpapi serves the service's HTTP endpoints: health, the /json
// twin of the gRPC call, Prometheus metrics and the loaded limits.
package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
)

// MaxBodyBytes bounds a /json request body.
const MaxBodyBytes = 1 << 20

// Limiter decides a rate limit request, as the gRPC service does.
type Limiter interface {
	ShouldRateLimit(context.Context, *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error)
}

// Options wire the endpoints to the running service.
type Options struct {
	Limiter Limiter
	// Serving reports whether the service is serving with a loaded config;
	// false turns the health endpoints to 503 (during shutdown).
	Serving func() bool
	// StorePing checks the store; nil for the embedded store, which cannot
	// be unreachable.
	StorePing func(context.Context) error
	// ConfigLines lists the loaded limits, one line each.
	ConfigLines func() []string
	// ConfigHealth, when not nil, says what config is in force, as a line
	// of the health endpoints' body: an empty one allows every request.
	ConfigHealth func() string
	// Gatherer serves /metrics; nil leaves the endpoint out.
	Gatherer prometheus.Gatherer
	// Explainer serves GET /explain (explain.go); nil leaves it out.
	Explainer Explainer
	// Usage serves GET /v1/usage, the tenants' read of what is left
	// (usage.go); nil leaves it out. UsageTokens returns the bearer
	// tokens it requires, the last good ones read; nil asks for none.
	Usage       UsageReader
	UsageTokens func() *Tokens
	// JSONRefunds lets POST /json refund hits (descriptors with
	// is_negative_hits). Off, such a request is refused with 400: anything
	// that reaches the HTTP port could otherwise hand another client's
	// quota back. Envoy refunds over gRPC.
	JSONRefunds bool
	// Bodies bounds the bytes /json bodies hold at once; nil is a budget
	// of DefaultBodyBudget.
	Bodies *BodyBudget
	// BodyRefused, when not nil, is called for each body refused because
	// Bodies had no room for it.
	BodyRefused func()
	// BrowserRefused, when not nil, is called for each POST /json refused
	// as a browser's (browser.go), with why (Refused*).
	BrowserRefused func(endpoint, reason string)
	// ForwardAuth serves GET /v1/forward-auth/{policy} (forwardauth.go);
	// nil leaves it out.
	ForwardAuth *ForwardAuth
}

// Handler returns the HTTP API.
func Handler(o Options) http.Handler {
	if o.Bodies == nil {
		o.Bodies = NewBodyBudget(DefaultBodyBudget)
	}
	mux := http.NewServeMux()
	health := func(w http.ResponseWriter, r *http.Request) { serveHealth(w, r, o) }
	mux.HandleFunc("GET /healthz", health)
	mux.HandleFunc("GET /healthcheck", health)
	mux.HandleFunc("POST /json", func(w http.ResponseWriter, r *http.Request) { serveJSON(w, r, o) })
	mux.HandleFunc("GET /rlconfig", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		for _, l := range o.ConfigLines() {
			fmt.Fprintln(w, l)
		}
	})
	if o.Gatherer != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(o.Gatherer, promhttp.HandlerOpts{}))
	}
	if o.Explainer != nil {
		mux.HandleFunc("GET /explain", func(w http.ResponseWriter, r *http.Request) { serveExplain(w, r, o.Explainer) })
	}
	if o.Usage != nil {
		mux.HandleFunc("GET /v1/usage", func(w http.ResponseWriter, r *http.Request) { serveUsage(w, r, o) })
	}
	if o.ForwardAuth != nil {
		mux.HandleFunc("GET /v1/forward-auth/{policy}", func(w http.ResponseWriter, r *http.Request) {
			serveForwardAuth(w, r, o.Limiter, o.ForwardAuth)
		})
	}
	return mux
}

// serveHealth answers 200 while the service serves, whether or not the
// store answers: with a store down the service still decides by its failure
// mode, and restarting it would not help. The body says which: ok,
// unreachable, or degraded when the store answers for some keys only (a
// Redis Cluster with a master down, whose error says so with a Degraded
// method). A store that answers but refuses the service's settings (a
// wrong password, whose error says so with a Refused method) is a
// configuration error, not an outage: 503, until the settings are fixed.
func serveHealth(w http.ResponseWriter, r *http.Request, o Options) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if o.Serving != nil && !o.Serving() {
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "not serving\n")
		return
	}
	storeState := "store: embedded"
	if o.StorePing != nil {
		ctx, cancel := context.WithTimeout(r.Context(), time.Second)
		defer cancel()
		var partial interface{ Degraded() bool }
		var refused interface{ Refused() bool }
		if err := o.StorePing(ctx); errors.As(err, &refused) && refused.Refused() {
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "store: refused: "+err.Error()+"\n")
			return
		} else if errors.As(err, &partial) && partial.Degraded() {
			storeState = "store: degraded: " + err.Error()
		} else if err != nil {
			storeState = "store: unreachable: " + err.Error()
		} else {
			storeState = "store: ok"
		}
	}
	body := "OK\n" + storeState + "\n"
	if o.ConfigHealth != nil {
		body += o.ConfigHealth() + "\n"
	}
	io.WriteString(w, body)
}

// serveJSON is envoyproxy/ratelimit's /json: a RateLimitRequest in protobuf
// JSON in, the RateLimitResponse out, with the code as the HTTP status.
// A request a page in a browser made is refused (browser.go): a hit
// charges quota, and can start a lock (block_for), of whatever descriptor
// the page names. Its body may be of any type, as envoyproxy/ratelimit takes it
// (`curl -d` sends a form's): what a browser sends across sites is
// refused by its Origin and Sec-Fetch-Site.
func serveJSON(w http.ResponseWriter, r *http.Request, o Options) {
	if why := refuseBrowser(w, r, false); why != "" {
		if o.BrowserRefused != nil {
			o.BrowserRefused("json", why)
		}
		return
	}
	var req rlsv3.RateLimitRequest
	if !readRequest(w, r, o, &req) {
		return
	}
	if !o.JSONRefunds {
		for i, d := range req.GetDescriptors() {
			if d.GetIsNegativeHits() {
				httpError(w, http.StatusBadRequest, fmt.Sprintf("descriptor %d: refunds (is_negative_hits) are not accepted over /json (-json-negative-hits)", i))
				return
			}
		}
	}
	resp, err := o.Limiter.ShouldRateLimit(r.Context(), &req)
	if err != nil {
		code := http.StatusInternalServerError
		switch status.Code(err) {
		case codes.InvalidArgument:
			code = http.StatusBadRequest
		case codes.Unavailable:
			code = http.StatusServiceUnavailable
		}
		msg := err.Error()
		if s, ok := status.FromError(err); ok {
			msg = s.Message()
		}
		httpError(w, code, msg)
		return
	}
	out, err := protojson.Marshal(resp)
	if err != nil {
		httpError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if resp.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT {
		w.WriteHeader(http.StatusTooManyRequests)
	}
	w.Write(out)
}

// readRequest decodes the body of r into req within o's budget, and
// answers the client itself if it cannot: 503 when the budget has no room
// (closing the connection rather than reading the rest), 400 otherwise.
// The body's bytes go back to the budget once it is decoded.
func readRequest(w http.ResponseWriter, r *http.Request, o Options, req *rlsv3.RateLimitRequest) bool {
	body, err := o.Bodies.readBody(http.MaxBytesReader(w, r.Body, MaxBodyBytes), r.ContentLength)
	if errors.Is(err, ErrBodyBudget) {
		if o.BodyRefused != nil {
			o.BodyRefused()
		}
		w.Header().Set("Connection", "close")
		w.Header().Set("Retry-After", "1")
		httpError(w, http.StatusServiceUnavailable, "reading body: "+err.Error())
		return false
	}
	if err != nil {
		httpError(w, http.StatusBadRequest, "reading body: "+err.Error())
		return false
	}
	err = protojson.Unmarshal(body.b, req)
	body.release()
	if err != nil {
		httpError(w, http.StatusBadRequest, "bad RateLimitRequest: "+err.Error())
		return false
	}
	return true
}

func httpError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	io.WriteString(w, strings.TrimSpace(msg)+"\n")
}
