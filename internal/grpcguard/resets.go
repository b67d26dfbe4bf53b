package grpcguard

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/credentials"
)

// This file bounds the streams a gRPC client may reset (the HTTP/2 rapid
// reset: open a stream, cancel it at once, again and again). Each such
// stream costs the server its headers' decoding, a stream and a handler,
// and the client nothing but two frames: four connections doing it can
// take the cores from every other caller. grpc-go runs at most
// Options.MaxStreams handlers per connection at once, which bounds the
// streams alive but not how fast they come and go, so each connection has
// a budget of resets, and a connection past it is closed: first told so
// with a GOAWAY (ENHANCE_YOUR_CALM) naming the last stream the server
// read, as Go's own HTTP/2 server answers a flood of resets since
// CVE-2023-44487, so that a client that meant no harm knows why and which
// of its calls to retry elsewhere.

// resetBoundCreds are transport credentials that give each connection they
// hand over a budget of perSecond stream resets a second (and a burst of
// as many); the connection past it is closed, and onClose called. A new
// connection starts with a tenth of the burst (newConnShare): an attacker
// who reconnects at once gets little from each connection, and a client's
// connection has its whole burst within a second.
type resetBoundCreds struct {
	credentials.TransportCredentials
	perSecond int
	onClose   func()
}

// boundResets wraps creds; perSecond 0 leaves them alone.
func boundResets(creds credentials.TransportCredentials, perSecond int, onClose func()) credentials.TransportCredentials {
	if perSecond <= 0 {
		return creds
	}
	return &resetBoundCreds{TransportCredentials: creds, perSecond: perSecond, onClose: onClose}
}

func (c *resetBoundCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		return conn, info, err
	}
	rc := &resetConn{Conn: conn, onClose: c.onClose, scan: frameScanner{preface: len(http2.ClientPreface)}}
	rc.budget = resetBudget{rate: float64(c.perSecond), tokens: float64(c.perSecond) / newConnShare, last: time.Now()}
	return rc, info, nil
}

func (c *resetBoundCreds) Clone() credentials.TransportCredentials {
	return &resetBoundCreds{TransportCredentials: c.TransportCredentials.Clone(), perSecond: c.perSecond, onClose: c.onClose}
}

// newConnShare is the share of its burst of resets a new connection starts
// with (the tenth: it fills up within 0.9 s).
const newConnShare = 10

var errTooManyResets = errors.New("the client reset more streams than its budget")

// resetConn counts the RST_STREAM frames its client sends. Only the
// transport's reader goroutine reads a connection, so the reading state
// (scan, budget, over) needs no lock; the writes are followed under wmu,
// so that the GOAWAY goes between two of the transport's frames, never
// inside one.
type resetConn struct {
	net.Conn
	scan    frameScanner
	budget  resetBudget
	onClose func()
	over    bool

	wmu  sync.Mutex
	out  frameScanner // the frames the transport has written
	shut bool         // the GOAWAY is written: no more writes
	// linger is set once the GOAWAY is written: Close then lets the
	// client read it before the connection goes. Close takes no lock: it
	// must end a write that a client which stopped reading holds.
	linger atomic.Bool
	closed atomic.Bool // Close was called: later calls do nothing
}

// goAwayLinger is how long a connection told GOAWAY is kept half open,
// its reads discarded, before it is closed: closing a socket with bytes
// of the client still unread makes the kernel reset it, and the client
// could lose the GOAWAY with the rest.
const goAwayLinger = 250 * time.Millisecond

func (c *resetConn) Read(p []byte) (int, error) {
	if c.over {
		return 0, errTooManyResets
	}
	n, err := c.Conn.Read(p)
	if resets := c.scan.resets(p[:n]); resets > 0 && !c.budget.spend(resets, time.Now()) {
		// The frames read with the last resets are dropped with the
		// connection: nothing more of this client is served.
		c.over = true
		c.goAway()
		c.Close()
		if c.onClose != nil {
			c.onClose()
		}
		return 0, errTooManyResets
	}
	return n, err
}

