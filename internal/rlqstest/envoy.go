package rlqstest

import (
	"context"
	"errors"
	"sync"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// DefaultReportInterval is Envoy's fixed report interval.
const DefaultReportInterval = 5 * time.Second

// Options configure an Envoy.
type Options struct {
	// Domain goes on every report.
	Domain string
	// ReportInterval is how often every bucket is reported (default
	// DefaultReportInterval); tests shorten it.
	ReportInterval time.Duration
	// Behavior is what buckets do without an assignment.
	Behavior Behavior
	// Logger (default zap.NewNop()).
	Logger *zap.Logger
}

// Stats are an Envoy's counters since it started.
type Stats struct {
	Allowed, Denied uint64
	// Reports counts the messages sent; Responses those received.
	Reports, Responses int
	// Streams counts the streams opened (1 plus the reconnections).
	Streams int
	// Dropped and Skipped are Quota's.
	Dropped, Skipped int
}

// Envoy is one simulated Envoy: a Quota on the real clock, with a stream
// to the server and a report timer. Its methods are safe for concurrent
// use.
type Envoy struct {
	client   rlqspb.RateLimitQuotaServiceClient
	opts     Options
	ctx      context.Context
	cancel   context.CancelFunc
	done     chan struct{}
	mu       sync.Mutex // guards quota, stats, stream
	quota    *Quota
	stats    Stats
	stream   rlqspb.RateLimitQuotaService_StreamRateLimitQuotasClient
	streamCx context.CancelFunc
	sendMu   sync.Mutex // one Send at a time on the stream
	openMu   sync.Mutex // one stream opened at a time
	timer    sync.Once  // starts tick, or (in Close) stands in for it
}

// New returns a simulated Envoy on conn; it opens its stream and starts
// its report timer at its first request, as Envoy does. Close stops it.
func New(conn grpc.ClientConnInterface, opts Options) *Envoy {
	if opts.ReportInterval <= 0 {
		opts.ReportInterval = DefaultReportInterval
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &Envoy{
		client: rlqspb.NewRateLimitQuotaServiceClient(conn),
		opts:   opts, ctx: ctx, cancel: cancel, done: make(chan struct{}),
		quota: NewQuota(opts.Behavior),
	}
	return e
}

// Allow is one request of bucket id passing the filter: true if allowed.
// A bucket's first request is reported at once.
func (e *Envoy) Allow(id map[string]string) bool {
	now := time.Now()
	e.mu.Lock()
	allowed, first := e.quota.Allow(id, now)
	if allowed {
		e.stats.Allowed++
	} else {
		e.stats.Denied++
	}
	var r *rlqspb.RateLimitQuotaUsageReports
	if first {
		r = e.quota.FirstReport(e.opts.Domain, id, now)
	}
	e.mu.Unlock()
	if r != nil {
		// Envoy starts its report timer when its first bucket is created.
		e.timer.Do(func() { go e.tick() })
		e.send(r)
	}
	return allowed
}

// Strategy is bucket id's current strategy (nil: none) and whether this
// Envoy has the bucket.
func (e *Envoy) Strategy(id map[string]string) (*typev3.RateLimitStrategy, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.quota.Strategy(id, time.Now())
}

// Stats returns the counters.
func (e *Envoy) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.stats
	s.Dropped, s.Skipped = e.quota.Dropped, e.quota.Skipped
	return s
}

// Close stops the timer and closes the stream, as an Envoy leaving does.
func (e *Envoy) Close() {
	e.cancel()
	e.timer.Do(func() { close(e.done) }) // no timer was started
	<-e.done
	e.mu.Lock()
	defer e.mu.Unlock()
	e.dropStreamLocked()
}

// tick reports every bucket each interval; a stream that ended is opened
// again here, as Envoy restarts its stream on its report timer. The timer
// is armed again after each report, as Envoy's is, not a fixed ticker: two
// reports are never less than an interval apart, so time_elapsed, cut to
// whole seconds, is the interval and not a second less when a tick comes
// early.
func (e *Envoy) tick() {
	defer close(e.done)
	t := time.NewTimer(e.opts.ReportInterval)
	defer t.Stop()
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-t.C:
			now := time.Now()
			t.Reset(e.opts.ReportInterval)
			e.mu.Lock()
			r := e.quota.Reports(e.opts.Domain, now)
			e.mu.Unlock()
			if r != nil {
				e.send(r)
			}
		}
	}
}

// send sends r, opening the stream if there is none; when it cannot, the
// report is lost, as Envoy drops it.
func (e *Envoy) send(r *rlqspb.RateLimitQuotaUsageReports) {
	s := e.openStream()
	if s == nil {
		return
	}
	e.sendMu.Lock()
	err := s.Send(r)
	e.sendMu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	if err != nil {
		e.opts.Logger.Debug("report not sent", zap.Error(err))
		if e.stream == s {
			e.dropStreamLocked()
		}
		return
	}
	e.stats.Reports++
}

// openStream returns the current stream, opening one if needed. It holds
// only openMu while it dials, so that requests are not held up by it.
func (e *Envoy) openStream() rlqspb.RateLimitQuotaService_StreamRateLimitQuotasClient {
	e.openMu.Lock()
	defer e.openMu.Unlock()
	e.mu.Lock()
	s := e.stream
	e.mu.Unlock()
	if s != nil || e.ctx.Err() != nil {
		return s
	}
	ctx, cancel := context.WithCancel(e.ctx)
	s, err := e.client.StreamRateLimitQuotas(ctx)
	if err != nil {
		cancel()
		e.opts.Logger.Debug("stream not opened", zap.Error(err))
		return nil
	}
	e.mu.Lock()
	e.stream, e.streamCx = s, cancel
	e.stats.Streams++
	e.mu.Unlock()
	go e.receive(s)
	return s
}

// receive applies the responses of stream s until it ends.
func (e *Envoy) receive(s rlqspb.RateLimitQuotaService_StreamRateLimitQuotasClient) {
	for {
		r, err := s.Recv()
		e.mu.Lock()
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				e.opts.Logger.Debug("stream ended", zap.Error(err))
			}
			if e.stream == s {
				e.dropStreamLocked()
			}
			e.mu.Unlock()
			return
		}
		e.quota.Apply(r, time.Now())
		e.stats.Responses++
		e.mu.Unlock()
	}
}

func (e *Envoy) dropStreamLocked() {
	if e.stream == nil {
		return
	}
	// Cancelling ends the stream for both sides; CloseSend is not used
	// because it may not run beside a Send.
	e.streamCx()
	e.stream, e.streamCx = nil, nil
}
