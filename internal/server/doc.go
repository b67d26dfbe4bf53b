// Package server assembles envoy-rls's server from its packages: the
// options (every flag with its RLS_ environment twin, parsed and checked
// once by ParseFlags), the listeners and the bounds on what clients can
// make the service hold (package grpcguard), gRPC TLS with its reloads,
// the store stack (over-limit cache, then breaker, then the Redis store,
// each a limits.Store wrapping the next; or the embedded store), the
// limits' source (one interface: a watched file or directory, or an xDS
// client), the service of package rls, the HTTP endpoints of package
// httpapi, envoyproxy/ratelimit's stats, and the drain on SIGTERM. Run
// runs it until its context is done; Main is the command around it (the
// logger, the signals, the exit status), and main only parses the command
// line into Options (ParseFlags) and calls Main.
package server
