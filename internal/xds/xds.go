// Package xds takes the limits from an xDS server instead of a file: an
// ADS state-of-the-world client for RateLimitConfig resources, the way
// Envoy Gateway feeds envoyproxy/ratelimit.
//
// Each response is one snapshot, applied as a whole: every resource is
// checked by the same validator as a limits file (config.Options.FromProto),
// one domain per resource, and the resulting Config is handed to
// Options.Apply, after which the response is ACKed. A snapshot that does
// not validate is NACKed with the validator's message, naming the resource
// and the field, and the config in force stays. The client reconnects for
// ever, with backoff, whether the server is down, refuses the client's
// certificate or ends the stream.
//
// The stream loop is written here on the discovery v3 API rather than on
// go-control-plane's pkg/client/sotw/v3, whose responses carry neither
// the version nor the nonce: the version is what the metrics and the logs
// report, and each new stream must start from the version in force with no
// nonce of an earlier stream.
package xds

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"go.uber.org/zap"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// Options configure a Client.
type Options struct {
	// Server is the xDS server's address, host:port (any gRPC target).
	Server string
	// NodeID and NodeMetadata describe this instance to the server, which
	// keeps a snapshot per node id (Envoy Gateway's is envoy-ratelimit).
	NodeID       string
	NodeMetadata map[string]string
	// Headers are sent as gRPC metadata on every stream (a token, say).
	Headers map[string]string
	// TLS, when not nil, reaches the server over TLS; nil is plaintext.
	TLS *TLS
	// Backoff spaces the attempts to reach the server; the zero value is
	// DefaultBackoff. The count of retries starts again once a stream has
	// had an answer.
	Backoff Backoff
	// MaxMessageBytes is the largest response read (a snapshot holds every
	// domain); 0 is gRPC's default, 4 MiB.
	MaxMessageBytes int
	// Limits are the options every resource is checked and read with:
	// the default algorithm and count_refused of limits that say neither,
	// as no RateLimitConfig can.
	Limits config.Options
	// Apply swaps in the config of a snapshot that validated, before it is
	// ACKed. It is called from Run's goroutine, one snapshot at a time,
	// and not again for a snapshot that holds what is in force already.
	Apply func(version string, c *config.Config)
	// Refused, when not nil, hears of each snapshot NACKed.
	Refused func(version string, err error)
	// Logger gets a line per snapshot applied or refused, and a line per
	// failed attempt to reach the server, at most one every LogEvery
	// (default DefaultLogEvery): a server that stays down is not a flood.
	Logger   *zap.Logger
	LogEvery time.Duration
}

// DefaultLogEvery is the least time between two lines about failed
// attempts; the attempts in between are counted in the next line.
const DefaultLogEvery = 5 * time.Second

// noSnapshotWarning is how long a stream may go without a response before
// the client says so: the usual cause is a node id the server has no
// snapshot for, which otherwise looks like a hang.
const noSnapshotWarning = 15 * time.Second

// keepaliveTime is how long a quiet stream goes before the client pings,
// so that a server gone without closing the connection is noticed. It is
// above the five minutes a gRPC server accepts by default between pings,
// lest the server close the connection for pinging too often.
const keepaliveTime = 6 * time.Minute

// Client is an xDS client for RateLimitConfig. Run it once; Stats may be
// called from any goroutine.
type Client struct {
	o    Options
	log  *zap.Logger
	node *corev3.Node
	md   metadata.MD
	// rand draws the jitter of the backoff.
	rand func() float64

	// Run's own: the snapshot in force and its version, and the last one
	// refused, as it came.
	applied          []*rlsconfv3.RateLimitConfig
	version          string
	refusedVersion   string
	refusedResources []*anypb.Any

	mu    sync.Mutex
	stats Stats
}

// Stats are what the client has done, for the metrics.
type Stats struct {
	// Version is the version_info of the snapshot in force; empty before
	// the first.
	Version string
	// Applied counts the snapshots applied (and ACKed), Refused those
	// NACKed, Failures the attempts to reach the server that failed and
	// the streams that ended.
	Applied, Refused, Failures uint64
	// Connected is set while a stream is open and the server has answered
	// on it.
	Connected bool
}

