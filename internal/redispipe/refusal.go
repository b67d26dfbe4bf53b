package redispipe

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Setting is what of the client's settings a Redis that answered refused.
type Setting uint8

// The settings a Redis can refuse.
const (
	// Credentials: AUTH refused (a wrong password or user, or a password
	// the server does not ask for), or an ACL user denied the commands.
	Credentials Setting = iota + 1
	// Database: SELECT refused, an index the server does not have.
	Database
	// TLS: TLS spoken to a server that does not, or not spoken to one that
	// does, or the server's certificate not trusted, or ours refused.
	TLS
	// Permissions: the ACL user lacks commands, keys or the channel that
	// the store sends (package redisinspect).
	Permissions
)

func (s Setting) String() string {
	switch s {
	case Credentials:
		return "credentials"
	case Database:
		return "database"
	case TLS:
		return "TLS"
	case Permissions:
		return "commands, keys or channel"
	}
	return fmt.Sprintf("setting(%d)", uint8(s))
}

// RefusedError is Ping's error when Redis is there but refuses the
// client's settings: no wait makes it answer, only a change of settings
// does. A configuration error, not an outage.
type RefusedError struct {
	Setting Setting
	Err     error
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("Redis refuses the %s: %v", e.Setting, e.Err)
}

func (e *RefusedError) Unwrap() error { return e.Err }

// refusedSetting tells, of a command's error, the setting Redis refused;
// 0 for any other error (a timeout, a connection refused: an outage).
// Redis's own errors are told by their code, the reply's first word.
func refusedSetting(err error) Setting {
	var re redis.Error
	if errors.As(err, &re) {
		msg := re.Error()
		code, _, _ := strings.Cut(msg, " ")
		switch {
		case code == "WRONGPASS" || code == "NOAUTH" || code == "NOPERM":
			return Credentials
		case code == "ERR" && (strings.Contains(msg, "AUTH") || strings.Contains(msg, "password")):
			return Credentials
		case code == "ERR" && (strings.Contains(msg, "DB index") || strings.Contains(msg, "SELECT")):
			return Database
		}
		return 0
	}
	var rh tls.RecordHeaderError
	var cv *tls.CertificateVerificationError
	var alert tls.AlertError
	var ua x509.UnknownAuthorityError
	var he x509.HostnameError
	var ci x509.CertificateInvalidError
	switch {
	case errors.As(err, &rh), errors.As(err, &cv), errors.As(err, &alert),
		errors.As(err, &ua), errors.As(err, &he), errors.As(err, &ci):
		return TLS
	}
	return 0
}

// dropped reports an error of a connection the server closed at once, as
// a TLS server closes one that does not speak TLS.
func dropped(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

// speaksTLS reports whether the server at addr completes a TLS handshake
// (its certificate unchecked: the question is only whether it speaks TLS).
func speaksTLS(ctx context.Context, addr string) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}} //nolint:gosec // no data is sent
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// Refusal is err as a *RefusedError when it says that Redis refused the
// client's settings. On a single Redis over TCP, an error that says
// nothing (a connection dropped at once, a handshake that timed out) is
// one too when the server speaks the other protocol: TLS where the client
// speaks plain RESP, or plain RESP where the client speaks TLS. Any other
// error is err.
func Refusal(ctx context.Context, a SingleAddr, err error) error {
	if setting := refusedSetting(err); setting != 0 {
		return &RefusedError{Setting: setting, Err: err}
	}
	switch {
	case a.addr == "" || errors.Is(err, context.Canceled):
	case !a.tls && dropped(err) && speaksTLS(ctx, a.addr):
		return &RefusedError{Setting: TLS, Err: fmt.Errorf("%w (the server at %s speaks TLS, and the client does not)", err, a.addr)}
	case a.tls && speaksPlain(ctx, a.addr):
		return &RefusedError{Setting: TLS, Err: fmt.Errorf("%w (the server at %s does not speak TLS, and the client does)", err, a.addr)}
	}
	return err
}

// speaksPlain reports whether the server at addr answers a PING in plain
// RESP: a reply that starts with + or - (-NOAUTH from one that wants a
// password).
func speaksPlain(ctx context.Context, addr string) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	defer c.Close()
	dl, _ := ctx.Deadline()
	_ = c.SetDeadline(dl)
	if _, err := io.WriteString(c, "PING\r\n"); err != nil {
		return false
	}
	b := make([]byte, 1)
	if _, err := io.ReadFull(c, b); err != nil {
		return false
	}
	return b[0] == '+' || b[0] == '-'
}

// SingleAddr is a single Redis reached over TCP: its address, and whether
// the client speaks TLS to it.
type SingleAddr struct {
	addr string
	tls  bool
}

// SingleOf is the address of a single Redis client over TCP, whose
// unexplained errors may be a TLS mismatch; none for a cluster, a
// Sentinel's master or a unix socket.
func SingleOf(client any) SingleAddr {
	c, ok := client.(*redis.Client)
	if !ok {
		return SingleAddr{}
	}
	o := c.Options()
	if o.Network != "tcp" {
		return SingleAddr{}
	}
	if _, _, err := net.SplitHostPort(o.Addr); err != nil {
		return SingleAddr{} // a failover client's: Sentinel finds the master's address
	}
	return SingleAddr{addr: o.Addr, tls: o.TLSConfig != nil}
}