// goAway writes a GOAWAY naming the last stream read, if the transport is
// not in the middle of a write (a client that stops reading can hold a
// write for long, and the reader must not wait on it): then the
// connection is closed without one.
func (c *resetConn) goAway() {
	if !c.wmu.TryLock() {
		return
	}
	defer c.wmu.Unlock()
	if c.shut || !c.out.between() {
		return
	}
	var b bytes.Buffer
	http2.NewFramer(&b, nil).WriteGoAway(c.scan.lastStream, http2.ErrCodeEnhanceYourCalm, nil) //nolint:errcheck // into a bytes.Buffer
	c.shut = true
	c.Conn.SetWriteDeadline(time.Now().Add(goAwayLinger)) //nolint:errcheck // a failed write below says the same
	if _, err := c.Conn.Write(b.Bytes()); err == nil {
		c.linger.Store(true)
	}
}

func (c *resetConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.shut {
		return 0, net.ErrClosed
	}
	n, err := c.Conn.Write(p)
	c.out.resets(p[:n])
	return n, err
}

// Close closes the connection; one told GOAWAY is first closed for writing
// and its reads discarded for goAwayLinger (at most 1 MiB of them), on a
// goroutine of its own.
func (c *resetConn) Close() error {
	if !c.closed.CompareAndSwap(false, true) {
		return nil
	}
	if !c.linger.Load() {
		return c.Conn.Close()
	}
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite() //nolint:errcheck // the close below follows anyway
	}
	c.Conn.SetReadDeadline(time.Now().Add(goAwayLinger)) //nolint:errcheck // as above
	go func() {
		io.CopyN(io.Discard, c.Conn, 1<<20) //nolint:errcheck // until the client closes, the deadline, or the cap
		c.Conn.Close()
	}()
	return nil
}

// frameScanner follows the frames of a client's side of an HTTP/2
// connection through its bytes, read in pieces of any size, and counts
// the RST_STREAM frames among them.
type frameScanner struct {
	preface int                  // bytes of the client preface still to pass
	header  [frameHeaderLen]byte // the frame header being read
	have    int                  // bytes of it read so far
	payload int                  // bytes of the current frame's payload still to pass
	// lastStream is the highest stream a HEADERS frame opened.
	lastStream uint32
}

// between reports whether the bytes passed so far end with a whole frame.
func (s *frameScanner) between() bool { return s.preface == 0 && s.have == 0 && s.payload == 0 }

const frameHeaderLen = 9

// resets passes b and returns the RST_STREAM frames whose header ends in it.
func (s *frameScanner) resets(b []byte) int {
	n := 0
	for len(b) > 0 {
		switch {
		case s.preface > 0:
			k := min(s.preface, len(b))
			s.preface -= k
			b = b[k:]
		case s.payload > 0:
			k := min(s.payload, len(b))
			s.payload -= k
			b = b[k:]
		default:
			k := copy(s.header[s.have:], b)
			s.have += k
			b = b[k:]
			if s.have < frameHeaderLen {
				continue
			}
			s.have = 0
			s.payload = int(s.header[0])<<16 | int(s.header[1])<<8 | int(s.header[2])
			switch http2.FrameType(s.header[3]) {
			case http2.FrameRSTStream:
				n++
			case http2.FrameHeaders:
				s.lastStream = max(s.lastStream, binary.BigEndian.Uint32(s.header[5:])&(1<<31-1))
			}
		}
	}
	return n
}

// resetBudget is a token bucket of resets: rate a second, as many at most.
type resetBudget struct {
	rate, tokens float64
	last         time.Time
}

// spend takes n resets at now, and reports whether the budget had them.
func (b *resetBudget) spend(n int, now time.Time) bool {
	b.tokens = min(b.rate, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
	b.tokens -= float64(n)
	return b.tokens >= 0
}
