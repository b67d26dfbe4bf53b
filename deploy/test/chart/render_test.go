package chart

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/release"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

// releaseName and namespace are those of every render: deploy/kubernetes/
// holds `helm template envoy-rls charts/envoy-rls` in the default
// namespace.
const (
	releaseName = "envoy-rls"
	namespace   = "default"
)

// repoRoot is the main module's directory, three up from this package.
func repoRoot(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller information")
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

func chartDir(t testing.TB) string { return filepath.Join(repoRoot(t), "charts", "envoy-rls") }

func loadChart(t testing.TB) *chart.Chart {
	t.Helper()
	c, err := loader.Load(chartDir(t))
	if err != nil {
		t.Fatalf("loading the chart: %v", err)
	}
	return c
}

// values parses a values document in YAML, as `-f values.yaml` gives it.
func values(t testing.TB, doc string) map[string]any {
	t.Helper()
	v, err := chartutil.ReadValues([]byte(doc))
	if err != nil {
		t.Fatalf("values %q: %v", doc, err)
	}
	return v.AsMap()
}

// renderErr renders the chart as `helm template` does (an install, dry
// run, client only: the schema is validated and the templates' fails
// apply) and returns the manifest.
func renderErr(t testing.TB, vals map[string]any) (string, error) {
	t.Helper()
	rel, err := renderRelease(t, vals)
	if err != nil {
		return "", err
	}
	return rel.Manifest, nil
}

// renderRelease is renderErr's release, its notes with it.
func renderRelease(t testing.TB, vals map[string]any) (*release.Release, error) {
	t.Helper()
	inst := action.NewInstall(&action.Configuration{})
	inst.DryRun = true
	inst.ClientOnly = true
	inst.Replace = true
	inst.ReleaseName = releaseName
	inst.Namespace = namespace
	return inst.Run(loadChart(t), vals)
}

func render(t testing.TB, vals map[string]any) string {
	t.Helper()
	m, err := renderErr(t, vals)
	if err != nil {
		t.Fatalf("rendering the chart: %v", err)
	}
	return m
}

// objects are the objects of a manifest, each decoded strictly into its
// API type: a field the type does not have, misspelled or misplaced, fails.
type objects struct {
	deployment     *appsv1.Deployment
	service        *corev1.Service
	configMap      *corev1.ConfigMap
	serviceAccount *corev1.ServiceAccount
	hpa            *autoscalingv2.HorizontalPodAutoscaler
	pdb            *policyv1.PodDisruptionBudget
	networkPolicy  *networkingv1.NetworkPolicy
	serviceMonitor *monitoringv1.ServiceMonitor
	kinds          []string
}

func decode(t testing.TB, manifest string) objects {
	t.Helper()
	var o objects
	for _, doc := range splitDocs(manifest) {
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("object %q: %v", doc, err)
		}
		into := o.slot(meta.APIVersion + " " + meta.Kind)
		if into == nil {
			t.Fatalf("an object of an unexpected kind, %s %s:\n%s", meta.APIVersion, meta.Kind, doc)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
			t.Fatalf("%s does not decode strictly: %v\n%s", meta.Kind, err, doc)
		}
		o.kinds = append(o.kinds, meta.Kind)
	}
	if o.deployment == nil || o.service == nil {
		t.Fatalf("no Deployment or no Service among %v", o.kinds)
	}
	return o
}

// slot allocates the object of a type ("apiVersion kind") and returns a
// pointer to decode into, nil for a type the chart should not render.
func (o *objects) slot(typ string) any {
	switch typ {
	case "apps/v1 Deployment":
		return fresh(&o.deployment)
	case "v1 Service":
		return fresh(&o.service)
	case "v1 ConfigMap":
		return fresh(&o.configMap)
	case "v1 ServiceAccount":
		return fresh(&o.serviceAccount)
	case "autoscaling/v2 HorizontalPodAutoscaler":
		return fresh(&o.hpa)
	case "policy/v1 PodDisruptionBudget":
		return fresh(&o.pdb)
	case "networking.k8s.io/v1 NetworkPolicy":
		return fresh(&o.networkPolicy)
	case "monitoring.coreos.com/v1 ServiceMonitor":
		return fresh(&o.serviceMonitor)
	}
	return nil
}

// fresh sets *p to a new T and returns it.
func fresh[T any](p **T) any {
	*p = new(T)
	return *p
}

// container is the Deployment's one container.
func (o objects) container(t testing.TB) corev1.Container {
	t.Helper()
	cs := o.deployment.Spec.Template.Spec.Containers
	if len(cs) != 1 {
		t.Fatalf("%d containers, want 1", len(cs))
	}
	return cs[0]
}

// splitDocs splits a multi-document YAML manifest, dropping empty ones.
func splitDocs(manifest string) []string {
	var docs []string
	for _, d := range strings.Split("\n"+manifest, "\n---") {
		if len(bytes.TrimSpace(stripComments([]byte(d)))) > 0 {
			docs = append(docs, d)
		}
	}
	return docs
}

func stripComments(b []byte) []byte {
	var out [][]byte
	for _, l := range bytes.Split(b, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(l), []byte("#")) {
			out = append(out, l)
		}
	}
	return bytes.Join(out, []byte("\n"))
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
