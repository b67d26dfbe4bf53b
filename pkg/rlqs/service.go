// Package rlqs serves envoy.service.rate_limit_quota.v3: each Envoy reports,
// per bucket, the requests it allowed and denied, and gets back a share of
// the bucket's limit to enforce by itself as a token bucket, so that no
// request waits on a call to this service.
//
// A bucket id is matched against the limits of the report's domain, the
// same descriptor trees the RLS service reads; a limit's rate is global,
// divided max-min fairly (package share) among every client that reports a
// bucket, on every instance that shares the DemandStore.
package rlqs

import (
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
	"github.com/envoy-rls/envoy-rls/pkg/rlqs/share"
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
	// abandoned; default twelve report intervals.
	IdleAfter time.Duration
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
	// Band is the hysteresis of a share, as a fraction; default 0.05.
	Band float64
	// Shape bounds the token buckets; default share.DefaultShape.
	Shape share.Shape
	// Store holds the demands across instances; default a Memory store
	// (this instance's clients only).
	Store DemandStore
	// Logger defaults to zap.NewNop().
	Logger *zap.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
}

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
	if opts.Band <= 0 {
		opts.Band = 0.05
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
		instance: hex.EncodeToString(id[:]), divs: make(map[string]*division), done: make(chan struct{}), rules: newRuleTotals()}
	if s.store == nil {
		s.store = s.local
	}
	return s, nil
}

// StreamRateLimitQuotas answers each usage report of one Envoy with an
// action for every bucket it reported.
func (s *Service) StreamRateLimitQuotas(st grpc.BidiStreamingServer[rlqspb.RateLimitQuotaUsageReports, rlqspb.RateLimitQuotaResponse]) error {
	c := &client{id: s.instance + "-" + itoa(s.nextID.Add(1)), buckets: make(map[string]*bucket)}
	s.stats.Streams.Add(1)
	defer s.stats.Streams.Add(-1)
	defer s.close(c)
	ctx := st.Context()
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
	for {
		select {
		case <-s.done:
			// Envoy restarts its stream at its next report, on another
			// instance or on this one once it is back.
			return status.Error(codes.Unavailable, "envoy-rls is shutting down")
		case err := <-errc:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case msg := <-msgs:
			if err := st.Send(s.answer(ctx, c, msg, s.opts.Now())); err != nil {
				return err
			}
		}
	}
}

// Drain ends every stream, now and to come, with UNAVAILABLE, so that a
// graceful stop need not wait for streams that last as long as Envoy
// wants.
func (s *Service) Drain() {
	s.drainOnce.Do(func() { close(s.done) })
}
