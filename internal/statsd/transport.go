package statsd

import (
	"bytes"
	"net"
	"sync"
	"time"

	"go.uber.org/zap"
)

// counts is where a transport reports what became of the stat lines it
// was given (metrics.Metrics in production).
type counts interface {
	StatsdSent(n uint64)
	StatsdDropped(n uint64)
}

// transport writes payloads of stat lines, each line ending in '\n', to
// the statsd: on one TCP connection, dialled again after a failure, or
// as UDP datagrams. After a failure it drops every payload until the next
// flush begins, so that a statsd that is down costs one dial a flush. It
// is safe for concurrent use (the DogStatsD client writes from its own
// goroutine).
type transport struct {
	network, addr string
	timeout       time.Duration
	counts        counts
	log           *zap.Logger

	mu   sync.Mutex
	conn net.Conn
	// failed is the failure of this flush (nil while none); down reports
	// that the flush before failed too, dropped what was dropped since
	// stats last went through.
	failed  error
	down    bool
	dropped uint64
}

func newTransport(network, addr string, timeout time.Duration, c counts, log *zap.Logger) *transport {
	return &transport{network: network, addr: addr, timeout: timeout, counts: c, log: log}
}

// Write sends p, whole lines; it never returns an error, since the lines
// a failure loses are counted here (the DogStatsD client would count the
// payload again).
func (t *transport) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := uint64(bytes.Count(p, []byte{'\n'}))
	if t.failed != nil {
		t.drop(lines)
		return len(p), nil
	}
	if t.conn == nil {
		conn, err := net.DialTimeout(t.network, t.addr, t.timeout)
		if err != nil {
			t.failed = err
			t.drop(lines)
			return len(p), nil
		}
		t.conn = conn
	}
	_ = t.conn.SetWriteDeadline(time.Now().Add(t.timeout))
	n, err := t.conn.Write(p)
	if err != nil {
		t.conn.Close()
		t.conn = nil
		t.failed = err
		written := uint64(bytes.Count(p[:n], []byte{'\n'}))
		t.counts.StatsdSent(written)
		t.drop(lines - written)
		return len(p), nil
	}
	t.counts.StatsdSent(lines)
	return len(p), nil
}

func (t *transport) drop(lines uint64) {
	t.dropped += lines
	t.counts.StatsdDropped(lines)
}

// flushed ends a flush: it logs the failure, if this flush had one and the
// one before had none, or that stats go through again after one had; and
// lets the next flush try again.
func (t *transport) flushed() {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.failed != nil && !t.down:
		t.log.Warn("statsd: dropping stats until it takes them again", zap.String("addr", t.addr), zap.String("network", t.network),
			zap.Uint64("dropped", t.dropped), zap.Error(t.failed))
		t.down = true
	case t.failed != nil:
		t.log.Debug("statsd: still dropping stats", zap.String("addr", t.addr), zap.Uint64("dropped", t.dropped), zap.Error(t.failed))
	case t.down:
		t.log.Info("statsd: stats go through again", zap.String("addr", t.addr), zap.Uint64("dropped", t.dropped))
		t.down, t.dropped = false, 0
	default:
		t.dropped = 0
	}
	t.failed = nil
}

// Close closes the connection.
func (t *transport) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.conn != nil {
		err := t.conn.Close()
		t.conn = nil
		return err
	}
	return nil
}
