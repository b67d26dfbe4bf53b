package chart

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite deploy/kubernetes/ from the chart")

// manifests are the files of deploy/kubernetes/: the chart rendered for
// the common cases, for kubectl apply.
var manifests = []struct {
	file, set, values string
}{
	{"envoy-rls.yaml", "", ""},
	{"envoy-rls-redis.yaml",
		"--set redis.url=redis://redis:6379 --set replicaCount=3 --set autoscaling.enabled=true --set autoscaling.minReplicas=3 --set podDisruptionBudget.enabled=true",
		"redis: {url: 'redis://redis:6379'}\nreplicaCount: 3\nautoscaling: {enabled: true, minReplicas: 3}\npodDisruptionBudget: {enabled: true}\n"},
}

// TestManifests: each file of deploy/kubernetes/ is the chart's output for
// its values; `go generate ./...` in deploy/test (or go test -update)
// rewrites them.
func TestManifests(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "deploy", "kubernetes")
	for _, m := range manifests {
		want := manifestHeader(m.set) + render(t, values(t, m.values))
		path := filepath.Join(dir, m.file)
		if *update {
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got := readFile(t, path)
		if string(got) != want {
			t.Errorf("%s is not the chart's output: run `go generate ./...` in deploy/test", path)
		}
		decode(t, string(got))
	}
}

// manifestHeader says where a file comes from and how to make it anew.
func manifestHeader(set string) string {
	cmd := "helm template envoy-rls charts/envoy-rls --namespace default"
	if set != "" {
		cmd += " " + set
	}
	return "# Generated from charts/envoy-rls: do not edit. The same as\n#   " + cmd +
		"\n# (go generate ./... in deploy/test writes it anew; its test checks it).\n# Apply it with kubectl apply -n default -f FILE.\n"
}

// TestAppVersion: the chart's appVersion, which tags the image it runs,
// is the binary's release (cmd/envoy-rls/version.go).
func TestAppVersion(t *testing.T) {
	m := regexp.MustCompile(`(?m)^const release = "([^"]+)"$`).FindSubmatch(readFile(t, filepath.Join(repoRoot(t), "cmd", "envoy-rls", "version.go")))
	if m == nil {
		t.Fatal("cmd/envoy-rls/version.go: no release constant")
	}
	if got := loadChart(t).Metadata.AppVersion; got != string(m[1]) {
		t.Errorf("Chart.yaml appVersion %q, the binary's release %q", got, m[1])
	}
}

// TestNotes: what helm install prints names the Service's gRPC address and
// says that an update of the limits needs no restart.
func TestNotes(t *testing.T) {
	rel, err := renderRelease(t, values(t, "redis: {url: 'redis:6379'}\nreplicaCount: 2\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"envoy-rls.default.svc:8081", "Store: url.", "with no restart", "no checksum"} {
		if !strings.Contains(rel.Info.Notes, want) {
			t.Errorf("NOTES.txt lacks %q:\n%s", want, rel.Info.Notes)
		}
	}
}

// TestLimitsUpdateRestartsNothing: a helm upgrade that changes only the
// limits changes the ConfigMap and leaves the pod template as it was, so
// that no pod is rolled (the running ones reload the mounted files, which
// TestPodEmbedded checks).
func TestLimitsUpdateRestartsNothing(t *testing.T) {
	before := decode(t, render(t, values(t, limitsValues)))
	after := decode(t, render(t, values(t, strings.Replace(limitsValues, "requests_per_unit: 2", "requests_per_unit: 9", 1))))
	if reflect.DeepEqual(before.configMap.Data, after.configMap.Data) {
		t.Fatal("the ConfigMap did not change with the limits")
	}
	if !reflect.DeepEqual(before.deployment.Spec.Template, after.deployment.Spec.Template) {
		t.Errorf("the pod template changed with the limits alone: the pods would be rolled\nbefore %+v\nafter  %+v",
			before.deployment.Spec.Template.ObjectMeta, after.deployment.Spec.Template.ObjectMeta)
	}
}