// New checks the options and reads the TLS files once, so that a bad file
// fails the start rather than every attempt.
func New(o Options) (*Client, error) {
	switch {
	case o.Server == "":
		return nil, errors.New("xds: no server address")
	case o.Apply == nil:
		return nil, errors.New("xds: no Apply")
	case o.MaxMessageBytes < 0:
		return nil, errors.New("xds: MaxMessageBytes must not be negative")
	}
	if o.Backoff == (Backoff{}) {
		o.Backoff = DefaultBackoff
	}
	if err := o.Backoff.check(); err != nil {
		return nil, fmt.Errorf("xds: %w", err)
	}
	if o.TLS != nil {
		if _, err := o.TLS.Config(); err != nil {
			return nil, fmt.Errorf("xds: TLS: %w", err)
		}
	}
	// A target gRPC cannot parse fails here; NewClient does not connect.
	conn, err := grpc.NewClient(o.Server, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("xds: server %q: %w", o.Server, err)
	}
	conn.Close()
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.LogEvery <= 0 {
		o.LogEvery = DefaultLogEvery
	}
	md := make(map[string]*structpb.Value, len(o.NodeMetadata))
	for k, v := range o.NodeMetadata {
		md[k] = structpb.NewStringValue(v)
	}
	c := &Client{
		o:    o,
		log:  o.Logger,
		node: &corev3.Node{Id: o.NodeID, Metadata: &structpb.Struct{Fields: md}, UserAgentName: "envoy-rls"},
		rand: rand.Float64,
	}
	if len(o.Headers) > 0 {
		c.md = metadata.New(o.Headers)
	}
	return c, nil
}

// Stats returns the client's counts so far.
func (c *Client) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

// Run keeps a stream to the server open until ctx is done, applying each
// snapshot it sends, and reconnecting with backoff whenever a stream
// cannot be opened or ends.
func (c *Client) Run(ctx context.Context) {
	logs := throttle{every: c.o.LogEvery}
	retry := 0
	for {
		answered, err := c.stream(ctx)
		if ctx.Err() != nil {
			return
		}
		if answered {
			retry = 0
		}
		wait := c.o.Backoff.wait(retry, c.rand())
		retry++
		c.mu.Lock()
		c.stats.Failures++
		c.mu.Unlock()
		if held, ok := logs.allow(time.Now()); ok {
			msg := "cannot reach the xDS server, retrying; the config in force stays"
			if answered {
				msg = "the xDS stream ended, reconnecting; the config in force stays"
			}
			c.log.Warn(msg, zap.String("server", c.o.Server), zap.Error(err),
				zap.Duration("retry_in", wait), zap.Int("failed_attempts_not_logged", held))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// stream runs one connection and one ADS stream on it until either fails
// or ctx is done. answered says whether the server sent anything. Each
// attempt dials anew, so that it reads the TLS files of the moment and
// follows the client's backoff rather than gRPC's own.
func (c *Client) stream(ctx context.Context) (answered bool, err error) {
	opts, err := c.dialOptions()
	if err != nil {
		return false, err
	}
	conn, err := grpc.NewClient(c.o.Server, opts...)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if c.md != nil {
		sctx = metadata.NewOutgoingContext(sctx, c.md)
	}
	s, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(sctx)
	if err != nil {
		return false, err
	}
	// The first request of every stream carries the version in force and
	// no nonce: a server that holds that version already sends nothing
	// until it has a new one.
	if err := s.Send(c.request(c.version, "", nil)); err != nil {
		return false, err
	}
	quiet := time.AfterFunc(noSnapshotWarning, func() {
		c.log.Warn("the xDS server has sent no snapshot yet: does it have one for this node id?",
			zap.String("server", c.o.Server), zap.String("node_id", c.o.NodeID))
	})
	defer quiet.Stop()
	for {
		resp, err := s.Recv()
		if err != nil {
			return answered, err
		}
		if !answered {
			answered = true
			quiet.Stop()
			c.setConnected(true)
			defer c.setConnected(false)
			c.log.Info("connected to the xDS server", zap.String("server", c.o.Server), zap.String("node_id", c.o.NodeID))
		}
		if resp.GetTypeUrl() != TypeURL {
			// Not asked for; ADS servers send only what was asked.
			c.log.Debug("xDS response of another type ignored", zap.String("type", resp.GetTypeUrl()))
			continue
		}
		if err := s.Send(c.handle(resp)); err != nil {
			return answered, err
		}
	}
}

// dialOptions are the options of one connection to the server: its
// credentials, read from the TLS files of the moment, keepalives, and the
// bound on a message.
func (c *Client) dialOptions() ([]grpc.DialOption, error) {
	creds := insecure.NewCredentials()
	if c.o.TLS != nil {
		tc, err := c.o.TLS.Config()
		if err != nil {
			return nil, fmt.Errorf("TLS: %w", err)
		}
		creds = credentials.NewTLS(tc)
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithUserAgent("envoy-rls"),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: keepaliveTime, Timeout: 20 * time.Second}),
	}
	if c.o.MaxMessageBytes > 0 {
		opts = append(opts, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(c.o.MaxMessageBytes)))
	}
	return opts, nil
}

