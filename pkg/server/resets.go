package server

import (
	"errors"
	"net"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/credentials"
)

// This file bounds the streams a gRPC client may reset (the HTTP/2 rapid
// reset: open a stream, cancel it at once, again and again). Each such
// stream costs the server its headers' decoding, a stream and a handler,
// and the client nothing but two frames: four connections doing it can
// take the cores from every other caller. grpc-go runs at most
// -grpc-max-streams handlers per connection at once, which bounds the
// streams alive but not how fast they come and go, so each connection has
// a budget of resets, and a connection past it is closed.

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
// transport's reader goroutine reads a connection, so its state needs no
// lock.
type resetConn struct {
	net.Conn
	scan    frameScanner
	budget  resetBudget
	onClose func()
	over    bool
}

func (c *resetConn) Read(p []byte) (int, error) {
	if c.over {
		return 0, errTooManyResets
	}
	n, err := c.Conn.Read(p)
	if resets := c.scan.resets(p[:n]); resets > 0 && !c.budget.spend(resets, time.Now()) {
		// The frames read with the last resets are dropped with the
		// connection: nothing more of this client is served.
		c.over = true
		c.Conn.Close()
		if c.onClose != nil {
			c.onClose()
		}
		return 0, errTooManyResets
	}
	return n, err
}

// frameScanner follows the frames of a client's side of an HTTP/2
// connection through its bytes, read in pieces of any size, and counts
// the RST_STREAM frames among them.
type frameScanner struct {
	preface int                  // bytes of the client preface still to pass
	header  [frameHeaderLen]byte // the frame header being read
	have    int                  // bytes of it read so far
	payload int                  // bytes of the current frame's payload still to pass
}

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
			if http2.FrameType(s.header[3]) == http2.FrameRSTStream {
				n++
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
