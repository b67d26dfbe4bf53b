// Package test is the module of envoy-rls's Kubernetes tests, which check
// the files under charts/ and deploy/ with the APIs of the platforms that
// read them. Package chart checks the Helm chart (charts/envoy-rls) and
// its rendered manifests (deploy/kubernetes) with Helm's SDK and the
// Kubernetes API types, and runs the built binary as the rendered
// container. Package guides checks the guides' configurations
// (deploy/guides, for docs/kubernetes.md): Istio's EnvoyFilter with
// Istio's types, Envoy Gateway's configuration and policy with its API
// types, Contour's resources with its API types and configuration parser,
// every Envoy part with go-control-plane's types, and the descriptors the
// route actions send against the guides' limits with envoy-rls's lint.
//
// It is a module of its own so that those platforms' modules, Helm, and
// the Kubernetes API modules they bring, stay out of the service's build:
// `make test` and `make lint` run it.
package test