// handle applies one response and returns its ACK, or refuses it and
// returns its NACK.
func (c *Client) handle(resp *discoveryv3.DiscoveryResponse) *discoveryv3.DiscoveryRequest {
	version := resp.GetVersionInfo()
	msgs, err := unpack(resp.GetResources())
	var cfg *config.Config
	if err == nil {
		cfg, err = NewConfig(c.o.Limits, msgs)
	}
	if err != nil {
		return c.refuse(resp, err)
	}
	c.refusedVersion, c.refusedResources = "", nil
	if c.applied != nil && sameResources(c.applied, msgs) {
		c.log.Debug("xDS snapshot holds the config in force", zap.String("version", version))
	} else {
		c.o.Apply(version, cfg)
		c.log.Info("xDS snapshot applied", zap.String("version", version),
			zap.Int("resources", len(msgs)), zap.Int("domains", len(cfg.Domains)))
	}
	c.applied, c.version = msgs, version
	c.mu.Lock()
	c.stats.Applied++
	c.stats.Version = version
	c.mu.Unlock()
	return c.request(c.version, resp.GetNonce(), nil)
}

// refuse returns the NACK of a response that did not validate, with err
// as its error_detail.
//
// The NACK carries the version in force, as the protocol asks. But a
// server on go-control-plane's snapshot cache (Envoy Gateway's) answers a
// request whose version differs from its snapshot's with that snapshot
// at once, NACK or not: the same bad snapshot would come back and be
// refused as fast as the network allows, until the server has another.
// So a snapshot that comes back as it was refused is refused again with
// its own version in the NACK, which such a server takes as having
// nothing newer to send; it sends the next snapshot as soon as it has
// one. It is counted and logged once, when first refused.
func (c *Client) refuse(resp *discoveryv3.DiscoveryResponse, err error) *discoveryv3.DiscoveryRequest {
	version := resp.GetVersionInfo()
	detail := &rpcstatus.Status{Code: int32(codes.InvalidArgument), Message: err.Error()}
	if version == c.refusedVersion && sameAnys(resp.GetResources(), c.refusedResources) {
		c.log.Debug("xDS snapshot refused again", zap.String("version", version))
		return c.request(version, resp.GetNonce(), detail)
	}
	c.refusedVersion, c.refusedResources = version, resp.GetResources()
	c.mu.Lock()
	c.stats.Refused++
	c.mu.Unlock()
	c.log.Error("xDS snapshot refused, keeping the last good config",
		zap.String("version", version), zap.String("in_force", c.version), zap.String("error", err.Error()))
	if c.o.Refused != nil {
		c.o.Refused(version, err)
	}
	return c.request(c.version, resp.GetNonce(), detail)
}

// request is a DiscoveryRequest for every RateLimitConfig (a wildcard
// subscription), saying version: an ACK of the response with nonce, or
// with detail a NACK of it.
func (c *Client) request(version, nonce string, detail *rpcstatus.Status) *discoveryv3.DiscoveryRequest {
	return &discoveryv3.DiscoveryRequest{
		VersionInfo:   version,
		Node:          c.node,
		TypeUrl:       TypeURL,
		ResponseNonce: nonce,
		ErrorDetail:   detail,
	}
}

func (c *Client) setConnected(up bool) {
	c.mu.Lock()
	c.stats.Connected = up
	c.mu.Unlock()
}

// throttle lets a line through at most once every every, counting the
// ones held back in between.
type throttle struct {
	every time.Duration
	last  time.Time
	held  int
}

// allow reports whether a line may be logged at now and, if so, how many
// were held back since the last one.
func (t *throttle) allow(now time.Time) (held int, ok bool) {
	if !t.last.IsZero() && now.Sub(t.last) < t.every {
		t.held++
		return 0, false
	}
	held, t.held, t.last = t.held, 0, now
	return held, true
}
