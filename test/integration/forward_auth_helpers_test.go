package integration

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// requireProxy returns the path of the proxy's binary (nginx, caddy). A
// missing one fails the test where the proxies are required (CI=true or
// RLS_REQUIRE_PROXIES=1: .ci/run sets it), and skips it elsewhere, saying
// how to install it.
func requireProxy(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		if p := "/usr/sbin/" + name; fileExists(p) {
			return p
		}
		msg := fmt.Sprintf("%s is not installed (apt-get install %s, or scripts/test.sh installs it)", name, name)
		if os.Getenv("CI") == "true" || os.Getenv("RLS_REQUIRE_PROXIES") == "1" {
			t.Fatal(msg + "; the proxies are required here (CI=true or RLS_REQUIRE_PROXIES=1)")
		}
		t.Skip(msg)
	}
	return path
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// repoFile reads a file of the repository: the configurations the tests
// run are the ones the docs show.
func repoFile(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(mustRoot(t), rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var placeholder = regexp.MustCompile(`\$\{([A-Z_]+)\}`)

// substitute replaces ${NAME} in text with vars[NAME], as envsubst with a
// list of names does, leaving nginx's own $variables alone; a name vars
// lacks fails the test.
func substitute(t *testing.T, text string, vars map[string]string) string {
	t.Helper()
	return placeholder.ReplaceAllStringFunc(text, func(m string) string {
		v, ok := vars[m[2:len(m)-1]]
		if !ok {
			t.Fatalf("no value for %s", m)
		}
		return v
	})
}

// startProxyProc runs a proxy until the test ends, and waits (bounded)
// until it accepts connections on addr.
func startProxyProc(t *testing.T, cmd *exec.Cmd, addr string) {
	t.Helper()
	var out buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", cmd.Path, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }() //nolint:errcheck // the exit is seen through done
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM) //nolint:errcheck // it may have exited
		select {
		case <-done:
		case <-time.After(exitBound):
			cmd.Process.Kill() //nolint:errcheck // it may have exited meanwhile
			<-done
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(cmd.Path), out.String())
		}
	})
	up := poll(startBound, func() bool {
		select {
		case <-done:
			return true
		default:
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	select {
	case <-done:
		t.Fatalf("%s exited at start:\n%s", cmd.Path, out.String())
	default:
	}
	if !up {
		t.Fatalf("%s does not accept on %s after %s:\n%s", cmd.Path, addr, startBound, out.String())
	}
}

// startNginx runs nginx with config/nginx/forward-auth.conf in front of
// app, asking envoy-rls at rls; failOpen enables the config's fail-open
// line. It returns nginx's address.
func startNginx(t *testing.T, rls, app string, failOpen bool) string {
	t.Helper()
	bin := requireProxy(t, "nginx")
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	listen := freeAddr(t)
	conf := substitute(t, repoFile(t, "config/nginx/forward-auth.conf"), map[string]string{"LISTEN": listen, "RLS_ADDR": rls, "APP_ADDR": app})
	if failOpen {
		conf = strings.Replace(conf, "#FAILOPEN ", "", 1)
	}
	path := writeFile(t, dir, "nginx.conf", conf)
	global := "daemon off; pid " + filepath.Join(dir, "nginx.pid") + ";"
	if os.Geteuid() == 0 {
		// As root, nginx's workers would run as nobody, who cannot enter
		// the test's private temporary directory.
		global += " user root;"
	}
	startProxyProc(t, exec.Command(bin, "-p", dir, "-c", path, "-e", "stderr", "-g", global), listen)
	return listen
}

// startCaddy runs caddy with config/Caddyfile in front of app, asking
// envoy-rls at rls, its state in a temporary home; failOpen enables the
// config's fail-open lines. It returns caddy's address.
func startCaddy(t *testing.T, rls, app string, failOpen bool) string {
	t.Helper()
	bin := requireProxy(t, "caddy")
	home := t.TempDir()
	listen := freeAddr(t)
	host, port, _ := net.SplitHostPort(listen)
	conf := repoFile(t, "config/Caddyfile")
	if failOpen {
		conf = strings.ReplaceAll(conf, "#FAILOPEN ", "")
	}
	cmd := exec.Command(bin, "run", "--config", writeFile(t, home, "Caddyfile", conf), "--adapter", "caddyfile")
	cmd.Env = append(childEnv(nil), "HOME="+home, "XDG_CONFIG_HOME="+home, "XDG_DATA_HOME="+home,
		"BIND="+host, "PORT="+port, "RLS_ADDR="+rls, "APP_ADDR="+app)
	startProxyProc(t, cmd, listen)
	return listen
}

func mustRoot(t *testing.T) string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// app is the application behind the proxies: it answers "app" and counts
// the requests that reach it.
type app struct {
	addr   string
	served atomic.Int64
}

func startApp(t *testing.T) *app {
	t.Helper()
	a := &app{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		a.served.Add(1)
		io.WriteString(w, "app\n") //nolint:errcheck // the test reads what arrives
	}))
	t.Cleanup(srv.Close)
	a.addr = srv.Listener.Addr().String()
	return a
}

// clientAt is an HTTP client whose connections come from ip, a loopback
// address of its own (any of 127.0.0.0/8 works on Linux): the proxies see
// distinct clients on one machine.
func clientAt(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: callBound}
	return &http.Client{Timeout: callBound, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return d.DialContext(ctx, network, addr)
		},
		DisableKeepAlives: true,
	}}
}

// proxied is one answer through a proxy.
type proxied struct {
	code   int
	header http.Header
	body   string
}

// getVia sends GET path to addr from c with headers (name, value, ...).
func getVia(t *testing.T, c *http.Client, addr, path string, header ...string) proxied {
	t.Helper()
	req, err := http.NewRequest("GET", "http://"+addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s via %s: %v", path, addr, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return proxied{resp.StatusCode, resp.Header, string(b)}
}
