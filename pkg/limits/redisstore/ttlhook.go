package redisstore

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// LongerTTLs returns a go-redis hook that adds d to the milliseconds of
// every PEXPIRE sent through the client it is added to. It is for a
// Store with Options.Clock, whose instants are not Redis's: the store
// sets a key's TTL by its clock and Redis counts it down by its own, so a
// replay or a test that runs slower than real time would see a window's
// counter, a bucket's state or a log expire before its clock reaches
// their end, and decide on an absent key. A key kept longer decides
// nothing differently: a window's key names its window, and a bucket's
// state and a log's members carry their instants, past which they read as
// absent (ttlMillis). Lockouts and holds set their TTLs otherwise (SET …
// PX), and are not lengthened.
func LongerTTLs(d time.Duration) redis.Hook { return longerTTLs{ms: d.Milliseconds()} }

type longerTTLs struct{ ms int64 }

func (longerTTLs) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h longerTTLs) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.lengthen(cmd)
		return next(ctx, cmd)
	}
}

func (h longerTTLs) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.lengthen(cmd)
		}
		return next(ctx, cmds)
	}
}

// lengthen adds h.ms to a PEXPIRE's milliseconds, in place, before the
// command is written.
func (h longerTTLs) lengthen(cmd redis.Cmder) {
	if args := cmd.Args(); cmd.Name() == "pexpire" && len(args) >= 3 {
		if ms, ok := args[2].(int64); ok {
			args[2] = ms + h.ms
		}
	}
}
