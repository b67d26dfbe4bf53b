package chart

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

// envoyRLS builds the binary from the main module, once.
func envoyRLS(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "envoy-rls-chart-")
		if err != nil {
			buildErr = err
			return
		}
		// Readable by the pod's user, which asPodUser may run it as.
		if err := os.Chmod(dir, 0o755); err != nil {
			buildErr = err
			return
		}
		binary = filepath.Join(dir, "envoy-rls")
		cmd := exec.Command("go", "build", "-o", binary, "./cmd/envoy-rls")
		cmd.Dir = repoRoot(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = &buildError{err, out}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binary
}

type buildError struct {
	err error
	out []byte
}

func (e *buildError) Error() string {
	return "go build ./cmd/envoy-rls: " + e.err.Error() + "\n" + string(e.out)
}

// pod is the rendered container run as a process: its volumes laid out
// under root, its listen addresses moved to free ports on 127.0.0.1 (the
// test has no network namespace of its own), everything else as rendered.
type pod struct {
	root               string
	grpcAddr, httpAddr string
	probe              *corev1.Probe
	cmd                *exec.Cmd
	stderr             *bytes.Buffer
	done               chan struct{}
}

// runPod starts the container of o. secrets and configMaps are the data of
// the objects the chart names but does not make.
func runPod(t *testing.T, o objects, configMaps, secrets map[string]map[string][]byte) *pod {
	t.Helper()
	c := o.container(t)
	p := &pod{root: t.TempDir(), grpcAddr: freeAddr(t), httpAddr: freeAddr(t), probe: c.StartupProbe,
		stderr: new(bytes.Buffer), done: make(chan struct{})}
	podFiles(t, p.root, o, configMaps, secrets)
	// The working directory is the image's (WORKDIR /app), read-only.
	workDir := filepath.Join(p.root, "app")
	if err := os.Mkdir(workDir, 0o555); err != nil {
		t.Fatal(err)
	}
	if len(c.Command) != 1 || c.Command[0] != imageEntrypoint(t) {
		t.Fatalf("command %q, want the image's entrypoint %q", c.Command, imageEntrypoint(t))
	}
	args := make([]string, len(c.Args))
	for i, a := range c.Args {
		args[i] = p.mapArg(a, c)
	}
	p.cmd = exec.Command(envoyRLS(t), args...)
	p.cmd.Dir = workDir
	p.cmd.Env = append([]string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "TMPDIR=" + filepath.Join(p.root, "tmp")}, envOf(t, c, secrets)...)
	p.cmd.Stdout, p.cmd.Stderr = p.stderr, p.stderr
	asPodUser(t, p, o)
	before := snapshot(t, p.root, c)
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if cred := p.cmd.SysProcAttr; cred != nil {
		// The kernel's word that it runs as the pod's user (unless it has
		// already exited, as on bad limits).
		want := fmt.Sprintf("\nUid:\t%d\t", cred.Credential.Uid)
		if status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid)); err == nil && !strings.Contains(string(status), want) {
			t.Errorf("envoy-rls does not run as uid %d:\n%s", cred.Credential.Uid, status)
		}
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
			p.cmd.Process.Kill()
			<-p.done
		}
		if after := snapshot(t, p.root, c); !equalLines(before, after) {
			t.Errorf("the process wrote under its read-only root:\nbefore %q\nafter  %q", before, after)
		}
		checkLog(t, p.stderr.String())
		if t.Failed() {
			t.Logf("envoy-rls %q:\n%s", args, p.stderr)
		}
	})
	return p
}

// checkLog fails on a warning or an error in the log of a pod but those
// of a store that is down, which some tests make it: anything else (an
// ignored variable, a file of the config directory not loaded, a mount
// that cannot be watched) is the chart giving the binary what it does not
// take.
func checkLog(t *testing.T, log string) {
	t.Helper()
	for _, l := range strings.Split(log, "\n") {
		var e struct{ Level, Msg string }
		if json.Unmarshal([]byte(l), &e) != nil || (e.Level != "warn" && e.Level != "error") {
			continue
		}
		if !strings.HasPrefix(e.Msg, "store ") && !strings.HasPrefix(e.Msg, "Redis does not answer") {
			t.Errorf("envoy-rls logged: %s", l)
		}
	}
}

