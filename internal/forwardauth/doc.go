// Package forwardauth turns the request a proxy asks about (nginx's
// auth_request, Caddy's forward_auth, Traefik's ForwardAuth) into the
// descriptors of a rate limit request, by rules the operator declares in
// Envoy's own vocabulary: a policy's rate_limits are route rate_limits, so
// that a limits file written for Envoy works unchanged behind nginx or
// Caddy.
//
// The package only builds descriptors; the decision is the service's
// (package rls), reached in process by the HTTP endpoint (package
// httpapi), so that a forward-auth call and a gRPC call are decided by one
// path and counted in one set of metrics.
//
// A Config is immutable once parsed and safe for concurrent use: a reload
// parses a new one and swaps it in.
package forwardauth
