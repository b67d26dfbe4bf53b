package statsd

import (
	"strconv"
)

// Payload sizes, as lyft/gostats, envoyproxy/ratelimit's stats library,
// buffers them: 64 KiB on TCP, a datagram that fits an Ethernet frame on
// UDP.
const (
	tcpPayload = 64 << 10
	udpPayload = 1432
)

// plainSink writes stats in statsd's line format, as lyft/gostats writes
// them: `NAME:VALUE|c`, `|g` or `|ms`, one a line, the tags folded into
// the name (`NAME.__KEY=VALUE`, by key). Lines are gathered into payloads
// of up to max bytes, each written whole; flush writes the last.
type plainSink struct {
	w      *transport
	suffix string // the tags, folded
	max    int
	buf    []byte
}

func newPlainSink(w *transport, tags []Tag, max int) *plainSink {
	var suffix []byte
	for _, t := range tags {
		suffix = append(append(append(append(suffix, ".__"...), t.Key...), '='), t.Value...)
	}
	return &plainSink{w: w, suffix: string(suffix), max: max, buf: make([]byte, 0, max)}
}

func (s *plainSink) Counter(name string, n uint64) { s.line(name, n, "|c\n") }
func (s *plainSink) Gauge(name string, v uint64)   { s.line(name, v, "|g\n") }
func (s *plainSink) Timer(name string, ms uint64)  { s.line(name, ms, "|ms\n") }

func (s *plainSink) line(name string, v uint64, kind string) {
	n := len(name) + len(s.suffix) + 1 + 20 + len(kind)
	if len(s.buf) > 0 && len(s.buf)+n > s.max {
		s.flush()
	}
	s.buf = append(s.buf, name...)
	s.buf = append(s.buf, s.suffix...)
	s.buf = append(s.buf, ':')
	s.buf = strconv.AppendUint(s.buf, v, 10)
	s.buf = append(s.buf, kind...)
}

// flush writes the lines gathered.
func (s *plainSink) flush() {
	if len(s.buf) > 0 {
		_, _ = s.w.Write(s.buf)
		s.buf = s.buf[:0]
	}
}
