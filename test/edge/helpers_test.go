package edge

import (
	"bufio"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	ratelimitfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"

	// Registered for their types: protojson resolves each typed_config's
	// "@type" in the global registry, as Envoy does in its own.
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"

	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// The names config/envoy.yaml and docker-compose.yml share.
const (
	rateLimitFilter   = "envoy.filters.http.ratelimit"
	rlsCluster        = "envoy-rls" // the gRPC cluster, and the compose service
	appCluster        = "app"       // the upstream cluster, and the compose service
	hcmFilter         = "envoy.filters.network.http_connection_manager"
	routerFilter      = "envoy.filters.http.router"
	envoyRLSPkgDir    = "internal/server" // the server's flags
	envoyYAMLPath     = "config/envoy.yaml"
	limitsYAMLPath    = "config/limits.yaml"
	appLimitsPath     = "config/limits-app.yaml"      // the layered example's domain
	layersDirPath     = "config/layers"               // both, as compose's envoy-rls loads them
	layeredDockerfile = "examples/layered/Dockerfile" // the example's image
	composePath       = "docker-compose.yml"
	dockerfilePath    = "Dockerfile"
	dockerignorePath  = ".dockerignore"
	gcpEnvoyModule    = "github.com/envoyproxy/go-control-plane/envoy"
)

// root is the module's directory: this package is test/edge.
func root(t testing.TB) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("module root: %v", err)
	}
	return dir
}

func repoFile(t testing.TB, rel string) string {
	t.Helper()
	return filepath.Join(root(t), filepath.FromSlash(rel))
}

func readRepoFile(t testing.TB, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(repoFile(t, rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// yamlToJSON decodes YAML into generic values and encodes them as JSON, the
// input protojson takes. Envoy reads YAML bootstraps the same way.
func yamlToJSON(t testing.TB, data []byte) ([]byte, any) {
	t.Helper()
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatalf("YAML: %v", err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("YAML to JSON: %v", err)
	}
	return b, v
}

// parseBootstrap parses the YAML bootstrap at rel into a Bootstrap,
// strictly: an unknown field or an unregistered "@type" is an error, as
// it is for Envoy.
func parseBootstrap(t testing.TB, rel string) *bootstrapv3.Bootstrap {
	t.Helper()
	js, _ := yamlToJSON(t, readRepoFile(t, rel))
	b := &bootstrapv3.Bootstrap{}
	if err := protojson.Unmarshal(js, b); err != nil {
		t.Fatalf("%s into Bootstrap: %v", rel, err)
	}
	return b
}

// edge is config/envoy.yaml, parsed, with the parts the tests look at.
type edge struct {
	bootstrap *bootstrapv3.Bootstrap
	raw       any // the YAML as generic values, for what protobuf cannot tell (a field set to its zero value)
	listener  *listenerv3.Listener
	hcm       *hcmv3.HttpConnectionManager
	vhost     *routev3.VirtualHost
	filter    *ratelimitfilterv3.RateLimit
	clusters  map[string]*clusterv3.Cluster
}

// loadEdge parses config/envoy.yaml into a Bootstrap, strictly: an unknown
// field or an unregistered "@type" is an error, as it is for Envoy.
func loadEdge(t testing.TB) *edge {
	t.Helper()
	js, raw := yamlToJSON(t, readRepoFile(t, envoyYAMLPath))
	e := &edge{bootstrap: &bootstrapv3.Bootstrap{}, raw: raw, clusters: map[string]*clusterv3.Cluster{}}
	if err := protojson.Unmarshal(js, e.bootstrap); err != nil {
		t.Fatalf("%s into Bootstrap: %v", envoyYAMLPath, err)
	}
	sr := e.bootstrap.GetStaticResources()
	if n := len(sr.GetListeners()); n != 1 {
		t.Fatalf("%s: %d listeners, want 1", envoyYAMLPath, n)
	}
	e.listener = sr.GetListeners()[0]
	for _, fc := range e.listener.GetFilterChains() {
		for _, f := range fc.GetFilters() {
			if f.GetName() != hcmFilter {
				continue
			}
			e.hcm = &hcmv3.HttpConnectionManager{}
			if err := f.GetTypedConfig().UnmarshalTo(e.hcm); err != nil {
				t.Fatalf("%s: %v", hcmFilter, err)
			}
		}
	}
	if e.hcm == nil {
		t.Fatalf("%s: no %s on the listener", envoyYAMLPath, hcmFilter)
	}
	if n := len(e.hcm.GetRouteConfig().GetVirtualHosts()); n != 1 {
		t.Fatalf("%s: %d virtual hosts, want 1", envoyYAMLPath, n)
	}
	e.vhost = e.hcm.GetRouteConfig().GetVirtualHosts()[0]
	for _, hf := range e.hcm.GetHttpFilters() {
		if hf.GetName() != rateLimitFilter {
			continue
		}
		e.filter = &ratelimitfilterv3.RateLimit{}
		if err := hf.GetTypedConfig().UnmarshalTo(e.filter); err != nil {
			t.Fatalf("%s: %v", rateLimitFilter, err)
		}
	}
	if e.filter == nil {
		t.Fatalf("%s: no %s in the HTTP filters", envoyYAMLPath, rateLimitFilter)
	}
	for _, c := range sr.GetClusters() {
		e.clusters[c.GetName()] = c
	}
	return e
}

// endpoint is the one address of cluster name.
func (e *edge) endpoint(t testing.TB, name string) *corev3.SocketAddress {
	t.Helper()
	c := e.clusters[name]
	if c == nil {
		t.Fatalf("%s: no cluster %q", envoyYAMLPath, name)
	}
	var addrs []*corev3.SocketAddress
	for _, le := range c.GetLoadAssignment().GetEndpoints() {
		for _, lb := range le.GetLbEndpoints() {
			addrs = append(addrs, lb.GetEndpoint().GetAddress().GetSocketAddress())
		}
	}
	if len(addrs) != 1 || addrs[0] == nil {
		t.Fatalf("%s: cluster %q has %d socket addresses, want 1", envoyYAMLPath, name, len(addrs))
	}
	return addrs[0]
}

// loadLimits loads config/limits.yaml as envoy-rls does, and returns its one
// domain.
func loadLimits(t testing.TB) (*config.Config, *config.Domain) {
	t.Helper()
	c, err := config.Load(repoFile(t, limitsYAMLPath))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Domains) != 1 {
		t.Fatalf("%s: %d domains, want 1", limitsYAMLPath, len(c.Domains))
	}
	for _, d := range c.Domains {
		return c, d
	}
	panic("unreachable")
}

// flagDefaults reads the defaults of envoy-rls's flags from the source of
// internal/server, the one place they are defined: the calls
// fs.XxxVar(&o.field, "name", default, "usage"). String defaults are
// returned as is, durations in time.Duration's format, booleans as
// strconv.FormatBool does.
func flagDefaults(t testing.TB) map[string]string {
	t.Helper()
	dir := repoFile(t, envoyRLSPkgDir)
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	defaults := map[string]string{}
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 4 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || !strings.HasSuffix(sel.Sel.Name, "Var") {
				return true
			}
			name, ok := stringLit(call.Args[1])
			if !ok {
				return true
			}
			if v, ok := evalDefault(call.Args[2]); ok {
				defaults[name] = v
			} else {
				defaults[name] = "?" // defined, default not a simple literal
			}
			return true
		})
	}
	if len(defaults) == 0 {
		t.Fatalf("no flags found in %s", envoyRLSPkgDir)
	}
	return defaults
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

