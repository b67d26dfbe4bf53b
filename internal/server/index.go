package server

import (
	"fmt"
	"net/http"
	"strings"
)

// SetVersion names the build the server runs (what `envoy-rls version`
// prints first), for GET /'s index.
func (o *Options) SetVersion(v string) { o.release = v }

// endpoint is one line of GET /'s index.
type endpoint struct{ method, path, does string }

// index is the text GET / answers on -http-addr: the version, the
// endpoints served there (those the flags turned off are not listed) and
// what -grpc-addr serves, so that a newcomer's first request is no bare
// 404.
func (r *running) index() string {
	o := r.o
	eps := []endpoint{
		{"GET", "/healthz, /healthcheck", "200 while serving with a loaded config; the body says how the store is"},
	}
	if o.jsonEndpoint {
		eps = append(eps, endpoint{"POST", "/json", "a RateLimitRequest in protobuf JSON, decided as over gRPC: 200 OK, 429 OVER_LIMIT"})
	}
	eps = append(eps,
		endpoint{"GET", "/metrics", "Prometheus metrics"},
		endpoint{"GET", "/rlconfig", "the limits in force, one line each"})
	if o.explainEndpoint {
		eps = append(eps, endpoint{"GET", "/explain?domain=D&descriptor=k=v,k2=v2", "which limit a descriptor matches, and its state"})
	}
	if o.usage.serves() {
		eps = append(eps, endpoint{"GET", "/v1/usage?domain=D&descriptor=k=v,k2=v2", "what is used, held and left of a descriptor's limits (JSON; a tenant's bearer token when -tenant-token-file is set)"})
	}
	if o.forwardAuthConfig != "" {
		eps = append(eps, endpoint{"GET", "/v1/forward-auth/{policy}", "nginx's auth_request and Caddy's forward_auth: the forwarded request decided by the policy's rules (200, 429 or 403)"})
	}
	if r.admin != nil && o.admin.addr == "" {
		eps = append(eps,
			endpoint{"GET", "/top", "the descriptors refused most in the last minute (admin: a bearer token)"},
			endpoint{"POST", "/reset", "clear one descriptor's limits (admin: a bearer token)"},
			endpoint{"GET", "/rlqs?domain=D&bucket=k=v", "an RLQS bucket's division (admin: a bearer token)"})
	}
	var b strings.Builder
	version := o.release
	if version == "" {
		version = "(version unknown)"
	}
	fmt.Fprintf(&b, "envoy-rls %s\n\nHTTP, here:\n", version)
	for _, e := range eps {
		fmt.Fprintf(&b, "  %-4s %s\n       %s\n", e.method, e.path, e.does)
	}
	grpc := []string{"envoy.service.ratelimit.v3.RateLimitService (Envoy's rate limit filter)"}
	if r.rlqs != nil {
		grpc = append(grpc, "envoy.service.rate_limit_quota.v3.RateLimitQuotaService (RLQS)")
	}
	grpc = append(grpc, "grpc.health.v1.Health")
	if o.grpcReflection {
		grpc = append(grpc, "server reflection")
	}
	fmt.Fprintf(&b, "\ngRPC, on %s:\n", r.grpcLis.Addr())
	for _, s := range grpc {
		fmt.Fprintf(&b, "  %s\n", s)
	}
	b.WriteString("\nFrom a shell: envoy-rls call, envoy-rls explain, envoy-rls top, envoy-rls reset (envoy-rls help).\n")
	return b.String()
}

// withIndex is api with GET / answering text, the index; every other
// path is api's.
func withIndex(api http.Handler, text string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, text)
	})
	mux.Handle("/", api)
	return mux
}
