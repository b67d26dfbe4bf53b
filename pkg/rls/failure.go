package rls

import (
	"context"
	"errors"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/envoy-rls/envoy-rls/internal/metrics"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// errUnavailable is what a caller is told when failure mode `error` answers:
// a plain message. What the store said (an address, a Redis error) goes to
// the log, not to whoever reaches /json.
var errUnavailable = status.Error(codes.Unavailable, "rate limit store unavailable")

// applyFailureModes is the one pass over the descriptors whose store call
// failed. Each takes the strictest failure mode of its limits: `error`
// fails the whole call with UNAVAILABLE, so that Envoy's own
// failure_mode_deny decides; `local` decides the descriptor again on this
// instance's embedded store (per instance, so approximate); `deny` and
// `allow` are marked for settle to answer.
func (s *Service) applyFailureModes(ctx context.Context, p *plan) error {
	var local []*planned
	for i := range p.descs {
		d := &p.descs[i]
		if !d.decided() {
			continue
		}
		err := firstError(d.results)
		if err == nil {
			continue
		}
		mode, rule := s.failureModeOf(d)
		s.metrics.StoreError(errorKind(err))
		s.log.Warn("store call failed", zap.String("domain", p.domain), zap.String("rule", ruleName(d, rule)),
			zap.String("failure_mode", mode.String()), zap.Error(err))
		switch {
		case mode == config.FailError:
			return errUnavailable
		case mode == config.FailLocal && s.local != nil:
			local = append(local, d)
		default:
			d.failure = &storeFailure{err: err, mode: mode, rule: rule}
		}
	}
	for _, d := range local {
		// The embedded store decides in process: one call per descriptor
		// costs no round trip.
		s.local.Decide(ctx, d.hits, d.results)
		s.metrics.LocalFallback()
	}
	return nil
}

// failureModeOf is the mode of a descriptor whose store call failed: with
// several limits, the strictest of theirs (error, then deny, then local,
// then allow), and the limit it is from.
func (s *Service) failureModeOf(d *planned) (config.FailureMode, *config.Rule) {
	mode, rule := config.FailAllow, d.rules[0]
	for _, r := range d.rules {
		m := r.FailureMode
		if m == config.FailureModeDefault {
			m = s.failureMode
		}
		if failureRank[m] > failureRank[mode] {
			mode, rule = m, r
		}
	}
	if mode == config.FailLocal && s.local == nil {
		// Without an embedded store, `local` acts as `allow`.
		mode = config.FailAllow
	}
	return mode, rule
}

// failureRank orders the failure modes from the most lenient to the
// strictest; it is read on every failed descriptor during an outage, so it
// is built once.
var failureRank = [...]int{config.FailAllow: 0, config.FailLocal: 1, config.FailDeny: 2, config.FailError: 3}

// failureOutcome is how settle answers a descriptor its failure mode
// decides: deny refuses (but only in a dry run under shadow mode); allow
// lets it through.
func failureOutcome(f *storeFailure, shadow bool) (outcome string, over bool) {
	switch {
	case f.mode == config.FailDeny && !shadow:
		return metrics.OutcomeFailedDeny, true
	case f.mode == config.FailDeny:
		return metrics.OutcomeShadowOver, false
	}
	return metrics.OutcomeFailedAllow, false
}

func firstError(results []limits.Result) error {
	for _, r := range results {
		if r.Err != nil {
			return r.Err
		}
	}
	return nil
}

func errorKind(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, limits.ErrUnavailable):
		return "unavailable"
	}
	return "error"
}
