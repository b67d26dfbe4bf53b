package grpcguard

import (
	"net"
	"sync"
	"sync/atomic"
	"syscall"
)

// limitListener accepts at most max connections open at once. Past that, a
// new connection is accepted and closed at once: its client fails fast
// instead of waiting in the kernel's backlog, and the process keeps its
// descriptors for the connections it serves. Each listener has its own
// bound, so a flood of gRPC connections leaves the health checks on the
// HTTP listener answered.
type limitListener struct {
	net.Listener
	max  int64
	open atomic.Int64
	// onRefuse, if set, counts a refused connection.
	onRefuse func()
}

// BoundListener returns l bounded to max connections open at once (0 or
// less: l itself, unbounded), calling onRefuse, if set, for each one closed
// past the bound.
func BoundListener(l net.Listener, max int, onRefuse func()) net.Listener {
	if max <= 0 {
		return l
	}
	return &limitListener{Listener: l, max: int64(max), onRefuse: onRefuse}
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= l.max {
			return &limitConn{Conn: c, release: func() { l.open.Add(-1) }}, nil
		}
		l.open.Add(-1)
		c.Close()
		if l.onRefuse != nil {
			l.onRefuse()
		}
	}
}

// limitConn gives its place back to its listener once, on its first Close.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// ConnectionBounds returns the connection bounds in force on the gRPC
// listener and on each HTTP one: grpcConns and httpConns as given, or,
// where 0, shares of the process's file descriptor limit, less a reserve
// for what else the process opens (Redis connections, the limits files,
// the listeners themselves).
func ConnectionBounds(grpcConns, httpConns int) (int, int) {
	if grpcConns > 0 && httpConns > 0 {
		return grpcConns, httpConns
	}
	usable := fdLimit() - fdReserve
	if usable < 64 {
		usable = 64
	}
	if grpcConns == 0 {
		grpcConns = usable * 3 / 4
	}
	if httpConns == 0 {
		httpConns = max(usable/8, 16)
	}
	return grpcConns, httpConns
}

// fdReserve is kept out of the connection bounds for the process's other
// files: a Redis pool per node, the limits files and their watches.
const fdReserve = 256

// fdLimit is the number of file descriptors the process may open (Go raises
// the soft limit to the hard one at start).
func fdLimit() int {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil || l.Cur > 1<<30 {
		return 1 << 16
	}
	return int(l.Cur)
}
