package redispipe

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits/breaker"
)

// A master of a cluster that hangs (a paused process, a host that stopped
// answering) holds every call on its keys for the store timeout, until its
// replica is promoted or it answers again: each such call costs its caller
// the whole timeout. So each master has a gate, which the calls for its
// keys pass on their way to its batcher. Once calls have kept timing out on
// it, the gate shuts, and a call for its keys fails at once, unavailable,
// without waiting; one call is let through now and then to probe, and the
// first that is answered opens the gate again, as does a reload of the
// map whose PING the master answers. A key whose slot moves to another
// master goes through that master's gate. The other masters' gates, and so
// their keys, are untouched.
//
// A gate is a breaker.Circuit, the state machine of pkg/limits/breaker's
// Breaker, so it shuts on the same terms, for the same reason:
// calls in flight when a master stalls for a moment all time out together,
// and counting them as failures in a row would shut the gate on a stall
// that is over. It shuts once shutAfter calls in a row have failed on the
// master, the latest recorded at least a store timeout after the first:
// a call made after the first failure was known failed too. A master that
// hangs thus costs the calls of about two store timeouts their full wait,
// and later ones nothing. The first probe goes a store timeout after the
// gate shuts; each failed probe doubles the wait, up to maxProbeWait.

// shutAfter is how many calls in a row must fail on a master, spanning a
// store timeout, to shut its gate.
const shutAfter = 2

// maxProbeWait is the longest wait between two probes of a shut gate: a
// master that answers again after a long hang is used again within about
// that much (or the next reload of the map, if sooner).
const maxProbeWait = 500 * time.Millisecond

// errMasterDown is the error of a call refused by a shut gate; the store
// reports it unavailable, so the failure mode applies.
var errMasterDown = errors.New("cluster master not answering: failing fast until a probe is answered")

// newGate is a master's gate: a circuit of package breaker, with the
// store's timeout.
func newGate(timeout time.Duration) *breaker.Circuit {
	return breaker.NewCircuit(breaker.Options{Failures: shutAfter, Timeout: timeout, Cooldown: maxProbeWait})
}

// outcomeOn is what wk, sent with ctx to one master through b, tells its
// gate: what it found (outcomeOf), but a call that timed out on a master
// whose pipelines came back within the last timeout, however late,
// proves it slow, not down, and counts for nothing, as for the store's
// breaker (breaker.Answering): a far master that answers past the store
// timeout is not shut out by its own slowness, while one that hangs
// answers nothing and shuts its gate about a timeout later.
func outcomeOn(ctx context.Context, wk *Work, b *batcher, timeout time.Duration) breaker.Outcome {
	o := outcomeOf(ctx, wk)
	if o == breaker.Down && timedOut(wk) && b.answeredWithin(timeout) {
		return breaker.Unknown
	}
	return o
}

// timedOut reports whether wk stopped waiting at its deadline, or every
// command of it failed by a timeout: a master that refuses connections,
// or answers an error, is not slow.
func timedOut(wk *Work) bool {
	if wk.Err != nil {
		return errors.Is(wk.Err, context.DeadlineExceeded)
	}
	for _, c := range wk.Cmds {
		if err := c.Err(); !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, os.ErrDeadlineExceeded) {
			return false
		}
	}
	return len(wk.Cmds) > 0
}

// outcomeOf tells what wk, sent with ctx to one master, found: down when
// it stopped waiting at its deadline or every command failed to reach the
// node, unknown when its caller gave up (or it sent nothing).
func outcomeOf(ctx context.Context, wk *Work) breaker.Outcome {
	if errors.Is(context.Cause(ctx), context.Canceled) {
		return breaker.Unknown
	}
	if wk.Err != nil {
		if errors.Is(wk.Err, context.DeadlineExceeded) {
			return breaker.Down
		}
		return breaker.Unknown
	}
	for _, c := range wk.Cmds {
		if !FailedOn(c.Err()) {
			return breaker.Answered
		}
	}
	if len(wk.Cmds) == 0 {
		return breaker.Unknown
	}
	return breaker.Down
}
