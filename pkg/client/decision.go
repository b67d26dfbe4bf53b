package client

import (
	"net/http"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

// Decision is the answer to one Check.
type Decision struct {
	// Allowed says whether the request may go on: the service's overall
	// code is not OVER_LIMIT, or, when Unavailable, the failure mode is
	// FailOpen.
	Allowed bool
	// Code is the service's overall code: OK or OVER_LIMIT; UNKNOWN when
	// Unavailable.
	Code rlsv3.RateLimitResponse_Code
	// Unavailable is why the service did not answer (a gRPC status:
	// Unavailable, DeadlineExceeded, ...), when it did not: the failure
	// mode decided. Nil when the service answered.
	Unavailable error
	// Response is the service's answer, with a status per descriptor
	// (its limit, remaining and reset) and the headers it adds; nil when
	// Unavailable.
	Response *rlsv3.RateLimitResponse
}

// RetryAfter is how long a refused caller should wait: the longest reset
// of the statuses over their limit. It is 0 when the request is allowed,
// and when the failure mode refused it (no status says how long the
// service will be away).
func (d Decision) RetryAfter() time.Duration {
	if d.Allowed {
		return 0
	}
	return rls.RefusedWait(d.Response)
}

// WriteHeaders writes to h the headers an HTTP server answering for the
// decision sends its client, as Envoy's rate limit filter would
// (rls.HTTPHeaders): the service's own headers, X-RateLimit-Limit,
// -Remaining and -Reset, and Retry-After on a refusal. It writes nothing
// when Unavailable: there is no limit to report.
func (d Decision) WriteHeaders(h http.Header) {
	if d.Response == nil {
		return
	}
	rls.HTTPHeaders(d.Response, h)
}
