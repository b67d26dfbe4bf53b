// Package chart tests charts/envoy-rls with Helm's own Go SDK, with no
// cluster: the chart is rendered over a matrix of values and linted; every
// object is decoded strictly into the Kubernetes API types (a misspelled
// field fails); ports, probes, arguments and environment are checked
// against the binary's flag table (docs/flags.md); the schema's refusals
// are checked message by message; deploy/kubernetes/ is checked to be the
// chart's output; and the built binary is run with exactly the rendered
// container's arguments and environment, over a directory laid out as the
// kubelet lays out its volumes, answering gRPC and reloading a swapped
// ConfigMap.
package chart

//go:generate go test -run ^TestManifests$ -update .
