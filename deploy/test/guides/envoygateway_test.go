package guides

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	"sigs.k8s.io/yaml"

	"github.com/envoy-rls/envoy-rls/internal/dropin"
	"github.com/envoy-rls/envoy-rls/internal/server"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

const (
	egConfigFile = "envoy-gateway-config.yaml"
	egPolicyFile = "envoy-gateway-ratelimit.yaml"
)

// loadEnvoyGateway decodes Envoy Gateway's configuration file from its
// ConfigMap, strictly, with Envoy Gateway's own type.
func loadEnvoyGateway(t *testing.T) *egv1a1.EnvoyGateway {
	t.Helper()
	cm, data := configMap(t, egConfigFile, "envoy-gateway.yaml")
	if cm.Name != "envoy-gateway-config" || cm.Namespace != "envoy-gateway-system" {
		t.Errorf("%s: ConfigMap %s/%s, want envoy-gateway-system/envoy-gateway-config (the one Envoy Gateway reads)", egConfigFile, cm.Namespace, cm.Name)
	}
	var eg egv1a1.EnvoyGateway
	decodeStrict(t, egConfigFile, []byte(data), &eg)
	if eg.APIVersion != "gateway.envoyproxy.io/v1alpha1" || eg.Kind != "EnvoyGateway" {
		t.Fatalf("%s: %s %s, want gateway.envoyproxy.io/v1alpha1 EnvoyGateway", egConfigFile, eg.APIVersion, eg.Kind)
	}
	return &eg
}

// TestEnvoyGatewayImageSwap: the rate limit Deployment's image is swapped
// and nothing else of the Deployment Envoy Gateway makes (no command, so
// /bin/ratelimit runs, the drop-in); global rate limiting is on with a
// Redis backend.
func TestEnvoyGatewayImageSwap(t *testing.T) {
	eg := loadEnvoyGateway(t)
	k := eg.Provider
	if k == nil || k.Type != egv1a1.ProviderTypeKubernetes || k.Kubernetes == nil || k.Kubernetes.RateLimitDeployment == nil {
		t.Fatalf("%s: no provider.kubernetes.rateLimitDeployment", egConfigFile)
	}
	c := k.Kubernetes.RateLimitDeployment.Container
	if c == nil || c.Image == nil || *c.Image == "" || strings.Contains(*c.Image, "envoyproxy/ratelimit") {
		t.Errorf("%s: rateLimitDeployment.container.image is not envoy-rls's: %v", egConfigFile, c)
	}
	rl := eg.RateLimit
	if rl == nil || rl.Backend.Type != egv1a1.RedisBackendType || rl.Backend.Redis == nil || rl.Backend.Redis.URL == nil {
		t.Fatalf("%s: rateLimit.backend is not a Redis URL: global rate limiting stays off", egConfigFile)
	}
}

