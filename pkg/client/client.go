package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
)

// Entry is one key and value of a descriptor.
type Entry = descriptors.Entry

// Descriptor is one descriptor: its entries, in order, as a route's rate
// limit actions would produce them for Envoy.
type Descriptor []Entry

// Client asks an envoy-rls service (or any service of Envoy's
// RateLimitService v3) for decisions. It is safe for concurrent use by
// any number of goroutines; one Client per service is enough for a whole
// application, since gRPC multiplexes its calls on one connection. The
// zero Client has no service to ask: Check answers it ErrNoClient.
type Client struct {
	rls         rlsv3.RateLimitServiceClient
	conn        *grpc.ClientConn // the connection Dial made; nil for New's
	timeout     time.Duration
	failureMode FailureMode
	err         error // a bad option given to New: every Check returns it
}

// ErrNoClient is Check's error on a nil or zero Client: make one with Dial
// or New.
var ErrNoClient = errors.New("client: a Client not made by Dial or New")

// ErrNoTarget is Dial's error for an empty target.
var ErrNoTarget = errors.New("client: empty target: give the service's address, e.g. rls.example:8081")

// Dial makes a Client of the service at target, a gRPC target such as
// "host:port" or "dns:///host:port". It connects on the first Check, not
// here (grpc.NewClient), so it never blocks and a service that is not up
// yet is no error: its Checks are decided by the failure mode until it is.
func Dial(target string, opts ...Option) (*Client, error) {
	o := buildOptions(opts)
	if o.err != nil {
		return nil, o.err
	}
	if target == "" {
		return nil, ErrNoTarget
	}
	creds := insecure.NewCredentials()
	if o.tls != nil {
		creds = credentials.NewTLS(o.tls)
	}
	conn, err := grpc.NewClient(target, append([]grpc.DialOption{grpc.WithTransportCredentials(creds)}, o.dial...)...)
	if err != nil {
		return nil, fmt.Errorf("client: dial %s: %w", target, err)
	}
	c := newClient(conn, o)
	c.conn = conn
	return c, nil
}

// New makes a Client on a connection of the caller's, for an application
// that already dials the service its own way; WithTLS and WithDialOptions
// do nothing here. New cannot return an error, so a bad option makes every
// Check of the Client return it (ErrBadOption).
func New(cc grpc.ClientConnInterface, opts ...Option) *Client {
	return newClient(cc, buildOptions(opts))
}

// newClient is New on options already built: Dial builds them once.
func newClient(cc grpc.ClientConnInterface, o options) *Client {
	return &Client{
		rls:         rlsv3.NewRateLimitServiceClient(cc),
		timeout:     o.timeout,
		failureMode: o.failureMode,
		err:         o.err,
	}
}

// Close closes the connection Dial made. It does nothing for a Client of
// New: the connection is its caller's to close.
func (c *Client) Close() error {
	if c.conn == nil {
		return nil
	}
	return c.conn.Close()
}

// ErrInvalidRequest wraps the service's InvalidArgument: a request that no
// config can answer (a domain or descriptor beyond the service's bounds,
// a refund it does not accept). The wrapped gRPC status keeps the
// service's words (status.Convert).
var ErrInvalidRequest = errors.New("client: the service refused the request as invalid")

// Check asks the service for domain and ds, each descriptor counting hits
// (0 = the service's default of 1).
//
// Its error is only for the caller's mistakes, found before any call (an
// empty domain, no descriptor, an empty or oversized descriptor, an empty
// key or value: the errors below), and for the service's InvalidArgument
// (ErrInvalidRequest). A service that cannot answer (unreachable, over
// the deadline, unavailable, any other error, or ctx ended) is no error:
// the Decision then follows the failure mode, with Unavailable holding
// the cause. Each call is bounded by the timeout (WithTimeout) or ctx's
// own deadline, whichever comes first.
func (c *Client) Check(ctx context.Context, domain string, hits uint32, ds ...Descriptor) (Decision, error) {
	if c == nil || c.rls == nil {
		return Decision{}, ErrNoClient
	}
	if c.err != nil {
		return Decision{}, c.err
	}
	if err := validate(domain, ds); err != nil {
		return Decision{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	req := getRequest(domain, hits, ds)
	resp, err := c.rls.ShouldRateLimit(ctx, &req.msg)
	putRequest(req)
	cancel()
	if err != nil {
		if status.Code(err) == codes.InvalidArgument {
			return Decision{}, fmt.Errorf("%w: %w", ErrInvalidRequest, err)
		}
		return Decision{Allowed: c.failureMode == FailOpen, Unavailable: err}, nil
	}
	// Only OVER_LIMIT refuses, as in Envoy's filter: an answer of code
	// UNKNOWN is let through.
	return Decision{
		Allowed:  resp.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT,
		Code:     resp.GetOverallCode(),
		Response: resp,
	}, nil
}

// requests holds the request messages of finished calls, so that a Check
// costs no allocation for its request: gRPC has marshalled the message
// by the time the call returns, and nothing keeps it.
var requests = sync.Pool{New: func() any { return new(request) }}

func getRequest(domain string, hits uint32, ds []Descriptor) *request {
	r := requests.Get().(*request)
	r.fill(domain, hits, ds)
	return r
}

func putRequest(r *request) {
	r.clear()
	requests.Put(r)
}
