package redisstore

import "github.com/redis/go-redis/v9"

// writes are the commands of a hit whose replies its decision does not
// otherwise read: a charge's ZADD, the ZREMRANGEBYSCORE before it, a
// release's ZPOPMIN, the PEXPIRE that gives a key its TTL, a refund's DEL
// of a lock. Their errors are read all the same (err), since a write
// Redis refuses must fail the hit into its limit's failure mode: a ZADD
// refused (out of memory under noeviction, a user without the command)
// followed by a ZCARD that answers would otherwise pass for a hit that
// found the key empty, allowed with the whole limit remaining, and a
// PEXPIRE refused would leave the key without a TTL, silently.
//
// A fixed array, so that keeping them costs the hit no allocation.
type writes struct {
	cmds [3]redis.Cmder
	n    int
}

// keep records cmd among the hit's writes and returns it, for the
// pipeline.
func (w *writes) keep(cmd redis.Cmder) redis.Cmder {
	w.cmds[w.n] = cmd
	w.n++
	return cmd
}

// err is the first error of the writes, nil when Redis did them all.
func (w *writes) err() error {
	for _, cmd := range w.cmds[:w.n] {
		if err := cmd.Err(); err != nil {
			return err
		}
	}
	return nil
}
