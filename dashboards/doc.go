// Package dashboards holds envoy-rls's Grafana dashboards (envoy-rls.json
// over the service's own families, envoy-ratelimit.json over
// envoyproxy/ratelimit's) and their test: every PromQL expression parses
// with Prometheus's own parser, and every metric it names is exported by a
// running envoy-rls, so that a dashboard cannot rot when a family is
// renamed.
//
// It is a module of its own so that the Prometheus server module, which
// the parser comes from, stays out of the service's build: `make test`
// runs its test.
package dashboards
