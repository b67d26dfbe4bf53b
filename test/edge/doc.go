// Package edge checks the edge setup that ships with envoy-rls, without
// Envoy or Docker: config/envoy.yaml is parsed into go-control-plane's
// Bootstrap (the API of the Envoy image docker-compose.yml pins) and
// validated, every typed_config resolves, and the names and ports of
// config/envoy.yaml, docker-compose.yml, the Dockerfile and envoy-rls's flag
// defaults agree. The descriptors that the routes' rate_limits actions build
// for sample requests are matched against config/limits.yaml, and sent over
// real gRPC to envoy-rls's service to check the x-ratelimit-* headers that
// docs/edge.md shows.
//
// The tests live in the _test.go files; this package has no API. Run them
// with:
//
//	go test -race ./test/edge/
package edge
