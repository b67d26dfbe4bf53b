// Package integration tests the envoy-rls binary from the outside: it builds
// cmd/envoy-rls with the race detector once, starts it as a real process on
// free loopback ports, against the embedded store and against a real
// redis-server, and drives it over gRPC and HTTP as Envoy and operators do.
//
// The tests live in the _test.go files; this package has no API. Run them
// with:
//
//	go test -race -count=1 ./test/integration/
package integration
