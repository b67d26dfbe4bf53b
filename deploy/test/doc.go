// Package test is the module of envoy-rls's Kubernetes tests: the Helm
// chart (chart/) and the guides' configs (guides/), checked against the
// Kubernetes API types and run as a cluster would run them.
//
// It is a module of its own so that Helm, client-go and the API types,
// which only these tests need, stay out of the service's build; `make
// test` and `make lint` run it. It builds the envoy-rls binary from the
// main module rather than importing it.
package test
