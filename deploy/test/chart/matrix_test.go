package chart

import (
	"net"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/lint/support"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// matrixCase is a set of values and what the container must then be
// given: flags with their values, and RLS_ variables from Secrets.
type matrixCase struct {
	name   string
	values string
	args   map[string]string
	env    []string
	kinds  []string
}

var matrix = []matrixCase{
	{name: "defaults", args: map[string]string{"config": "/etc/envoy-rls/limits", "failure-mode": "allow"},
		kinds: []string{"ServiceAccount", "ConfigMap", "Service", "Deployment"}},
	{name: "limits as text", values: "limits: |\n  domain: text\n  descriptors:\n    - key: k\n      rate_limit: {unit: minute, requests_per_unit: 5}\n"},
	{name: "redis url with credentials", values: "replicaCount: 3\nredis:\n  url: redis://redis:6379/0\n  auth: {existingSecret: redis, usernameKey: redis-username}\n",
		args: map[string]string{"redis-url": "redis://redis:6379/0", "redis-key-prefix": "rls:"},
		env:  []string{"RLS_REDIS_PASSWORD", "RLS_REDIS_USERNAME"}},
	{name: "sentinel", values: "redis:\n  sentinel: {addrs: [s-0:26379, s-1:26379], master: mymaster, existingSecret: sentinel}\n  auth: {existingSecret: redis}\n",
		args: map[string]string{"redis-sentinel": "s-0:26379,s-1:26379", "redis-sentinel-master": "mymaster"},
		env:  []string{"RLS_REDIS_PASSWORD", "RLS_REDIS_SENTINEL_PASSWORD"}},
	{name: "cluster with TLS", values: "redis:\n  cluster: {addrs: [c-0:6379, c-1:6379, c-2:6379]}\n  tls: {enabled: true, existingSecret: redis-tls, certKey: tls.crt, keyKey: tls.key, skipHostname: true}\n",
		args: map[string]string{"redis-cluster": "c-0:6379,c-1:6379,c-2:6379", "redis-tls": "true", "redis-tls-ca": "/etc/envoy-rls/redis-tls/ca.crt",
			"redis-tls-cert": "/etc/envoy-rls/redis-tls/tls.crt", "redis-tls-key": "/etc/envoy-rls/redis-tls/tls.key", "redis-tls-skip-hostname": "true"}},
	{name: "gRPC mutual TLS", values: "grpc:\n  tls: {enabled: true, existingSecret: grpc-tls, clientCA: true, clientSAN: envoy.example}\n",
		args: map[string]string{"grpc-tls-cert": "/etc/envoy-rls/grpc-tls/tls.crt", "grpc-tls-key": "/etc/envoy-rls/grpc-tls/tls.key",
			"grpc-tls-client-ca": "/etc/envoy-rls/grpc-tls/ca.crt", "grpc-tls-client-san": "envoy.example"}},
	{name: "autoscaling", values: "redis: {url: 'redis:6379'}\nautoscaling: {enabled: true}\npodDisruptionBudget: {enabled: true}\n",
		kinds: []string{"ServiceAccount", "ConfigMap", "Service", "Deployment", "HorizontalPodAutoscaler", "PodDisruptionBudget"}},
	{name: "existing ConfigMap", values: "existingConfigMap: my-limits\nserviceAccount: {create: false}\n", kinds: []string{"Service", "Deployment"}},
	{name: "ServiceMonitor and NetworkPolicy", values: "serviceMonitor: {enabled: true, labels: {release: prom}}\nnetworkPolicy:\n  enabled: true\n  grpcFrom: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: gateway}}}]\n",
		kinds: []string{"NetworkPolicy", "ServiceAccount", "ConfigMap", "Service", "Deployment", "ServiceMonitor"}},
	{name: "embedded, several pods accepted", values: "replicaCount: 2\nacceptPerInstanceLimits: true\npodDisruptionBudget: {enabled: true, minAvailable: 1}\nextraArgs: [-shadow-mode]\nextraEnv: [{name: RLS_LOG_LEVEL, value: debug}]\n",
		args: map[string]string{"shadow-mode": "true"}},
	{name: "other ports", values: "grpc: {port: 9091}\nhttp: {port: 9090}\n", args: map[string]string{"grpc-addr": ":9091", "http-addr": ":9090"}},
}

// TestRenderMatrix renders and lints the chart over the matrix, decodes
// every object strictly, and checks the container against the flag table.
func TestRenderMatrix(t *testing.T) {
	flags := flagTable(t)
	for _, c := range matrix {
		t.Run(c.name, func(t *testing.T) {
			vals := values(t, c.values)
			lintChart(t, vals)
			o := decode(t, render(t, vals))
			if c.kinds != nil && !slices.Equal(slices.Sorted(slices.Values(o.kinds)), slices.Sorted(slices.Values(c.kinds))) {
				t.Errorf("objects %v, want %v", o.kinds, c.kinds)
			}
			args := checkContainer(t, o, flags)
			for name, want := range c.args {
				if got, ok := args[name]; !ok || got != want {
					t.Errorf("-%s=%q (given: %v), want %q", name, got, ok, want)
				}
			}
			for _, name := range c.env {
				if !slices.ContainsFunc(o.container(t).Env, func(e corev1.EnvVar) bool {
					return e.Name == name && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil
				}) {
					t.Errorf("no %s from a Secret in %v", name, o.container(t).Env)
				}
			}
			checkWiring(t, o)
		})
	}
}

// lintChart lints the chart with the values as `helm lint` does; any
// message above INFO fails.
func lintChart(t *testing.T, vals map[string]any) {
	t.Helper()
	res := action.NewLint().Run([]string{chartDir(t)}, vals)
	for _, m := range res.Messages {
		if m.Severity > support.InfoSev {
			t.Errorf("helm lint: %s", m)
		}
	}
	for _, err := range res.Errors {
		t.Errorf("helm lint: %v", err)
	}
}

// checkContainer checks the container against the binary: flags and
// variables of the table, ports of -grpc-addr and -http-addr, probes on
// the HTTP port's /healthz, paths under read-only mounts, a locked-down
// security context. It returns the parsed flags.
func checkContainer(t *testing.T, o objects, flags map[string]binFlag) map[string]string {
	t.Helper()
	c := o.container(t)
	args := parsedArgs(t, flags, c.Args)
	twins := envTwins(flags)
	for _, e := range c.Env {
		if _, ok := twins[e.Name]; !ok {
			t.Errorf("variable %s is no RLS_ twin of docs/flags.md", e.Name)
		}
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	for name, flagName := range map[string]string{"grpc": "grpc-addr", "http": "http-addr"} {
		if got := listenPort(t, args[flagName], flags[flagName].def); got != ports[name] {
			t.Errorf("port %s is %d, but -%s listens on %d", name, ports[name], flagName, got)
		}
	}
	if !strings.Contains(flags["http-addr"].meaning, "/healthz") {
		t.Errorf("-http-addr no longer serves /healthz: %q", flags["http-addr"].meaning)
	}
	for name, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || p.HTTPGet.Port != intstr.FromString("http") {
			t.Errorf("%s probe %+v, want GET /healthz on port http", name, p)
		} else if p.TimeoutSeconds <= 1 {
			t.Errorf("%s probe times out in %ds, no longer than /healthz's own 1s ping of Redis", name, p.TimeoutSeconds)
		}
	}
	if grace, drain := o.deployment.Spec.Template.Spec.TerminationGracePeriodSeconds, flagDuration(t, args, flags, "shutdown-timeout"); grace == nil || time.Duration(*grace)*time.Second <= drain {
		t.Errorf("terminationGracePeriodSeconds %v is not longer than -shutdown-timeout's drain, %v", grace, drain)
	}
	checkMountedPaths(t, o, args)
	checkSecurity(t, o)
	return args
}

// flagDuration is the duration flag name is given, or its default.
func flagDuration(t *testing.T, args map[string]string, flags map[string]binFlag, name string) time.Duration {
	t.Helper()
	v, ok := args[name]
	if !ok {
		v = flags[name].def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("-%s=%q: %v", name, v, err)
	}
	return d
}

// listenPort is the port of a listen address (addr, or the flag's default
// when the chart does not give it).
func listenPort(t *testing.T, addr, def string) int32 {
	t.Helper()
	if addr == "" {
		addr = def
	}
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("listen address %q: %v", addr, err)
	}
	n, err := net.LookupPort("tcp", p)
	if err != nil {
		t.Fatalf("listen address %q: %v", addr, err)
	}
	return int32(n)
}

