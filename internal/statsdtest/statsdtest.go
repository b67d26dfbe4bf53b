// Package statsdtest is a statsd for tests: a listener on a free loopback
// port, TCP or UDP, that keeps every stat line it receives.
package statsdtest

import (
	"bufio"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Server keeps the lines a statsd client sends it. It is safe for
// concurrent use.
type Server struct {
	network string
	addr    string

	mu    sync.Mutex
	lines []string
	conns int
}

// Start listens on network (tcp or udp) on a free loopback port until the
// test ends.
func Start(t testing.TB, network string) *Server {
	t.Helper()
	s := &Server{network: network}
	switch network {
	case "tcp":
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		s.addr = l.Addr().String()
		go s.accept(l)
	case "udp":
		c, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		s.addr = c.LocalAddr().String()
		go s.readPackets(c)
	default:
		t.Fatalf("statsdtest: network %q: want tcp or udp", network)
	}
	return s
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.addr }

// Network is tcp or udp.
func (s *Server) Network() string { return s.network }

func (s *Server) accept(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns++
		s.mu.Unlock()
		go func() {
			defer c.Close()
			sc := bufio.NewScanner(c)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				s.add(sc.Text())
			}
		}()
	}
}

func (s *Server) readPackets(c net.PacketConn) {
	buf := make([]byte, 65536)
	for {
		n, _, err := c.ReadFrom(buf)
		if err != nil {
			return
		}
		for _, l := range strings.Split(strings.TrimSuffix(string(buf[:n]), "\n"), "\n") {
			s.add(l)
		}
	}
}

func (s *Server) add(line string) {
	s.mu.Lock()
	s.lines = append(s.lines, line)
	s.mu.Unlock()
}

// Lines returns every line received so far, in order.
func (s *Server) Lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.lines)
}

// Connections is how many TCP connections were accepted.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns
}

// Stat is one stat line: NAME:VALUE|TYPE, and for DogStatsD its tags
// (|#a:b,c:d) and any other fields.
type Stat struct {
	Name, Value, Type string
	Tags              []string
}

// Parse reads a stat line; false when it is not one.
func Parse(line string) (Stat, bool) {
	name, rest, ok := strings.Cut(line, ":")
	if !ok {
		return Stat{}, false
	}
	fields := strings.Split(rest, "|")
	if len(fields) < 2 {
		return Stat{}, false
	}
	st := Stat{Name: name, Value: fields[0], Type: fields[1]}
	for _, f := range fields[2:] {
		if tags, ok := strings.CutPrefix(f, "#"); ok {
			st.Tags = strings.Split(tags, ",")
		}
	}
	return st, true
}

// Key is the stat's name, with its tags, sorted, as |#TAGS.
func (st Stat) Key() string {
	if len(st.Tags) == 0 {
		return st.Name
	}
	tags := slices.Clone(st.Tags)
	slices.Sort(tags)
	return st.Name + "|#" + strings.Join(tags, ",")
}

// Counts adds up the counters received whose names keep says to keep, by
// name (DogStatsD's tags, sorted, appended as |#tags).
func (s *Server) Counts(keep func(name string) bool) map[string]uint64 {
	out := map[string]uint64{}
	for _, l := range s.Lines() {
		st, ok := Parse(l)
		if !ok || st.Type != "c" || !keep(st.Name) {
			continue
		}
		n, err := strconv.ParseUint(st.Value, 10, 64)
		if err != nil {
			continue
		}
		out[st.Key()] += n
	}
	return out
}

// WaitFor waits until cond holds of the lines received, or timeout
// passes; it reports whether cond held.
func (s *Server) WaitFor(timeout time.Duration, cond func(lines []string) bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond(s.Lines()) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}