// asPodUser runs the process as the container's runAsUser and runAsGroup,
// with the pod's fsGroup, when the test can (it runs as root): the
// directories of its root are then really read-only to it (root-owned,
// 0755; its working directory 0555), and every mounted file must be
// readable by that user. Not root, the test runs it as itself.
func asPodUser(t *testing.T, p *pod, o objects) {
	t.Helper()
	sc := o.container(t).SecurityContext
	if os.Geteuid() != 0 || sc == nil || sc.RunAsUser == nil || sc.RunAsGroup == nil {
		return
	}
	cred := &syscall.Credential{Uid: uint32(*sc.RunAsUser), Gid: uint32(*sc.RunAsGroup)}
	if ps := o.deployment.Spec.Template.Spec.SecurityContext; ps != nil && ps.FSGroup != nil {
		cred.Groups = []uint32{uint32(*ps.FSGroup)}
	}
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	// t.TempDir's directories are 0700: let the user reach its root.
	// Only those below the temporary directory, which keeps its own mode.
	tmp := filepath.Clean(os.TempDir()) + string(filepath.Separator)
	for dir := p.root; strings.HasPrefix(dir, tmp); dir = filepath.Dir(dir) {
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// mapArg maps a rendered argument to the process: a listen address to its
// free port, a path in a mount to the same path under root.
func (p *pod) mapArg(a string, c corev1.Container) string {
	name, v, ok := strings.Cut(a, "=")
	switch {
	case !ok:
		return a
	case name == "-grpc-addr":
		return name + "=" + p.grpcAddr
	case name == "-http-addr":
		return name + "=" + p.httpAddr
	}
	if _, in := mountOf(c, v); in && strings.HasPrefix(v, "/") {
		return name + "=" + filepath.Join(p.root, v)
	}
	return a
}

// envOf is the container's environment with each secretKeyRef resolved,
// as the kubelet resolves it.
func envOf(t *testing.T, c corev1.Container, secrets map[string]map[string][]byte) []string {
	t.Helper()
	var env []string
	for _, e := range c.Env {
		v := e.Value
		if e.ValueFrom != nil {
			ref := e.ValueFrom.SecretKeyRef
			if ref == nil {
				t.Fatalf("variable %s: only secretKeyRef is resolved here: %+v", e.Name, e.ValueFrom)
			}
			data, ok := secrets[ref.Name][ref.Key]
			if !ok {
				t.Fatalf("variable %s: Secret %s has no key %s", e.Name, ref.Name, ref.Key)
			}
			v = string(data)
		}
		env = append(env, e.Name+"="+v)
	}
	return env
}

// imageEntrypoint is the Dockerfile's ENTRYPOINT, the binary the chart's
// command must name.
func imageEntrypoint(t testing.TB) string {
	t.Helper()
	for _, l := range strings.Split(string(readFile(t, filepath.Join(repoRoot(t), "Dockerfile"))), "\n") {
		if v, ok := strings.CutPrefix(l, "ENTRYPOINT "); ok {
			return strings.Trim(v, `[]"`)
		}
	}
	t.Fatal("Dockerfile: no ENTRYPOINT")
	return ""
}

// waitReady probes /healthz as the startup probe does, within its budget
// (period × failure threshold, doubled for a slow machine), and returns the
// first 200's body.
func (p *pod) waitReady(t *testing.T) string {
	t.Helper()
	budget := 2 * time.Duration(p.probe.PeriodSeconds*p.probe.FailureThreshold) * time.Second
	deadline := time.Now().Add(budget)
	for {
		code, body, err := p.healthz()
		if err == nil && code == http.StatusOK {
			return body
		}
		select {
		case <-p.done:
			t.Fatalf("envoy-rls exited before it was ready:\n%s", p.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready on %s within %v: %d %q %v", p.probe.HTTPGet.Path, budget, code, body, err)
		}
		time.Sleep(time.Duration(p.probe.PeriodSeconds) * time.Second / 10)
	}
}

// waitHealth waits until the pod is ready and /healthz's body holds want
// (the store's state, which the first probes may not know yet), and
// returns the last answer.
func (p *pod) waitHealth(t *testing.T, want string) (int, string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		p.waitReady(t)
		code, body, _ := p.healthz()
		if strings.Contains(body, want) || time.Now().After(deadline) {
			return code, body
		}
	}
}

// healthz is one probe: GET of the probe's path on the HTTP port.
func (p *pod) healthz() (int, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(p.probe.TimeoutSeconds)*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.httpAddr+p.probe.HTTPGet.Path, nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, string(b), err
}

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func equalLines(a, b []string) bool { return strings.Join(a, "\n") == strings.Join(b, "\n") }
