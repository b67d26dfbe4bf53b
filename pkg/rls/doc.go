// Package rls answers Envoy's rate limit calls: it is the
// envoy.service.ratelimit.v3 RateLimitService, to register on a gRPC
// server of one's own, deciding each request's descriptors against the
// limits of a loaded config on a store.
//
// New builds a Service from a descriptors.Index (descriptors.NewIndex of a
// config.Config that package config loaded, or of nil while none has
// arrived) and Options, whose Store decides the hits: memory.New for a
// single instance, redisstore for instances sharing Redis, wrapped as
// needed by overlimit and breaker. Register it with
// rlsv3.RegisterRateLimitServiceServer.
// SetIndex swaps in a new config while calls go on. Explain tells what one
// descriptor matches and the state of its limits without consuming
// anything, and Reset clears that state. What an answer holds (statuses,
// headers, failure modes, and where envoyproxy/ratelimit answers otherwise,
// Options.Profile) is docs/semantics.md's matter.
//
// It does not listen, load or watch limits files, talk xDS, or serve
// metrics and health checks: the envoy-rls command does, around it.
// Options.Metrics is that command's collectors; nil records nothing.
//
// # How a call is decided
//
// A request becomes a plan (plan.go): each descriptor matched to its limits,
// with their store keys and costs. The plan is decided in one store call
// (decide.go), the descriptors the store failed take their failure modes in
// one pass (failure.go), each gets a verdict (verdict.go), and the verdicts
// become Envoy's answer, one status per descriptor in order (respond.go,
// headers.go), and one metrics record each (stats.go). Where
// envoyproxy/ratelimit's answers differ from envoy-rls's own, the service
// follows the Profile it was given (profile.go). Explain (explain.go) builds
// and settles the same plan. envoy.go converts between Envoy's protobuf and
// the service's types.
package rls
