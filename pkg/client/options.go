package client

import (
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
)

// DefaultTimeout bounds a call when WithTimeout is not given: long enough
// for a decision on Redis across a data centre, short enough that a
// request waiting on a service that does not answer is decided by the
// failure mode before its own client gives up.
const DefaultTimeout = 100 * time.Millisecond

// FailureMode is what Check decides when the service cannot answer.
type FailureMode int

const (
	// FailOpen allows: a limiter that is down must not take the
	// application down with it. The default.
	FailOpen FailureMode = iota
	// FailClosed refuses: for limits that protect something that must not
	// be overrun even while the limiter is away (a login, a payment).
	FailClosed
)

// String names the mode as the service's own failure_mode does.
func (m FailureMode) String() string {
	switch m {
	case FailOpen:
		return "allow"
	case FailClosed:
		return "deny"
	}
	return fmt.Sprintf("FailureMode(%d)", int(m))
}

// Option configures Dial and New.
type Option func(*options)

// options are the settings Options give. err is the first bad one: Dial
// returns it, and a Client made by New answers every Check with it.
type options struct {
	tls         *tls.Config
	timeout     time.Duration
	failureMode FailureMode
	dial        []grpc.DialOption
	err         error
}

// Errors of bad options.
var (
	// ErrBadOption is wrapped by the error of every option that cannot be
	// used: a nil TLS config, a timeout that is not positive, an unknown
	// failure mode.
	ErrBadOption = errors.New("client: bad option")
)

func (o *options) fail(format string, args ...any) {
	if o.err == nil {
		o.err = fmt.Errorf("%w: "+format, append([]any{ErrBadOption}, args...)...)
	}
}

// WithTLS makes Dial speak TLS with cfg; a cfg with Certificates presents
// them to the service (mutual TLS). Without it Dial speaks plaintext, as
// the service's listener does unless -grpc-tls-cert is set. New ignores
// it: the connection is the caller's.
func WithTLS(cfg *tls.Config) Option {
	return func(o *options) {
		if cfg == nil {
			o.fail("WithTLS: nil config (leave the option out for plaintext)")
			return
		}
		o.tls = cfg
	}
}

// WithTimeout bounds each call to d (DefaultTimeout without it). The
// caller's context, when its deadline comes sooner, wins. d must be
// positive: a call without a bound would hold the caller's request for as
// long as an unreachable service takes to fail, and the failure mode would
// never get its say.
func WithTimeout(d time.Duration) Option {
	return func(o *options) {
		if d <= 0 {
			o.fail("WithTimeout(%v): the timeout must be positive", d)
			return
		}
		o.timeout = d
	}
}

// WithFailureMode sets what Check decides when the service cannot answer
// (FailOpen without it).
func WithFailureMode(m FailureMode) Option {
	return func(o *options) {
		if m != FailOpen && m != FailClosed {
			o.fail("WithFailureMode(%d): not FailOpen or FailClosed", int(m))
			return
		}
		o.failureMode = m
	}
}

// WithDialOptions adds gRPC dial options to Dial's (after its transport
// credentials, so a later one wins): keepalive, interceptors, a resolver.
// New ignores them. A client interceptor must not keep the request
// message past its call: Check reuses it for the next.
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(o *options) { o.dial = append(o.dial, opts...) }
}

func buildOptions(opts []Option) options {
	o := options{timeout: DefaultTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}