// TestEnvoyGatewayEnvironment: what the envoy-rls container gets, Envoy
// Gateway's environment for a Redis backend (REDIS_SOCKET_TYPE, REDIS_URL
// from rateLimit.backend.redis.url, as its Deployment sets them) and the
// guide's env, is read by envoy-rls under /bin/ratelimit without an error,
// and every RLS_ variable of the guide is a flag's twin.
func TestEnvoyGatewayEnvironment(t *testing.T) {
	eg := loadEnvoyGateway(t)
	env := map[string]string{
		"REDIS_SOCKET_TYPE": "tcp",
		"REDIS_URL":         *eg.RateLimit.Backend.Redis.URL,
		"USE_STATSD":        "false",
	}
	var environ []string
	for _, e := range eg.Provider.Kubernetes.RateLimitDeployment.Container.Env {
		if e.ValueFrom != nil {
			t.Errorf("%s: env %s from a reference: give the value, or the test cannot check it", egConfigFile, e.Name)
		}
		env[e.Name] = e.Value
		environ = append(environ, e.Name+"="+e.Value)
	}
	cl := server.CommandLine(server.Help{})
	for _, w := range cl.UnknownTwins(environ) {
		t.Errorf("%s: %s", egConfigFile, w)
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	translated, err := dropin.Environment(lookup, cl)
	if err != nil {
		t.Fatalf("%s: envoy-rls as /bin/ratelimit refuses the environment: %v", egConfigFile, err)
	}
	if _, err := server.ParseFlags(nil, translated, server.Help{}); err != nil {
		t.Errorf("%s: envoy-rls as /bin/ratelimit refuses the environment: %v", egConfigFile, err)
	}
}

// TestEnvoyGatewayPolicy: the BackendTrafficPolicy decodes strictly with
// Envoy Gateway's type, targets a Gateway API route, and asks for global
// limits in units envoy-rls counts in. Envoy Gateway makes the route
// actions and the limits from it and sends the limits over xDS, so there
// is no limits file to match them against.
func TestEnvoyGatewayPolicy(t *testing.T) {
	var p egv1a1.BackendTrafficPolicy
	decodeStrict(t, egPolicyFile, guide(t, egPolicyFile), &p)
	if p.APIVersion != "gateway.envoyproxy.io/v1alpha1" || p.Kind != "BackendTrafficPolicy" {
		t.Fatalf("%s: %s %s, want gateway.envoyproxy.io/v1alpha1 BackendTrafficPolicy", egPolicyFile, p.APIVersion, p.Kind)
	}
	if len(p.Spec.TargetRefs) == 0 {
		t.Errorf("%s: no targetRefs", egPolicyFile)
	}
	for _, r := range p.Spec.TargetRefs {
		if r.Group != "gateway.networking.k8s.io" {
			t.Errorf("%s: targetRef group %q, want gateway.networking.k8s.io", egPolicyFile, r.Group)
		}
	}
	if p.Spec.RateLimit == nil || p.Spec.RateLimit.Global == nil || len(p.Spec.RateLimit.Global.Rules) == 0 {
		t.Fatalf("%s: no rateLimit.global.rules", egPolicyFile)
	}
	for i, r := range p.Spec.RateLimit.Global.Rules {
		if _, err := config.ParseUnit(strings.ToLower(string(r.Limit.Unit))); err != nil {
			t.Errorf("%s: rules[%d]: unit %q: envoy-rls: %v", egPolicyFile, i, r.Limit.Unit, err)
		}
		if r.Limit.Requests == 0 {
			t.Errorf("%s: rules[%d]: 0 requests refuses every request", egPolicyFile, i)
		}
	}
}

// TestMigratingEnvoyGateway: the EnvoyGateway configuration that
// docs/migrating.md shows for the image swap decodes strictly with Envoy
// Gateway's types too, and swaps the image the same way as the guide.
func TestMigratingEnvoyGateway(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(root(t), "docs", "migrating.md"))
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	for _, part := range strings.Split(string(doc), "```yaml\n")[1:] {
		block, _, ok := strings.Cut(part, "```")
		if ok && strings.Contains(block, "kind: EnvoyGateway") {
			blocks = append(blocks, block)
		}
	}
	if len(blocks) != 1 {
		t.Fatalf("docs/migrating.md: %d yaml blocks of kind EnvoyGateway, want 1", len(blocks))
	}
	var eg egv1a1.EnvoyGateway
	if err := yaml.UnmarshalStrict([]byte(blocks[0]), &eg); err != nil {
		t.Fatalf("docs/migrating.md: the EnvoyGateway block: %v", err)
	}
	if eg.Provider == nil || eg.Provider.Kubernetes == nil || eg.Provider.Kubernetes.RateLimitDeployment == nil {
		t.Fatalf("docs/migrating.md: no provider.kubernetes.rateLimitDeployment")
	}
	c := eg.Provider.Kubernetes.RateLimitDeployment.Container
	if c == nil || c.Image == nil || !strings.Contains(*c.Image, "envoy-rls") {
		t.Errorf("docs/migrating.md: rateLimitDeployment.container.image is not envoy-rls's: %v", c)
	}
	if eg.RateLimit == nil || eg.RateLimit.Backend.Type != egv1a1.RedisBackendType || eg.RateLimit.Backend.Redis == nil || eg.RateLimit.Backend.Redis.URL == nil {
		t.Errorf("docs/migrating.md: rateLimit.backend is not a Redis URL")
	}
}
