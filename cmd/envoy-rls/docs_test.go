package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestKubernetesHelmPin: docs/kubernetes.md's `go run` of Helm's command
// line names the version of Helm that deploy/test pins, the one the chart
// is tested with, so that a render without Helm installed is the tested
// one.
func TestKubernetesHelmPin(t *testing.T) {
	mod, err := os.ReadFile("../../deploy/test/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*helm\.sh/helm/v3 (v\S+)`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("deploy/test/go.mod requires no helm.sh/helm/v3")
	}
	doc, err := os.ReadFile("../../docs/kubernetes.md")
	if err != nil {
		t.Fatal(err)
	}
	want := "go run helm.sh/helm/v3/cmd/helm@" + string(m[1]) + " template envoy-rls charts/envoy-rls"
	if !strings.Contains(string(doc), want) {
		t.Errorf("docs/kubernetes.md lacks %q: the render without Helm installed must use the version deploy/test pins", want)
	}
}
