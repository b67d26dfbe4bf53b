// Package redistest starts real redis-server processes for tests, on free
// loopback ports, and stops them when the test ends. It never mocks Redis and
// never relies on a Redis that happens to be running.
//
// redis-server (and redis-cli, for StartCluster) must be on PATH; `make test`
// installs them. A test that cannot find them fails rather than skips, so
// that a green run always means the Redis store was tested.
package redistest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	// startAttempts bounds the retries when a port picked as free was taken
	// before redis-server could bind it.
	startAttempts = 5
	// readyTimeout is how long a starting server may take to answer PING.
	readyTimeout = 10 * time.Second
)

// Server is one redis-server process owned by a test. Its methods are safe
// for concurrent use, but those that can fail the test (Restart) must be
// called from the test's goroutine, as with testing.TB.Fatal.
type Server struct {
	t    testing.TB
	bin  string
	dir  string
	port int
	// conf, if set, is a config file passed first on every start (a
	// Sentinel needs one it can rewrite); extra are arguments added to
	// every start (cluster mode, a replica, a Sentinel).
	conf  string
	extra []string
	// opts are StartWith's options; certs their TLS files, nil without TLS.
	opts  Options
	certs *TLSFiles
	// client is how Do and the readiness check talk to the server: over
	// TLS, authenticated, as opts require.
	client client

	mu   sync.Mutex
	proc *process // nil while stopped
}

// process is one run of redis-server.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited
	err  error         // the exit status, set before done is closed
}

// Start starts a redis-server on a free 127.0.0.1 port, without persistence,
// and waits until it answers PING. It is stopped (killed, reaped, and its
// directory removed) when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	return start(t, Options{}, nil)
}

func start(t testing.TB, o Options, extra func(port int) []string) *Server {
	t.Helper()
	return startConf(t, o, "", extra)
}

// startConf is start with a config file, written by conf into the server's
// directory before each start ("" for none).
func startConf(t testing.TB, o Options, conf string, extra func(port int) []string) *Server {
	t.Helper()
	bin := lookPath(t, "redis-server")
	s := &Server{t: t, bin: bin, dir: t.TempDir(), opts: o}
	if conf != "" {
		s.conf = filepath.Join(s.dir, "redis.conf")
		if err := os.WriteFile(s.conf, []byte(conf), 0o600); err != nil {
			t.Fatalf("redistest: %v", err)
		}
	}
	s.setUp(t)
	t.Cleanup(s.Stop)
	var errs []error
	for range startAttempts {
		port, err := freePort()
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		s.port = port
		if extra != nil {
			s.extra = extra(port)
		}
		err = s.launch()
		if err == nil {
			return s
		}
		errs = append(errs, err)
		if !errors.Is(err, errPortTaken) {
			break
		}
	}
	t.Fatalf("redistest: cannot start redis-server: %v", errors.Join(errs...))
	return nil
}

// lookPath finds a Redis binary or fails the test with the way to get one.
func lookPath(t testing.TB, name string) string {
	t.Helper()
	bin, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("redistest: %s is not on PATH (%v): run the tests with `make test`, which installs Redis", name, err)
	}
	return bin
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL is the server's address as a -redis-url: rediss:// for a TLS server.
// It holds no credentials.
func (s *Server) URL() string {
	if s.certs != nil {
		return "rediss://" + s.Addr()
	}
	return "redis://" + s.Addr()
}

// Port is the server's TCP port.
func (s *Server) Port() int { return s.port }

// Stop kills the server, as an outage would, and waits for it to exit. The
// port stays reserved for Restart only in the sense that nobody else is
// likely to take it. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p != nil {
		p.kill()
	}
}

// Restart stops the server if it runs and starts it again on the same port,
// with an empty dataset and an empty script cache, as after a crash of a
// Redis without persistence.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	if err := s.launch(); err != nil {
		s.t.Fatalf("redistest: restart redis-server on port %d: %v", s.port, err)
	}
}

// Running reports whether the server process is up.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return false
	}
	select {
	case <-s.proc.done:
		return false
	default:
		return true
	}
}

// Do sends one command and returns its reply as text: a status or bulk
// string as is, an integer in decimal, an array as its elements joined by
// newlines, nil as "(nil)". A Redis error reply is returned as an error. It
// is for setting up and inspecting state without a client library.
func (s *Server) Do(args ...string) (string, error) {
	return s.client.do(s.Addr(), 5*time.Second, args...)
}

