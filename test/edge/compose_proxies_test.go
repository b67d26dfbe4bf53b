package edge

import (
	"io"
	"net"
	"path"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/envoy-rls/envoy-rls/examples/layered/app"
	"github.com/envoy-rls/envoy-rls/internal/forwardauth"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

const (
	nginxConfPath       = "config/nginx/forward-auth.conf"
	caddyfilePath       = "config/Caddyfile"
	forwardAuthPath     = "config/forward-auth.yaml"
	nginxService        = "nginx"
	caddyService        = "caddy"
	nginxTemplateSuffix = ".template" // the nginx image entrypoint's
)

// proxyEdges are the compose services that run the edge with nginx or
// Caddy, each under a profile of its own name, and their host ports.
var proxyEdges = map[string]string{nginxService: "10001", caddyService: "10002"}

// TestComposeProfiles: a plain `docker compose up` runs the Envoy edge
// only; nginx and Caddy come with --profile nginx and --profile caddy, on
// host ports of their own.
func TestComposeProfiles(t *testing.T) {
	services := loadCompose(t)
	for name, s := range services {
		hostPort, isProxy := proxyEdges[name]
		if !isProxy {
			if len(s.Profiles) != 0 {
				t.Errorf("%s: %s has profiles %q: a plain `docker compose up` would not start it", composePath, name, s.Profiles)
			}
			continue
		}
		if !slices.Equal(s.Profiles, []string{name}) {
			t.Errorf("%s: %s has profiles %q, want [%s]: a plain `up` must leave it out", composePath, name, s.Profiles, name)
		}
		if !slices.ContainsFunc(s.Ports, func(p string) bool { return fixedHostPort(p) == hostPort }) {
			t.Errorf("%s: %s publishes %q, not host port %s (the docs')", composePath, name, s.Ports, hostPort)
		}
	}
	for name := range proxyEdges {
		if _, ok := services[name]; !ok {
			t.Errorf("%s: no service %q", composePath, name)
		}
	}
}

// checkProxyUpstreams: the proxy asks envoy-rls's HTTP port (its
// -http-addr default, where forward-auth is served) and forwards to the
// app where it listens, both by compose service name.
func checkProxyUpstreams(t *testing.T, name string, services map[string]composeService) {
	t.Helper()
	env := services[name].Environment
	httpPort := defaultPort(t, flagDefaults(t), "http-addr")
	if want := net.JoinHostPort(rlsCluster, strconv.Itoa(int(httpPort))); env["RLS_ADDR"] != want {
		t.Errorf("%s: %s RLS_ADDR %q, want %s (envoy-rls's -http-addr)", composePath, name, env["RLS_ADDR"], want)
	}
	cfg, err := app.ParseFlags(services[appCluster].Command, io.Discard)
	if err != nil {
		t.Fatalf("%s: app command: %v", composePath, err)
	}
	if want := net.JoinHostPort(appCluster, strconv.Itoa(int(port(t, cfg.Listen)))); env["APP_ADDR"] != want {
		t.Errorf("%s: %s APP_ADDR %q, want %s (the app's -listen)", composePath, name, env["APP_ADDR"], want)
	}
	deps := dependsOn(t, name)
	for _, dep := range []string{rlsCluster, appCluster} {
		if !slices.Contains(deps, dep) {
			t.Errorf("%s: %s does not depend on %s: its name may not resolve when %s starts", composePath, name, dep, name)
		}
	}
}

// dependsOn lists a service's depends_on, in either of compose's forms.
func dependsOn(t *testing.T, name string) []string {
	t.Helper()
	var c struct {
		Services map[string]struct {
			DependsOn yaml.Node `yaml:"depends_on"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(readRepoFile(t, composePath), &c); err != nil {
		t.Fatal(err)
	}
	n := c.Services[name].DependsOn
	var out []string
	for i, child := range n.Content {
		if n.Kind == yaml.SequenceNode || i%2 == 0 {
			out = append(out, child.Value)
		}
	}
	return out
}

// checkPlaceholders: every placeholder the file's configuration (not its
// comments, which may show the syntax) names is in the service's
// environment. It returns their names.
func checkPlaceholders(t *testing.T, name, file string, placeholder *regexp.Regexp, env map[string]string) []string {
	t.Helper()
	var conf strings.Builder
	for _, l := range strings.Split(string(readRepoFile(t, file)), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			conf.WriteString(l + "\n")
		}
	}
	var names []string
	for _, m := range placeholder.FindAllStringSubmatch(conf.String(), -1) {
		if !slices.Contains(names, m[1]) {
			names = append(names, m[1])
		}
	}
	if len(names) == 0 {
		t.Fatalf("%s: no placeholders found; this test checks nothing", file)
	}
	for _, n := range names {
		if _, ok := env[n]; !ok {
			t.Errorf("%s: %s's environment lacks %s, a placeholder of %s", composePath, name, n, file)
		}
	}
	return names
}

// checkListenPublished: the service publishes the port the proxy listens on.
func checkListenPublished(t *testing.T, name, listen string) {
	t.Helper()
	if _, p, err := net.SplitHostPort(listen); err == nil {
		listen = p
	}
	p, err := strconv.ParseUint(listen, 10, 16)
	if err != nil {
		t.Fatalf("%s: %s listens on %q: %v", composePath, name, listen, err)
	}
	if ports := containerPorts(t, loadCompose(t)[name]); !slices.Contains(ports, uint32(p)) {
		t.Errorf("%s: %s listens on %d but publishes %v", composePath, name, p, ports)
	}
}

// TestComposeNginx: nginx runs config/nginx/forward-auth.conf as it is,
// rendered by the official image's entrypoint into /etc/nginx/nginx.conf
// with every placeholder given (and nothing else substituted), its
// temporary directories' parent present, and the right upstreams.
func TestComposeNginx(t *testing.T) {
	services := loadCompose(t)
	s := services[nginxService]
	if !regexp.MustCompile(`^nginx:1\.2\d\.\d+$`).MatchString(s.Image) {
		t.Errorf("%s: nginx image %q, want an official nginx:1.2x.y tag", composePath, s.Image)
	}
	out := s.Environment["NGINX_ENVSUBST_OUTPUT_DIR"]
	var rendered string
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 && path.Clean(parts[0]) == nginxConfPath {
			rel, ok := strings.CutPrefix(path.Clean(parts[1]), "/etc/nginx/templates/")
			if ok && strings.HasSuffix(rel, nginxTemplateSuffix) {
				rendered = path.Join(out, strings.TrimSuffix(rel, nginxTemplateSuffix))
			}
		}
	}
	if rendered != "/etc/nginx/nginx.conf" {
		t.Errorf("%s: nginx renders %s to %q, want /etc/nginx/nginx.conf (a template under /etc/nginx/templates, NGINX_ENVSUBST_OUTPUT_DIR /etc/nginx)", composePath, nginxConfPath, rendered)
	}
	names := checkPlaceholders(t, nginxService, nginxConfPath, regexp.MustCompile(`\$\{([A-Z_]+)\}`), s.Environment)
	filter := regexp.MustCompile(s.Environment["NGINX_ENVSUBST_FILTER"])
	for _, n := range names {
		if !filter.MatchString(n) {
			t.Errorf("%s: NGINX_ENVSUBST_FILTER %q leaves %s unsubstituted", composePath, filter, n)
		}
	}
	for _, v := range []string{"HOSTNAME", "PATH", "HOME", "NGINX_VERSION"} {
		if filter.MatchString(v) {
			t.Errorf("%s: NGINX_ENVSUBST_FILTER %q matches %s, which is no placeholder", composePath, filter, v)
		}
	}
	checkListenPublished(t, nginxService, s.Environment["LISTEN"])
	checkNginxTempPaths(t, s)
	checkProxyUpstreams(t, nginxService, services)
}

// checkNginxTempPaths: nginx creates a temporary path's last directory
// only, so the parent of each relative one (under the image's prefix,
// /etc/nginx) must be a mount.
func checkNginxTempPaths(t *testing.T, s composeService) {
	t.Helper()
	tempPath := regexp.MustCompile(`(?m)^\s*\w+_temp_path\s+([^\s;]+)`)
	matches := tempPath.FindAllStringSubmatch(string(readRepoFile(t, nginxConfPath)), -1)
	if len(matches) == 0 {
		t.Fatalf("%s: no *_temp_path; this check checks nothing", nginxConfPath)
	}
	var mounts []string
	mounts = append(mounts, s.Tmpfs...)
	for _, v := range s.Volumes {
		if parts := strings.Split(v, ":"); len(parts) >= 2 {
			mounts = append(mounts, parts[1])
		}
	}
	for _, m := range matches {
		p := m[1]
		if !path.IsAbs(p) {
			p = path.Join("/etc/nginx", p)
		}
		if dir := path.Dir(p); !slices.Contains(mounts, dir) {
			t.Errorf("%s: nginx's %s is under %s, which is no mount (%q): nginx would not start", composePath, p, dir, mounts)
			mounts = append(mounts, dir) // reported once
		}
	}
}

// TestComposeCaddy: Caddy runs config/Caddyfile as it is, at the path of
// the image's command, with every placeholder given and the right
// upstreams.
func TestComposeCaddy(t *testing.T) {
	services := loadCompose(t)
	s := services[caddyService]
	if !regexp.MustCompile(`^caddy:2\.\d+\.\d+$`).MatchString(s.Image) {
		t.Errorf("%s: caddy image %q, want an official caddy:2.x.y tag", composePath, s.Image)
	}
	if src, ok := hostPath(t, s, "/etc/caddy/Caddyfile"); !ok || !sameFile(t, src, repoFile(t, caddyfilePath)) {
		t.Errorf("%s: /etc/caddy/Caddyfile (the image's --config) is not a mount of %s (volumes %q)", composePath, caddyfilePath, s.Volumes)
	}
	checkPlaceholders(t, caddyService, caddyfilePath, regexp.MustCompile(`\{\$([A-Z_]+)(?::[^}]*)?\}`), s.Environment)
	checkListenPublished(t, caddyService, s.Environment["PORT"])
	checkProxyUpstreams(t, caddyService, services)
}

// TestComposeForwardAuth: envoy-rls in compose serves forward-auth from a
// file that parses, whose policies are config/forward-auth.yaml's (only
// trusted_proxies differ), whose domains are in the limits it loads, and
// which has the policy nginx and Caddy call.
func TestComposeForwardAuth(t *testing.T) {
	s := loadCompose(t)[rlsCluster]
	file, ok := flagValue(s.Command, "forward-auth-config")
	if !ok {
		t.Fatalf("%s: %s has no -forward-auth-config: nginx and Caddy would get 404s", composePath, rlsCluster)
	}
	src, ok := hostPath(t, s, file)
	if !ok {
		t.Fatalf("%s: -forward-auth-config %s is not in a mount (volumes %q)", composePath, file, s.Volumes)
	}
	fa, err := forwardauth.Parse(src, readRepoFile(t, relPath(t, src)))
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := flagValue(s.Command, "config")
	layers, _ := hostPath(t, s, cfg)
	limits, err := config.Load(layers)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range fa.Policies() {
		if limits.Domains[p.Domain] == nil {
			t.Errorf("%s: policy %s asks domain %q, which %s (compose's -config) lacks", file, p.Name, p.Domain, layersDirPath)
		}
	}
	call := regexp.MustCompile(`/v1/forward-auth/([A-Za-z0-9_-]+)`)
	for _, proxy := range []string{nginxConfPath, caddyfilePath} {
		m := call.FindStringSubmatch(string(readRepoFile(t, proxy)))
		if m == nil || fa.Policy(m[1]) == nil {
			t.Errorf("%s calls %v, which %s does not serve", proxy, m, file)
		}
	}
	if a, b := policiesOf(t, relPath(t, src)), policiesOf(t, forwardAuthPath); !reflect.DeepEqual(a, b) {
		t.Errorf("%s's policies differ from %s's: the nginx and Caddy edges would limit otherwise than the docs say", relPath(t, src), forwardAuthPath)
	}
}

// relPath is a repository file's path relative to the repository.
func relPath(t *testing.T, abs string) string {
	t.Helper()
	rel, ok := strings.CutPrefix(abs, root(t)+"/")
	if !ok {
		t.Fatalf("%s is outside the repository", abs)
	}
	return rel
}

// policiesOf is a forward-auth file's policies, as plain YAML values.
func policiesOf(t *testing.T, rel string) any {
	t.Helper()
	var f struct {
		Policies any `yaml:"policies"`
	}
	if err := yaml.Unmarshal(readRepoFile(t, rel), &f); err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	return f.Policies
}
