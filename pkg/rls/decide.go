package rls

import (
	"context"
	"errors"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// ShouldRateLimit decides every descriptor of req.
func (s *Service) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	start := time.Now()
	resp, err := s.decide(ctx, req)
	code := "invalid"
	switch {
	case err == nil && resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT:
		code = "over_limit"
	case err == nil:
		code = "ok"
	case status.Code(err) == codes.Unavailable:
		code = "unavailable"
	}
	s.metrics.Request(code, time.Since(start), errType(err)) // errType: stats.go
	if s.tracer != nil {
		annotateCall(ctx, req, resp) // trace.go
	}
	return resp, err
}

// delayMargin is kept between a leaky bucket's wait and the request's
// deadline, for the answer to travel back.
const delayMargin = 2 * time.Millisecond

// decide carries out the plan of req: build it, one store call, one failure
// pass, the verdicts, the answer.
func (s *Service) decide(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	if err := s.validate(req); err != nil {
		return nil, err
	}
	p, err := s.planRequest(ctx, req)
	if p != nil {
		defer p.release()
	}
	if err != nil {
		return nil, err
	}
	if len(p.hits) > 0 {
		t0 := time.Now()
		if s.tracer != nil {
			s.tracedCallStore(ctx, t0, p) // trace.go
		} else {
			s.callStore(ctx, t0, p.hits, p.results)
		}
		s.metrics.StoreCall(time.Since(t0))
		if err := s.applyFailureModes(ctx, p); err != nil {
			return nil, err
		}
		s.countHolds(p) // holds.go
	}
	p.settle(s)
	resp, delay := s.respond(p, req)
	if s.tracer != nil {
		annotateRule(ctx, p, resp) // trace.go
	}
	if delay > 0 {
		// A leaky bucket shapes: the answer goes out at the request's turn.
		// The store refused any turn beyond the deadline; a store call that
		// was slower than expected shortens the wait rather than letting the
		// call time out.
		if dl, ok := ctx.Deadline(); ok {
			delay = min(delay, time.Until(dl)-delayMargin)
		}
		if err := sleep(ctx, delay); err != nil {
			return nil, status.FromContextError(err).Err()
		}
	}
	return resp, nil
}

// planRequest builds the plan of a validated request. The plan it returns,
// even with an error, goes back to the pool with release.
func (s *Service) planRequest(ctx context.Context, req *rlsv3.RateLimitRequest) (*plan, error) {
	ix := s.index.Load()
	if !ix.Loaded() {
		// Started before any config arrived (xDS, force-start): no answer
		// is right, so Envoy's own failure mode decides, as
		// envoyproxy/ratelimit leaves it to.
		return nil, errNoConfig
	}
	p := newPlan(ix, req.GetDomain(), len(req.Descriptors))
	for i, d := range req.Descriptors {
		// Every descriptor's entries stay in p.entries, one after another.
		lo := len(p.entries)
		for _, e := range d.Entries {
			p.entries = append(p.entries, descriptors.Entry{Key: e.GetKey(), Value: e.GetValue()})
		}
		hold, err := p.takeHold(lo) // holds.go
		if err != nil {
			return p, s.holdInvalid(p, i, err)
		}
		in := descriptorInput{entries: p.entries[lo:len(p.entries):len(p.entries)], override: d.GetLimit(), cost: cost(req, d), hold: hold}
		if err := p.add(s, ix, in); err != nil {
			return p, status.Errorf(codes.InvalidArgument, "descriptor %d: %v", i, err)
		}
	}
	p.finish(s, s.maxDelayFor(ctx))
	return p, nil
}

// ErrNotLoaded is Explain's and Reset's error for a request that arrives
// before any config has; errNoConfig is the decision's, for gRPC.
var (
	ErrNotLoaded = errors.New("no rate limit configuration loaded")
	errNoConfig  = status.Error(codes.Unavailable, ErrNotLoaded.Error())
)

// maxDelayFor bounds a leaky bucket's wait for a request of ctx: never past
// its deadline, nor -max-delay (a descriptor limit override can slow a
// bucket down far beyond what its file allows).
func (s *Service) maxDelayFor(ctx context.Context) time.Duration {
	maxDelay := s.maxDelay
	if dl, ok := ctx.Deadline(); ok {
		maxDelay = min(maxDelay, max(time.Until(dl)-delayMargin, time.Microsecond))
	}
	return maxDelay
}

// callStore decides hits into results, started at t0. An in-process store
// needs no bound, and a request whose own deadline comes before
// -store-timeout no context of its own (Envoy's usual 20 ms against 50 ms).
// Any other call shares a bound with the calls that start about when it
// does (deadline.go).
func (s *Service) callStore(ctx context.Context, t0 time.Time, hits []limits.Hit, results []limits.Result) {
	s.store.Decide(s.storeContext(ctx, t0), hits, results)
}

// storeContext is the context of a store call of ctx's request started at
// t0: ctx itself, or the bound it shares (callStore).
func (s *Service) storeContext(ctx context.Context, t0 time.Time) context.Context {
	if dl, ok := ctx.Deadline(); s.inProcess || ok && dl.Sub(t0) <= s.storeTimeout {
		return ctx
	}
	return s.deadlines.context(t0)
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