// errPortTaken reports that redis-server could not bind its port.
var errPortTaken = errors.New("port already in use")

// launch starts redis-server on s.port and waits until it answers as itself.
func (s *Server) launch() error {
	logPath := filepath.Join(s.dir, "redis.log")
	var args []string
	if s.conf != "" {
		args = append(args, s.conf)
	}
	args = append(append(args, s.listenArgs()...),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--protected-mode", "no",
		"--daemonize", "no",
		"--dir", s.dir,
		"--logfile", logPath,
	)
	args = append(args, s.extra...)
	cmd := exec.Command(s.bin, args...)
	cmd.Dir = s.dir
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.bin, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()

	deadline := time.Now().Add(readyTimeout)
	for {
		select {
		case <-p.done:
			log := tail(logPath)
			if strings.Contains(log, "Address already in use") {
				return fmt.Errorf("%w: %d", errPortTaken, s.port)
			}
			return fmt.Errorf("redis-server exited (%v): %s", p.err, log)
		default:
		}
		// Ask for the process id so that a server of someone else that took
		// the port in the meantime is never mistaken for ours.
		info, err := s.client.do(s.Addr(), 100*time.Millisecond, "INFO", "server")
		if err == nil {
			if strings.Contains(info, "process_id:"+strconv.Itoa(cmd.Process.Pid)+"\r\n") {
				s.mu.Lock()
				s.proc = p
				s.mu.Unlock()
				return nil
			}
			p.kill()
			return fmt.Errorf("%w: %d answered by another server", errPortTaken, s.port)
		}
		if time.Now().After(deadline) {
			p.kill()
			return fmt.Errorf("redis-server on port %d not ready after %s: %v: %s", s.port, readyTimeout, err, tail(logPath))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// kill kills the process and waits until it has exited.
func (p *process) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// freePort asks the kernel for a free loopback port. The port is free only
// until someone else takes it: launch checks that it got it.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pick a free port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, fmt.Errorf("pick a free port: %w", err)
	}
	return port, nil
}

// tail returns the end of a log file, for error messages.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	const max = 2000
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(bytes.TrimSpace(b))
}

// do sends one command in RESP over a fresh connection (after AUTH, if the
// client has credentials) and reads the reply.
func (cl client) do(addr string, timeout time.Duration, args ...string) (string, error) {
	c, err := cl.dial(addr, timeout)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(timeout)); err != nil {
		return "", err
	}
	var b strings.Builder
	for _, cmd := range [][]string{cl.auth, args} {
		if cmd == nil {
			continue
		}
		b.WriteString(resp(cmd...))
	}
	if _, err := io.WriteString(c, b.String()); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	if cl.auth != nil {
		if _, err := readReply(r); err != nil {
			return "", fmt.Errorf("AUTH: %w", err)
		}
	}
	return readReply(r)
}

// resp is one command in RESP.
func resp(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}

// redisError is an error reply.
type redisError string

func (e redisError) Error() string { return string(e) }

// readReply reads one RESP2 reply.
func readReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply line")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", redisError(line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return "", fmt.Errorf("bad bulk length %q", line)
		}
		if n < 0 {
			return "(nil)", nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return "", fmt.Errorf("bad array length %q", line)
		}
		if n < 0 {
			return "(nil)", nil
		}
		elems := make([]string, 0, n)
		var firstErr error
		for range n {
			e, err := readReply(r)
			var re redisError
			switch {
			case errors.As(err, &re):
				if firstErr == nil {
					firstErr = err
				}
				e = "(error) " + string(re)
			case err != nil:
				return "", err
			}
			elems = append(elems, e)
		}
		return strings.Join(elems, "\n"), firstErr
	}
	return "", fmt.Errorf("unexpected reply %q", line)
}

// InfoInt is the integer field of INFO section on s (such as
// total_commands_processed of stats), failing the test if it is missing.
func (s *Server) InfoInt(t testing.TB, section, field string) int64 {
	t.Helper()
	info, err := s.Do("INFO", section)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("INFO %s: %s: %v", section, field, err)
			}
			return n
		}
	}
	t.Fatalf("INFO %s has no %s", section, field)
	return 0
}
