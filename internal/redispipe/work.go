package redispipe

import (
	"context"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"
)

// Work is what one call sends in one round trip: commands, each with its
// key first (CmdKey), which Pipes.Send merges with the work of concurrent
// calls. Once it is sent, every command holds its reply, unless Err is
// set: then the call stopped waiting and must read none of them.
type Work struct {
	Cmds []redis.Cmder
	// Clock, when set, asks Redis's TIME in the same pipeline (a call
	// that has no estimate of the clock to use).
	Clock *Probe
	// Decisions is how many decisions the work carries, for
	// Options.OnPipeline and the pipeline's span; work that decides
	// nothing (an undo sent after the answer) is no call of its own.
	Decisions int
	Err       error
	// Caller is the sampled span of the call the work is for, when the
	// pipes trace (trace.go); nil otherwise. Send sets it.
	Caller *trace.Span
	// Then is what follows the work once its replies are in, for the
	// caller to run: work that depends on them, sent in turn.
	Then []func(ctx context.Context)
}

// keys yields the key of each command of wk ("" for a command without
// one).
func (wk *Work) keys(yield func(key string) bool) {
	for _, c := range wk.Cmds {
		k, _ := CmdKey(c)
		if !yield(k) {
			return
		}
	}
}

// nodeFailed reports whether a command of groups could not reach its node.
func nodeFailed(groups []*Work) bool {
	for _, g := range groups {
		for _, c := range g.Cmds {
			if FailedOn(c.Err()) {
				return true
			}
		}
	}
	return false
}

// CmdKey is the key of a command of a Work: its first argument after the
// name.
func CmdKey(c redis.Cmder) (string, bool) {
	args := c.Args()
	if len(args) < 2 {
		return "", false
	}
	k, ok := args[1].(string)
	return k, ok
}
