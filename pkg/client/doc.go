// Package client is the Go client of envoy-rls, for the application layer
// of rate limiting.
//
// Limits come in two layers. The edge (Envoy, nginx, Caddy) limits
// coarsely, per address, before a request costs anything. The application
// knows more once it has authenticated the request (the user, the tenant,
// the plan) and enforces the finer limit per user or per endpoint. A
// limiter inside the application would count each instance's requests
// alone, so N instances would allow N times the limit; this package asks
// envoy-rls instead, whose counters live in Redis and are shared by every
// instance, so the limit holds however many instances serve it.
//
// Dial connects to the service (plaintext, TLS, or mutual TLS) and
// Client.Check asks for a domain and descriptors, as Envoy's rate limit
// filter does; the Decision says whether to serve, carries the service's
// statuses and writes the headers to send (X-RateLimit-*, Retry-After,
// and any the service adds). A service that cannot answer within the
// timeout is decided by the failure mode, allow or deny, never an error.
// HTTPMiddleware and the gRPC interceptors put a Check in front of an
// http.Handler or a grpc.Server, answering a refusal with 429 and
// Retry-After or with RESOURCE_EXHAUSTED and a RetryInfo.
//
// docs/client.md walks through it.
package client
