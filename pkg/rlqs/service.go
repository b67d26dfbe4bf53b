package rlqs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/rlqs/internal/share"
)

// Options configures a Service. The zero value of each field means its
// default.
type Options struct {
	// ReportInterval is the interval at which Envoys are assumed to
	// report (Envoy 1.40 reports every 5 s, a fixed interval); default 5 s.
	// Demands expire after three of them, assignments last more than two.
	ReportInterval time.Duration
	// AssignmentTTL is the TTL of a token bucket assignment, raised to
	// more than two report intervals; default three intervals.
	AssignmentTTL time.Duration
	// NoMatchTTL is the TTL of the ALLOW_ALL sent for a bucket no limit
	// matches; default one hour.
	NoMatchTTL time.Duration
	// IdleAfter is how long a bucket reports no requests before it is
	// abandoned, and how long one not reported at all is kept; default
	// twelve report intervals.
	IdleAfter time.Duration
	// MaxStreamBuckets bounds the buckets one stream holds, and MaxBuckets
	// those of every stream together: a bucket reported past either is
	// answered undivided and kept nowhere. Defaults 1,000 and 200,000,
	// ten and two times a fleet of 1,000 Envoys of 100 buckets each.
	MaxStreamBuckets, MaxBuckets int
	// Refresh is how old this instance's division of a bucket may grow
	// before a report reads every client's demand of it again; the reports
	// in between record their own demand and are answered from that
	// division, so a report's cost does not grow with the fleet. A join or
	// a leave on another instance reaches this one's clients within
	// Refresh and one report interval (one on this instance is seen at
	// the next report). Default half the report interval: within the one
	// or two intervals a leave is promised, at two reads a bucket an
	// interval.
	Refresh time.Duration
	// SilentAfter is how long a stream may go without a report before it
	// is closed: Envoy reports on a live stream every report interval, so
	// one silent for several is not an Envoy at work, only a place in the
	// server's bound on open streams that a new Envoy cannot have.
	// Default three report intervals.
	SilentAfter time.Duration
	// ClientOf names the client a stream belongs to, from its context (a
	// TLS client certificate's name, a peer address): the streams of one
	// name share one client's share of each bucket (group.go). Nil, or
	// an empty name, makes each stream a client of its own, so that one
	// peer opening many streams takes a share for each.
	ClientOf func(ctx context.Context) string
	// Band is the hysteresis of a share, as a fraction; default 0.05.
	Band float64
	// Floor is the part of each limit set aside for the clients that ask
	// for little: each of a bucket's n clients counts as asking at least
	// Floor/n of the limit, so that an Envoy whose bucket was idle beside
	// one at the limit holds a token bucket, not DENY_ALL, when its
	// requests come back; the others keep at least 1 − Floor of it.
	// Default 0.1; negative sets nothing aside.
	Floor float64
	// Shape bounds the token buckets; default share.DefaultShape.
	Shape Shape
	// Store holds the demands across instances; default a Memory store
	// (this instance's clients only).
	Store DemandStore
	// Logger defaults to zap.NewNop().
	Logger *zap.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// The default bounds of Options.MaxStreamBuckets and Options.MaxBuckets.
const (
	DefaultMaxStreamBuckets = 1_000
	DefaultMaxBuckets       = 200_000
)

// Service is the RateLimitQuotaService. It is safe for concurrent use: one
// goroutine per stream.
type Service struct {
	rlqspb.UnimplementedRateLimitQuotaServiceServer

	index    func() *descriptors.Index
	opts     Options
	store    DemandStore
	local    *Memory
	instance string
	nextID   atomic.Uint64

	mu        sync.Mutex
	divs      map[string]*division // by bucket key, while a stream here holds the bucket
	failedLog time.Time

	done      chan struct{}
	drainOnce sync.Once

	openMu sync.Mutex
	open   map[*stream]struct{} // the streams whose handler runs

	groupsMu sync.Mutex
	groups   map[string]*group // by ClientOf's name, while a stream of it is open

	stats   Stats
	rules   *ruleTotals
	caveats caveats // caveats.go
}

var _ rlqspb.RateLimitQuotaServiceServer = (*Service)(nil)

// New returns a Service that matches buckets against the index that index
// returns at each report (the config in force, swapped on reloads).
func New(index func() *descriptors.Index, opts Options) (*Service, error) {
	if index == nil {
		return nil, errors.New("rlqs: no index")
	}
	if opts.ReportInterval <= 0 {
		opts.ReportInterval = 5 * time.Second
	}
	if opts.Refresh <= 0 {
		opts.Refresh = opts.ReportInterval / 2
	}
	if opts.AssignmentTTL <= 0 {
		opts.AssignmentTTL = 3 * opts.ReportInterval
	}
	if opts.NoMatchTTL <= 0 {
		opts.NoMatchTTL = time.Hour
	}
	if opts.IdleAfter <= 0 {
		opts.IdleAfter = 12 * opts.ReportInterval
	}
	if opts.SilentAfter <= 0 {
		opts.SilentAfter = 3 * opts.ReportInterval
	}
	if opts.MaxStreamBuckets <= 0 {
		opts.MaxStreamBuckets = DefaultMaxStreamBuckets
	}
	if opts.MaxBuckets <= 0 {
		opts.MaxBuckets = DefaultMaxBuckets
	}
	if opts.Band <= 0 {
		opts.Band = 0.05
	}
	if opts.Floor == 0 {
		opts.Floor = 0.1
	}
	if opts.Shape == (share.Shape{}) {
		opts.Shape = share.DefaultShape
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	var id [6]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, err
	}
	s := &Service{index: index, opts: opts, store: opts.Store, local: NewMemory(opts.Now),
		instance: hex.EncodeToString(id[:]), divs: make(map[string]*division), open: make(map[*stream]struct{}), groups: make(map[string]*group), done: make(chan struct{}), rules: newRuleTotals()}
	if s.store == nil {
		s.store = s.local
	}
	return s, nil
}

// quotaStream is the gRPC stream of one Envoy's usage reports and the
// answers to them.
type quotaStream = grpc.BidiStreamingServer[rlqspb.RateLimitQuotaUsageReports, rlqspb.RateLimitQuotaResponse]

// StreamRateLimitQuotas answers each usage report of one Envoy with an
// action for every bucket it reported. It returns when the stream's
// context ends, whatever its receiver is doing, so that the stream's place
// in the server's bound is given back; after SilentAfter without a report;
// or when Evict picks it.
func (s *Service) StreamRateLimitQuotas(st grpc.BidiStreamingServer[rlqspb.RateLimitQuotaUsageReports, rlqspb.RateLimitQuotaResponse]) error {
	// Evict sees a stream from its first report on: before it, the stream
	// holds no place in the server's bound, and closing it frees none. It
	// is told the stream is gone last, once its shares are given back.
	var me *stream
	defer func() {
		if me != nil {
			s.leave(me)
		}
	}()
	c := &client{id: s.instance + "-" + itoa(s.nextID.Add(1)), buckets: make(map[string]*bucket)}
	s.stats.Streams.Add(1)
	defer s.stats.Streams.Add(-1)
	if s.opts.ClientOf != nil {
		if name := s.opts.ClientOf(st.Context()); name != "" {
			c.group = s.join(name)
			defer s.quit(name, c.group)
		}
	}
	defer s.close(c)
	ctx, cancel := context.WithCancelCause(st.Context())
	defer cancel(nil)
	var err error
	me, err = s.answerReports(ctx, cancel, st, c)
	return err
}

// answerReports answers c's reports on st until the stream ends, and says
// why it ended. It returns the stream as Evict sees it from the first
// report on (nil before one came), for the caller to take out last.
func (s *Service) answerReports(ctx context.Context, cancel context.CancelCauseFunc, st quotaStream, c *client) (*stream, error) {
	msgs, errc := receiveReports(ctx, st)
	silent := time.NewTimer(s.opts.SilentAfter)
	defer silent.Stop()
	var me *stream
	for {
		select {
		case <-ctx.Done():
			return me, s.endedByContext(ctx)
		case <-silent.C:
			s.stats.Silent.Add(1)
			return me, status.Error(codes.DeadlineExceeded, "rlqs: no report for "+s.opts.SilentAfter.String())
		case <-s.done:
			// Envoy restarts its stream at its next report, on another
			// instance or on this one once it is back.
			return me, status.Error(codes.Unavailable, "envoy-rls is shutting down")
		case err := <-errc:
			if errors.Is(err, io.EOF) {
				return me, nil
			}
			return me, err
		case msg := <-msgs:
			now := s.opts.Now()
			silent.Reset(s.opts.SilentAfter)
			if me == nil {
				me = s.enter(cancel, now)
			}
			me.last.Store(now.UnixNano())
			if err := st.Send(s.answer(ctx, c, msg, now)); err != nil {
				return me, err
			}
		}
	}
}

// receiveReports hands each report st receives over on the first channel,
// until ctx ends, and the error that ends the receiving on the second.
func receiveReports(ctx context.Context, st quotaStream) (<-chan *rlqspb.RateLimitQuotaUsageReports, <-chan error) {
	msgs := make(chan *rlqspb.RateLimitQuotaUsageReports)
	errc := make(chan error, 1)
	go func() {
		for {
			msg, err := st.Recv()
			if err != nil {
				errc <- err
				return
			}
			select {
			case msgs <- msg:
			case <-ctx.Done():
				return
			}
		}
	}()
	return msgs, errc
}

// endedByContext is the status of a stream whose context ended: evicted
// for a new stream, or cancelled or past its deadline. The receiver may
// have stopped without a word, on a message it could not hand over: only
// the context tells the stream is over, and the stream's place is held
// until StreamRateLimitQuotas returns.
func (s *Service) endedByContext(ctx context.Context) error {
	if errors.Is(context.Cause(ctx), errEvicted) {
		s.stats.Evicted.Add(1)
		return status.Error(codes.ResourceExhausted, "rlqs: the longest-silent stream, closed for a new one: every stream place is taken")
	}
	return status.FromContextError(ctx.Err()).Err()
}

// Drain ends every stream, now and to come, with UNAVAILABLE, so that a
// graceful stop need not wait for streams that last as long as Envoy
// wants.
func (s *Service) Drain() {
	s.drainOnce.Do(func() { close(s.done) })
}
