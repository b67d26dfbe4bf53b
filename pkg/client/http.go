package client

import (
	"errors"
	"net/http"

	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

// MiddlewareOption configures HTTPMiddleware.
type MiddlewareOption func(*middleware)

// middleware is HTTPMiddleware's client, domain, describe and options.
type middleware struct {
	client   *Client
	domain   string
	describe func(*http.Request) []Descriptor

	onDecision func(*http.Request, Decision)
	onRefused  func(http.ResponseWriter, *http.Request, Decision)
	onError    func(*http.Request, error)
}

// OnDecision calls f with every decision the middleware makes, allowed or
// refused, before the request is served or refused: for metrics or a log
// line. f runs on the request's goroutine; it must not write the response.
func OnDecision(f func(*http.Request, Decision)) MiddlewareOption {
	return func(m *middleware) { m.onDecision = f }
}

// OnRefused makes f answer refused requests in place of the middleware's
// own 429 (a JSON body, a redirect, a page): f writes the whole response,
// headers included (Decision.WriteHeaders gives the rate-limit ones).
func OnRefused(f func(http.ResponseWriter, *http.Request, Decision)) MiddlewareOption {
	return func(m *middleware) { m.onRefused = f }
}

// OnError calls f with Check's error (the descriptors describe gave are
// a mistake, or the service found the request invalid) or ErrNoDescribe
// before the middleware answers 500: a log line for what is the
// application's bug.
func OnError(f func(*http.Request, error)) MiddlewareOption {
	return func(m *middleware) { m.onError = f }
}

// refusedBody is the body of the middleware's own refusal.
const refusedBody = "rate limited\n"

// HTTPMiddleware limits the requests of next: describe gives the
// descriptors of a request (none: the request passes without a call), each
// counting one hit in domain.
//
// Allowed, next runs, and its response carries the rate-limit headers
// (set on the ResponseWriter's header before next runs). Refused, next
// does not run: the answer is 429 with Retry-After (whole seconds, at
// least 1), the rate-limit headers and the body "rate limited", or what
// OnRefused writes. A refusal of the failure mode (the service could not
// answer, FailClosed) is the same 429 with Retry-After 1 and no
// X-RateLimit-* headers: there is no limit to report. Check's error (a
// descriptor describe got wrong), or a nil describe (ErrNoDescribe), is a
// 500, since serving the request would skip its limit unnoticed.
func HTTPMiddleware(c *Client, domain string, describe func(*http.Request) []Descriptor, opts ...MiddlewareOption) func(http.Handler) http.Handler {
	m := middleware{client: c, domain: domain, describe: describe}
	for _, opt := range opts {
		opt(&m)
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(w, r, next) })
	}
}

// ErrNoDescribe is the error of a middleware or interceptor given a nil
// describe function: each request it sees fails with it (500, INTERNAL)
// rather than pass unlimited.
var ErrNoDescribe = errors.New("client: no describe function to give a request's descriptors")

func (m *middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	if m.describe == nil {
		m.fail(w, r, ErrNoDescribe)
		return
	}
	ds := m.describe(r)
	if len(ds) == 0 {
		next.ServeHTTP(w, r)
		return
	}
	d, err := m.client.Check(r.Context(), m.domain, 0, ds...)
	if err != nil {
		m.fail(w, r, err)
		return
	}
	if m.onDecision != nil {
		m.onDecision(r, d)
	}
	switch {
	case d.Allowed:
		d.WriteHeaders(w.Header())
		next.ServeHTTP(w, r)
	case m.onRefused != nil:
		m.onRefused(w, r, d)
	default:
		writeRefusal(w, d)
	}
}

// fail answers a request whose Check could not be asked: 500.
func (m *middleware) fail(w http.ResponseWriter, r *http.Request, err error) {
	if m.onError != nil {
		m.onError(r, err)
	}
	http.Error(w, "rate limit check failed", http.StatusInternalServerError)
}

// writeRefusal is the middleware's own 429.
func writeRefusal(w http.ResponseWriter, d Decision) {
	h := w.Header()
	d.WriteHeaders(h)
	if h.Get(rls.HeaderRetryAfter) == "" {
		h.Set(rls.HeaderRetryAfter, "1")
	}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = w.Write([]byte(refusedBody))
}
