package guides

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/envoy-rls/envoy-rls/internal/server"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// Where the guides say envoy-rls runs: the Service the chart makes with its
// default release name, in its own namespace, gRPC on -grpc-addr's default
// port (checked against the flag in grpcPort).
const (
	rlsService   = "envoy-rls"
	rlsNamespace = "envoy-rls"
	rlsFQDN      = rlsService + "." + rlsNamespace + ".svc.cluster.local"
	guidesDir    = "deploy/guides"
	limitsKey    = "limits.yaml" // the ConfigMaps' key, a file in -config's directory
)

// root is the repository's directory: this package is deploy/test/guides.
func root(t testing.TB) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "cmd", "envoy-rls")); err != nil {
		t.Fatalf("repository root: %v", err)
	}
	return dir
}

// guide reads a file of deploy/guides.
func guide(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root(t), guidesDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// decodeStrict decodes a Kubernetes object written in YAML into out as the
// API server would refuse it: an unknown or misspelled field, or a key
// given twice, is an error.
func decodeStrict(t testing.TB, name string, data []byte, out any) {
	t.Helper()
	if err := yaml.UnmarshalStrict(data, out); err != nil {
		t.Fatalf("%s/%s: %v", guidesDir, name, err)
	}
}

// field is one top-level field of a YAML object, as JSON.
func field(t testing.TB, name string, data []byte, key string) json.RawMessage {
	t.Helper()
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		t.Fatalf("%s/%s: %v", guidesDir, name, err)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(js, &obj); err != nil {
		t.Fatalf("%s/%s: %v", guidesDir, name, err)
	}
	v, ok := obj[key]
	if !ok {
		t.Fatalf("%s/%s: no %s", guidesDir, name, key)
	}
	return v
}

// configMap decodes a ConfigMap file strictly and returns its data under
// key.
func configMap(t testing.TB, name, key string) (*corev1.ConfigMap, string) {
	t.Helper()
	var cm corev1.ConfigMap
	decodeStrict(t, name, guide(t, name), &cm)
	if cm.APIVersion != "v1" || cm.Kind != "ConfigMap" {
		t.Fatalf("%s/%s: %s %s, want v1 ConfigMap", guidesDir, name, cm.APIVersion, cm.Kind)
	}
	v, ok := cm.Data[key]
	if !ok {
		t.Fatalf("%s/%s: no data key %q", guidesDir, name, key)
	}
	return &cm, v
}

// limits loads a guide's limits ConfigMap as envoy-rls loads the directory
// the ConfigMap is mounted at, and returns its one domain's name.
func limits(t testing.TB, name string) (*config.Config, string) {
	t.Helper()
	cm, data := configMap(t, name, limitsKey)
	if cm.Namespace != rlsNamespace {
		t.Errorf("%s/%s: namespace %q, want %q (envoy-rls's, where the pod mounts it)", guidesDir, name, cm.Namespace, rlsNamespace)
	}
	if len(cm.Data) != 1 {
		t.Errorf("%s/%s: %d data keys, want only %s", guidesDir, name, len(cm.Data), limitsKey)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, limitsKey), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(dir)
	if err != nil {
		t.Fatalf("%s/%s: %v", guidesDir, name, err)
	}
	if len(c.Domains) != 1 {
		t.Fatalf("%s/%s: %d domains, want 1", guidesDir, name, len(c.Domains))
	}
	for d := range c.Domains {
		return c, d
	}
	panic("unreachable")
}

// flagDefault is the default of one of envoy-rls's flags, from the server's
// own flag table.
func flagDefault(t testing.TB, name string) string {
	t.Helper()
	for _, f := range server.CommandLine(server.Help{}).Flags() {
		if f.Name == name {
			return f.Default
		}
	}
	t.Fatalf("envoy-rls has no flag -%s", name)
	return ""
}

// grpcPort is the port of -grpc-addr's default, where the guides' Envoys
// call envoy-rls.
func grpcPort(t testing.TB) uint32 {
	t.Helper()
	_, p, err := net.SplitHostPort(flagDefault(t, "grpc-addr"))
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		t.Fatal(err)
	}
	return uint32(n)
}

// storeTimeout is -store-timeout's default: the longest envoy-rls waits for
// Redis before its failure mode answers. Envoy's timeout must be longer, or
// Envoy's own failure mode answers first.
func storeTimeout(t testing.TB) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(flagDefault(t, "store-timeout"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}
