package edge

import (
	"bufio"
	"io"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/envoy-rls/envoy-rls/examples/layered/app"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

type composeService struct {
	Image   string   `yaml:"image"`
	Build   any      `yaml:"build"`
	Command []string `yaml:"command"`
	Volumes []string `yaml:"volumes"`
	Ports   []string `yaml:"ports"`
	// The nginx and Caddy edges' (compose_proxies_test.go).
	Profiles    []string          `yaml:"profiles"`
	Environment map[string]string `yaml:"environment"`
	Tmpfs       []string          `yaml:"tmpfs"`
}

func loadCompose(t *testing.T) map[string]composeService {
	t.Helper()
	var c struct {
		Services map[string]composeService `yaml:"services"`
	}
	if err := yaml.Unmarshal(readRepoFile(t, composePath), &c); err != nil {
		t.Fatalf("%s: %v", composePath, err)
	}
	for _, name := range []string{"envoy", rlsCluster, "redis", appCluster} {
		if _, ok := c.Services[name]; !ok {
			t.Fatalf("%s: no service %q", composePath, name)
		}
	}
	return c.Services
}

// containerPorts are the container side of a service's published ports
// ("127.0.0.1:8080:8080" -> 8080).
func containerPorts(t *testing.T, s composeService) []uint32 {
	t.Helper()
	var out []uint32
	for _, p := range s.Ports {
		p, _, _ = strings.Cut(p, "/") // "8080/tcp"
		parts := strings.Split(p, ":")
		n, err := strconv.ParseUint(parts[len(parts)-1], 10, 16)
		if err != nil {
			t.Fatalf("%s: port %q: %v", composePath, p, err)
		}
		out = append(out, uint32(n))
	}
	return out
}

// flagValue is the value of -name in a command ("-name v" or "-name=v").
func flagValue(cmd []string, name string) (string, bool) {
	for i, a := range cmd {
		a = "-" + strings.TrimLeft(a, "-")
		if a == "-"+name && i+1 < len(cmd) {
			return cmd[i+1], true
		}
		if v, ok := strings.CutPrefix(a, "-"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// hostPath maps a path inside a service's container to the repository file
// a bind mount puts there.
func hostPath(t *testing.T, s composeService, inContainer string) (string, bool) {
	t.Helper()
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) < 2 || !strings.HasPrefix(parts[0], ".") {
			continue
		}
		src, dst := parts[0], path.Clean(parts[1])
		if rel, ok := strings.CutPrefix(inContainer, dst); ok && (rel == "" || strings.HasPrefix(rel, "/")) {
			return filepath.Join(root(t), filepath.FromSlash(src), filepath.FromSlash(rel)), true
		}
	}
	return "", false
}

func sameFile(t *testing.T, a, b string) bool {
	t.Helper()
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	if err != nil {
		t.Fatal(err)
	}
	return os.SameFile(fa, fb)
}

// TestComposeEnvoy: Envoy runs config/envoy.yaml, publishes its listener and
// admin ports, and is the release go-control-plane's types describe.
func TestComposeEnvoy(t *testing.T) {
	e := loadEdge(t)
	s := loadCompose(t)["envoy"]

	cfg, ok := flagValue(s.Command, "c")
	if !ok {
		t.Fatalf("%s: envoy command %q has no -c", composePath, s.Command)
	}
	if src, ok := hostPath(t, s, cfg); !ok || !sameFile(t, src, repoFile(t, envoyYAMLPath)) {
		t.Errorf("%s: envoy -c %s is not a mount of %s (volumes %q)", composePath, cfg, envoyYAMLPath, s.Volumes)
	}

	ports := containerPorts(t, s)
	listener := e.listener.GetAddress().GetSocketAddress().GetPortValue()
	admin := e.bootstrap.GetAdmin().GetAddress().GetSocketAddress().GetPortValue()
	for _, p := range []uint32{listener, admin} {
		if !slices.Contains(ports, p) {
			t.Errorf("%s: envoy publishes %v, not %d", composePath, ports, p)
		}
	}

	// The image's minor release is the one go-control-plane's envoy module
	// mirrors (v1.40.x of the module: Envoy v1.40's API).
	m := regexp.MustCompile(`^envoyproxy/envoy(?:-distroless)?:v(\d+\.\d+)\.\d+$`).FindStringSubmatch(s.Image)
	if m == nil {
		t.Fatalf("%s: envoy image %q is not an official envoyproxy/envoy:vX.Y.Z release tag", composePath, s.Image)
	}
	_, gcp := goMod(t, gcpEnvoyModule)
	if m[1] != majorMinor(gcp) {
		t.Errorf("%s: Envoy %s, but go.mod's %s is %s: the bootstrap is validated against another API", composePath, s.Image, gcpEnvoyModule, gcp)
	}
}

// TestComposeEnvoyRLS: envoy-rls is built here, serves on its default ports
// (which Envoy's cluster dials), counts in the compose Redis, and loads
// config/limits.yaml.
func TestComposeEnvoyRLS(t *testing.T) {
	e := loadEdge(t)
	services := loadCompose(t)
	s := services[rlsCluster]
	defaults := flagDefaults(t)

	if b, _ := s.Build.(string); path.Clean(b) != "." {
		if m, ok := s.Build.(map[string]any); !ok || path.Clean(m["context"].(string)) != "." {
			t.Errorf("%s: %s is not built from this repository (build %v)", composePath, rlsCluster, s.Build)
		}
	}

	// Every flag in the command exists.
	for _, a := range s.Command {
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if _, ok := defaults[name]; !ok {
			t.Errorf("%s: %s command: envoy-rls has no flag -%s", composePath, rlsCluster, name)
		}
	}
	for _, flag := range []string{"grpc-addr", "http-addr"} {
		if v, ok := flagValue(s.Command, flag); ok {
			t.Errorf("%s: %s sets -%s %s: use the default, which Envoy's cluster and the docs assume", composePath, rlsCluster, flag, v)
		}
	}
	grpcPort, httpPort := defaultPort(t, defaults, "grpc-addr"), defaultPort(t, defaults, "http-addr")
	ports := containerPorts(t, s)
	for _, p := range []uint32{grpcPort, httpPort} {
		if !slices.Contains(ports, p) {
			t.Errorf("%s: %s publishes %v, not its default port %d", composePath, rlsCluster, ports, p)
		}
	}
	if ep := e.endpoint(t, rlsCluster); ep.GetPortValue() != grpcPort || ep.GetAddress() != rlsCluster {
		t.Errorf("%s: cluster %s dials %s:%d, compose runs %s on :%d", envoyYAMLPath, rlsCluster, ep.GetAddress(), ep.GetPortValue(), rlsCluster, grpcPort)
	}

	// -redis-url points at the compose Redis on Redis's port.
	raw, ok := flagValue(s.Command, "redis-url")
	if !ok {
		t.Fatalf("%s: %s has no -redis-url: every instance would count alone", composePath, rlsCluster)
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("-redis-url %q: %v", raw, err)
	}
	if _, ok := services[u.Hostname()]; u.Scheme != "redis" || u.Hostname() != "redis" || !ok || u.Port() != "6379" {
		t.Errorf("%s: -redis-url %q, want redis://redis:6379 (the redis service)", composePath, raw)
	}
	if img := services["redis"].Image; !strings.HasPrefix(img, "redis:7") {
		t.Errorf("%s: redis image %q, want redis:7-alpine", composePath, img)
	}
	if p, ok := flagValue(services["redis"].Command, "-port"); ok && p != u.Port() {
		t.Errorf("%s: redis listens on %s, -redis-url says %s", composePath, p, u.Port())
	}

	// -config is config/layers, mounted: Envoy's limits and the app's.
	cfg, ok := flagValue(s.Command, "config")
	if !ok {
		t.Fatalf("%s: %s has no -config: it would load only the image's %s, without the app's domain", composePath, rlsCluster, limitsYAMLPath)
	}
	src, ok := hostPath(t, s, cfg)
	if !ok || !sameFile(t, src, repoFile(t, layersDirPath)) {
		t.Fatalf("%s: -config %s is not a mount of %s (volumes %q)", composePath, cfg, layersDirPath, s.Volumes)
	}
	checkLayersDir(t, src)
}

// checkLayersDir: the limits directory envoy-rls loads in compose holds
// exactly the edge's limits (config/limits.yaml, Envoy's domain) and the
// app's (config/limits-app.yaml, the example's domain), no copy of either
// that could drift, and loads as the two domains.
func checkLayersDir(t *testing.T, dir string) {
	t.Helper()
	files, err := config.DirFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{limitsYAMLPath, appLimitsPath}
	found := map[string]bool{}
	for _, f := range files {
		i := slices.IndexFunc(want, func(w string) bool { return sameFile(t, f, repoFile(t, w)) })
		if i < 0 {
			t.Errorf("%s: %s is neither %s nor %s", layersDirPath, filepath.Base(f), limitsYAMLPath, appLimitsPath)
			continue
		}
		found[want[i]] = true
	}
	for _, w := range want {
		if !found[w] {
			t.Errorf("%s: no file is %s", layersDirPath, w)
		}
	}
	c, err := config.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	e := loadEdge(t)
	for _, d := range []string{e.filter.GetDomain(), app.Domain} {
		if c.Domains[d] == nil {
			t.Errorf("%s: no domain %q", layersDirPath, d)
		}
	}
}

// TestComposeApp: the app is the layered example (examples/layered),
// built here; its command is one the example accepts; it listens where
// Envoy's app cluster dials and asks the compose envoy-rls on the port
// Envoy asks it on.
func TestComposeApp(t *testing.T) {
	e := loadEdge(t)
	services := loadCompose(t)
	s := services[appCluster]
	if _, ok := flagValue(s.Command, "listen"); !ok {
		t.Fatalf("%s: app command %q has no -listen", composePath, s.Command)
	}
	cfg, err := app.ParseFlags(s.Command, io.Discard)
	if err != nil {
		t.Fatalf("%s: app command %q: %v", composePath, s.Command, err)
	}
	ep := e.endpoint(t, appCluster)
	if p := port(t, cfg.Listen); ep.GetAddress() != appCluster || ep.GetPortValue() != p {
		t.Errorf("%s: cluster %s dials %s:%d, compose's app listens on %s", envoyYAMLPath, appCluster, ep.GetAddress(), ep.GetPortValue(), cfg.Listen)
	}
	host, _, err := net.SplitHostPort(cfg.RLS)
	if err != nil {
		t.Fatalf("%s: app -rls %q: %v", composePath, cfg.RLS, err)
	}
	rls := e.endpoint(t, rlsCluster)
	if _, ok := services[host]; !ok || host != rls.GetAddress() || port(t, cfg.RLS) != rls.GetPortValue() {
		t.Errorf("%s: app -rls %s, want the service Envoy asks, %s:%d", composePath, cfg.RLS, rls.GetAddress(), rls.GetPortValue())
	}

	build, _ := s.Build.(map[string]any)
	if build["context"] != "." || build["dockerfile"] != layeredDockerfile {
		t.Fatalf("%s: app build %v, want context . and dockerfile %s", composePath, s.Build, layeredDockerfile)
	}
	checkLayeredDockerfile(t, port(t, cfg.Listen))
}

// checkLayeredDockerfile: the example's image is built as the service's
// (a static binary from a build stage on the builder's platform), runs
// the example as a non-root user, and exposes the port it listens on.
func checkLayeredDockerfile(t *testing.T, listen uint32) {
	t.Helper()
	stages := dockerStages(t, layeredDockerfile)
	build, final := stages[0], stages[len(stages)-1]
	var goBuild, user, entrypoint string
	var exposed []string
	for _, in := range build {
		if in.cmd == "RUN" && strings.Contains(in.args, "go build") {
			goBuild = in.args
		}
	}
	for _, in := range final {
		switch in.cmd {
		case "USER":
			user = in.args
		case "EXPOSE":
			exposed = append(exposed, strings.Fields(in.args)...)
		case "ENTRYPOINT":
			entrypoint = in.args
		}
	}
	if !strings.Contains(goBuild, "CGO_ENABLED=0") || !strings.HasSuffix(goBuild, "./examples/layered") {
		t.Errorf("%s: build stage runs %q, want a CGO_ENABLED=0 go build of ./examples/layered", layeredDockerfile, goBuild)
	}
	if u, _, _ := strings.Cut(user, ":"); u == "" || u == "0" || u == "root" {
		t.Errorf("%s: final stage runs as %q, want a non-root USER", layeredDockerfile, user)
	}
	if p := strconv.Itoa(int(listen)); !slices.Contains(exposed, p) {
		t.Errorf("%s: EXPOSE %v lacks the app's -listen port %s", layeredDockerfile, exposed, p)
	}
	if !strings.Contains(entrypoint, "layered") {
		t.Errorf("%s: ENTRYPOINT %q does not run the example", layeredDockerfile, entrypoint)
	}
}

type instruction struct{ cmd, args string }

// dockerStages splits the Dockerfile at rel into stages of instructions
// (comments and continuation lines handled, nothing else).
func dockerStages(t *testing.T, rel string) [][]instruction {
	t.Helper()
	var stages [][]instruction
	sc := bufio.NewScanner(strings.NewReader(string(readRepoFile(t, rel))))
	var line string
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(l, "#") || (l == "" && line == "") {
			continue
		}
		if cont, ok := strings.CutSuffix(l, "\\"); ok {
			line += cont + " "
			continue
		}
		line += l
		cmd, args, _ := strings.Cut(line, " ")
		line = ""
		in := instruction{strings.ToUpper(cmd), strings.TrimSpace(args)}
		if in.cmd == "FROM" {
			stages = append(stages, nil)
		}
		if len(stages) == 0 {
			t.Fatalf("%s: %s before FROM", rel, in.cmd)
		}
		stages[len(stages)-1] = append(stages[len(stages)-1], in)
	}
	if len(stages) < 2 {
		t.Fatalf("%s: %d stages, want a build stage and a small final one", rel, len(stages))
	}
	return stages
}

// TestDockerfile: a multi-stage build of a static binary with the Go of
// go.mod, a distroless (or scratch) final image running as a non-root
// user, the limits at the path of the -config default, the default ports
// exposed.
func TestDockerfile(t *testing.T) {
	stages := dockerStages(t, dockerfilePath)
	defaults := flagDefaults(t)
	build, final := stages[0], stages[len(stages)-1]

	checkBuildStage(t, build)

	if from := final[0].args; !strings.HasPrefix(from, "gcr.io/distroless/static") && from != "scratch" {
		t.Errorf("%s: final stage FROM %s, want distroless/static or scratch", dockerfilePath, from)
	}
	var user, workdir, limitsDst, entrypoint string
	var exposed, copied []string
	for _, in := range final {
		switch in.cmd {
		case "USER":
			user = in.args
		case "WORKDIR":
			workdir = in.args
		case "EXPOSE":
			exposed = append(exposed, strings.Fields(in.args)...)
		case "ENTRYPOINT":
			entrypoint = in.args
		case "COPY":
			f := strings.Fields(in.args)
			if len(f) == 3 && f[0] == "--from=build" && f[1] == "/out/envoy-rls" {
				copied = append(copied, f[2])
			}
			if len(f) == 2 && f[0] == limitsYAMLPath {
				limitsDst = f[1]
				if !path.IsAbs(limitsDst) {
					limitsDst = path.Join(workdir, limitsDst)
				}
			}
		}
	}
	if u, _, _ := strings.Cut(user, ":"); u == "" || u == "0" || u == "root" {
		t.Errorf("%s: final stage runs as %q, want a non-root USER", dockerfilePath, user)
	}
	if want := path.Join(workdir, defaults["config"]); limitsDst != want {
		t.Errorf("%s: %s copied to %q, want %q (WORKDIR + the -config default)", dockerfilePath, limitsYAMLPath, limitsDst, want)
	}
	for _, flag := range []string{"grpc-addr", "http-addr"} {
		if p := strconv.Itoa(int(defaultPort(t, defaults, flag))); !slices.Contains(exposed, p) && !slices.Contains(exposed, p+"/tcp") {
			t.Errorf("%s: EXPOSE %v lacks %s (-%s)", dockerfilePath, exposed, p, flag)
		}
	}
	if !strings.Contains(entrypoint, "envoy-rls") {
		t.Errorf("%s: ENTRYPOINT %q does not run envoy-rls", dockerfilePath, entrypoint)
	}
	if !slices.Contains(copied, "/bin/ratelimit") {
		t.Errorf("%s: the final stage copies the binary to %q, not to /bin/ratelimit (the drop-in's command)", dockerfilePath, copied)
	}

	// The build context keeps what the builds need (this image's, and the
	// layered example's, which shares it).
	ignore := readRepoFile(t, dockerignorePath)
	for _, l := range strings.Split(string(ignore), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		for _, need := range []string{"go.mod", "go.sum", "cmd", "pkg", "internal", "config", limitsYAMLPath, "examples"} {
			if ok, _ := path.Match(strings.TrimPrefix(l, "/"), need); ok {
				t.Errorf("%s: %q leaves %s out of the build context", dockerignorePath, l, need)
			}
		}
	}
}

// checkBuildStage: the build stage runs on the builder's platform with the
// Go of go.mod and cross-compiles a static binary for the target platform
// buildx names, so that a multi-architecture build emulates nothing.
func checkBuildStage(t *testing.T, build []instruction) {
	t.Helper()
	goVersion, _ := goMod(t, gcpEnvoyModule)
	from := strings.Fields(build[0].args)
	if len(from) == 0 || from[0] != "--platform=$BUILDPLATFORM" {
		t.Errorf("%s: build stage FROM %s, want FROM --platform=$BUILDPLATFORM: without it buildx runs the compiler emulated for each target", dockerfilePath, build[0].args)
	} else {
		from = from[1:]
	}
	if len(from) == 0 || !strings.HasPrefix(from[0], "golang:"+majorMinor(goVersion)) {
		t.Errorf("%s: build stage FROM %s, want golang:%s (go.mod's go %s)", dockerfilePath, build[0].args, majorMinor(goVersion), goVersion)
	}
	args := map[string]bool{}
	var goBuild string
	for _, in := range build {
		switch {
		case in.cmd == "ARG":
			for _, a := range strings.Fields(in.args) {
				name, _, _ := strings.Cut(a, "=")
				args[name] = true
			}
		case in.cmd == "RUN" && strings.Contains(in.args, "go build"):
			goBuild = in.args
		}
	}
	for _, want := range []string{"CGO_ENABLED=0", "GOOS=$TARGETOS", "GOARCH=$TARGETARCH"} {
		env, _, _ := strings.Cut(goBuild, "go build")
		if !slices.Contains(strings.Fields(env), want) {
			t.Errorf("%s: the build stage's go build (%q) is not run with %s", dockerfilePath, goBuild, want)
		}
	}
	for _, a := range []string{"TARGETOS", "TARGETARCH"} {
		if !args[a] {
			t.Errorf("%s: the build stage declares no ARG %s: buildx's value would not reach go build", dockerfilePath, a)
		}
	}
}

// fixedHostPort is the host port a published port binds, or "" when Docker
// picks one ("8080", "127.0.0.1::8080").
func fixedHostPort(published string) string {
	published, _, _ = strings.Cut(published, "/")
	parts := strings.Split(published, ":")
	switch len(parts) {
	case 1:
		return ""
	case 2:
		return parts[0]
	default:
		return parts[len(parts)-2]
	}
}

// TestComposeScale: every service a file suggests `--scale`-ing can be
// scaled, which a fixed host port forbids (the second replica cannot bind
// it, and compose refuses to start it).
func TestComposeScale(t *testing.T) {
	services := loadCompose(t)
	scale := regexp.MustCompile(`--scale[ =]([a-z0-9_-]+)=\d+`)
	seen := map[string]bool{}
	for _, file := range []string{envoyYAMLPath, composePath, "README.md", "docs/edge.md"} {
		for _, m := range scale.FindAllStringSubmatch(string(readRepoFile(t, file)), -1) {
			name := m[1]
			if seen[name] {
				continue
			}
			seen[name] = true
			s, ok := services[name]
			if !ok {
				t.Errorf("%s suggests %s, but %s has no service %q", file, m[0], composePath, name)
				continue
			}
			for _, p := range s.Ports {
				if h := fixedHostPort(p); h != "" {
					t.Errorf("%s suggests %s, but %s publishes %q on the fixed host port %s", file, m[0], composePath, p, h)
				}
			}
		}
	}
	if !seen[rlsCluster] {
		t.Errorf("no file suggests scaling %s; this test checks nothing", rlsCluster)
	}
}
