package httpapi

import (
	"net/http"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/envoy-rls/envoy-rls/internal/forwardauth"
	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

// ForwardAuth serves GET (and HEAD) /v1/forward-auth/{policy}, the
// endpoint nginx's auth_request and Caddy's forward_auth call before
// serving a request (docs/forward-auth.md).
type ForwardAuth struct {
	// Config is the forward-auth file in force, the last good one read.
	Config func() *forwardauth.Config
	// KnownDomain reports whether the limits in force have a domain: a
	// policy whose domain is missing is answered 404, not allowed, so that
	// a typo in either file shows instead of letting every request
	// through.
	KnownDomain func(domain string) bool
	// Count, when not nil, counts one call by policy ("" for an unknown
	// one, whose name is the caller's) and outcome (forwardauth.Outcome*).
	Count func(policy, outcome string)
	// Ignored, when not nil, counts one call whose X-Forwarded-For or
	// X-Real-IP was ignored because its peer is not a trusted proxy.
	Ignored func(policy string)
}

// refusedStatusParam lets one policy serve both proxies: nginx asks for
// its refusals as 403, the only refusal auth_request passes on.
const refusedStatusParam = "refused_status"

// serveForwardAuth builds the policy's descriptors from the forwarded
// request and asks the service in process, as a gRPC call would: allowed
// is 200 and refused the policy's refused status (429, or 403), each with
// the headers an HTTP server sends for the answer (rls.HTTPHeaders) and
// an empty body, for the proxy to copy onto its client's response. A call
// that builds no descriptor is allowed without asking. What cannot be
// decided gets a status and a one-line reason (forwardauth.Refusal).
func serveForwardAuth(w http.ResponseWriter, r *http.Request, lim Limiter, fa *ForwardAuth) {
	count := func(policy, outcome string) {
		if fa.Count != nil {
			fa.Count(policy, outcome)
		}
	}
	cfg := fa.Config()
	p := cfg.Policy(r.PathValue("policy"))
	if p == nil {
		count("", forwardauth.OutcomeUnknownPolicy)
		httpError(w, http.StatusNotFound, "no forward-auth policy of that name")
		return
	}
	refusedStatus, ok := refusedStatusOf(r, p)
	if !ok {
		count(p.Name, forwardauth.OutcomeBadRequest)
		httpError(w, http.StatusBadRequest, "refused_status must be 403 or 429")
		return
	}
	descs, refusal := forwardedDescriptors(r, cfg, p, fa.Ignored)
	if refusal != nil {
		count(p.Name, refusal.Outcome)
		httpError(w, refusal.Status, refusal.Reason)
		return
	}
	if len(descs) == 0 {
		count(p.Name, forwardauth.OutcomeNoDescriptor)
		return
	}
	if !fa.KnownDomain(p.Domain) {
		count(p.Name, forwardauth.OutcomeUnknownDomain)
		httpError(w, http.StatusNotFound, "policy "+p.Name+": domain "+p.Domain+" is not in the limits in force")
		return
	}
	resp, err := lim.ShouldRateLimit(r.Context(), &rlsv3.RateLimitRequest{Domain: p.Domain, Descriptors: descs})
	if err != nil {
		count(p.Name, forwardauth.OutcomeError)
		code := http.StatusInternalServerError
		if status.Code(err) == codes.Unavailable {
			code = http.StatusServiceUnavailable
		}
		httpError(w, code, status.Convert(err).Message())
		return
	}
	rls.HTTPHeaders(resp, w.Header())
	if resp.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT {
		count(p.Name, forwardauth.OutcomeRefused)
		w.WriteHeader(refusedStatus)
		return
	}
	count(p.Name, forwardauth.OutcomeAllowed)
}

// refusedStatusOf is the status of a refusal of p for r: the policy's,
// unless the call's refused_status asks for 403 or 429; ok false for any
// other value.
func refusedStatusOf(r *http.Request, p *forwardauth.Policy) (int, bool) {
	switch r.URL.Query().Get(refusedStatusParam) {
	case "":
		return p.RefusedStatus, true
	case "403":
		return http.StatusForbidden, true
	case "429":
		return http.StatusTooManyRequests, true
	}
	return 0, false
}

// forwardedDescriptors reads the client and the forwarded request of r,
// and builds p's descriptors for them.
func forwardedDescriptors(r *http.Request, cfg *forwardauth.Config, p *forwardauth.Policy, countIgnored func(string)) ([]*ratelimitv3.RateLimitDescriptor, *forwardauth.Refusal) {
	client, ignored, refusal := cfg.Client(r.RemoteAddr, r.Header)
	if refusal != nil {
		return nil, refusal
	}
	if ignored && countIgnored != nil {
		countIgnored(p.Name)
	}
	req := forwardauth.ForwardedRequest(r.Header, client)
	return p.Descriptors(&req)
}