// checkMountedPaths checks that every absolute path a flag names lies in a
// read-only mount of a volume of the pod, and that -config is the limits
// ConfigMap's.
func checkMountedPaths(t *testing.T, o objects, args map[string]string) {
	t.Helper()
	c := o.container(t)
	vols := map[string]corev1.Volume{}
	for _, v := range o.deployment.Spec.Template.Spec.Volumes {
		vols[v.Name] = v
	}
	for name, v := range args {
		if !strings.HasPrefix(v, "/") {
			continue
		}
		m, ok := mountOf(c, v)
		if !ok {
			t.Errorf("-%s=%s is in no mounted volume", name, v)
			continue
		}
		if !m.ReadOnly {
			t.Errorf("mount %s of -%s is writable", m.MountPath, name)
		}
		vol, ok := vols[m.Name]
		if !ok {
			t.Errorf("mount %s names no volume %q", m.MountPath, m.Name)
		}
		if name == "config" {
			want := o.deployment.Name
			if o.configMap != nil {
				want = o.configMap.Name
			}
			if vol.ConfigMap == nil || (o.configMap != nil && vol.ConfigMap.Name != want) {
				t.Errorf("-config=%s is not the limits ConfigMap %s: %+v", v, want, vol)
			}
		}
	}
}

func mountOf(c corev1.Container, p string) (corev1.VolumeMount, bool) {
	for _, m := range c.VolumeMounts {
		if rel, ok := strings.CutPrefix(path.Clean(p), m.MountPath); ok && (rel == "" || strings.HasPrefix(rel, "/")) {
			return m, true
		}
	}
	return corev1.VolumeMount{}, false
}

// checkSecurity checks the pod against Envoy Gateway's bar: uid and gid
// 65534, non-root, read-only root, no capability, no escalation, the
// runtime's seccomp profile.
func checkSecurity(t *testing.T, o objects) {
	t.Helper()
	s := o.container(t).SecurityContext
	switch {
	case s == nil, s.RunAsUser == nil || *s.RunAsUser != 65534, s.RunAsGroup == nil || *s.RunAsGroup != 65534,
		s.RunAsNonRoot == nil || !*s.RunAsNonRoot, s.ReadOnlyRootFilesystem == nil || !*s.ReadOnlyRootFilesystem,
		s.AllowPrivilegeEscalation == nil || *s.AllowPrivilegeEscalation,
		s.Capabilities == nil || !slices.Equal(s.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(s.Capabilities.Add) > 0,
		s.SeccompProfile == nil || s.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Errorf("container security context %+v is not locked down", s)
	}
	if p := o.deployment.Spec.Template.Spec.SecurityContext; p == nil || p.RunAsNonRoot == nil || !*p.RunAsNonRoot {
		t.Errorf("pod security context %+v does not require a non-root user", p)
	}
}