var timeUnits = map[string]time.Duration{
	"Nanosecond": time.Nanosecond, "Microsecond": time.Microsecond, "Millisecond": time.Millisecond,
	"Second": time.Second, "Minute": time.Minute, "Hour": time.Hour,
}

// evalDefault evaluates the flag defaults internal/server writes: literals,
// N*time.Unit, and config.DefaultMaxDelay.
func evalDefault(e ast.Expr) (string, bool) {
	if s, ok := stringLit(e); ok {
		return s, true
	}
	if id, ok := e.(*ast.Ident); ok && (id.Name == "true" || id.Name == "false") {
		return id.Name, true
	}
	if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.INT {
		return lit.Value, true
	}
	d, ok := evalDuration(e)
	if !ok {
		return "", false
	}
	return d.String(), true
}

func evalDuration(e ast.Expr) (time.Duration, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.INT {
			return 0, false
		}
		n, err := strconv.ParseInt(e.Value, 0, 64)
		return time.Duration(n), err == nil
	case *ast.SelectorExpr:
		pkg, ok := e.X.(*ast.Ident)
		if !ok {
			return 0, false
		}
		switch {
		case pkg.Name == "time":
			d, ok := timeUnits[e.Sel.Name]
			return d, ok
		case pkg.Name == "config" && e.Sel.Name == "DefaultMaxDelay":
			return config.DefaultMaxDelay, true
		}
	case *ast.BinaryExpr:
		if e.Op != token.MUL {
			return 0, false
		}
		a, ok1 := evalDuration(e.X)
		b, ok2 := evalDuration(e.Y)
		return a * b, ok1 && ok2
	case *ast.ParenExpr:
		return evalDuration(e.X)
	}
	return 0, false
}

// defaultPort is the port of an address flag's default (":8081" -> 8081).
func defaultPort(t testing.TB, defaults map[string]string, flag string) uint32 {
	t.Helper()
	addr, ok := defaults[flag]
	if !ok {
		t.Fatalf("%s: no flag -%s", envoyRLSPkgDir, flag)
	}
	return port(t, addr)
}

func port(t testing.TB, hostport string) uint32 {
	t.Helper()
	_, p, err := net.SplitHostPort(hostport)
	if err != nil {
		t.Fatalf("%q: %v", hostport, err)
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		t.Fatalf("%q: port: %v", hostport, err)
	}
	return uint32(n)
}

// goMod reads the go directive and the version of a required module from
// go.mod.
func goMod(t testing.TB, module string) (goVersion, modVersion string) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(string(readRepoFile(t, "go.mod"))))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) == 2 && fields[0] == "go":
			goVersion = fields[1]
		case len(fields) >= 2 && fields[0] == module:
			modVersion = fields[1]
		case len(fields) >= 3 && fields[0] == "require" && fields[1] == module:
			modVersion = fields[2]
		}
	}
	if goVersion == "" || modVersion == "" {
		t.Fatalf("go.mod: go %q, %s %q", goVersion, module, modVersion)
	}
	return goVersion, modVersion
}

// majorMinor is "1.40" of "v1.40.0", "1.40.2" or "1.40".
func majorMinor(v string) string {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 {
		return v
	}
	return parts[0] + "." + parts[1]
}
