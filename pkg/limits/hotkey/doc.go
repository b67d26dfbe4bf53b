// Package hotkey is the hot-key mode of a shared store (a limit's
// sync_interval): a layer in front of the Redis store that decides most
// hits of a busy key on this instance, and goes to Redis about once per
// interval per key instead of once per call.
//
// New wraps a limits.Store in a Store, itself a limits.Store. A hit whose
// limit has no SyncInterval (and every hit of a call without one) goes to
// the store it wraps untouched, so that a config without the mode is
// decided exactly as without this layer.
//
// # Shares taken ahead
//
// An instance never admits a hit that Redis has not counted. When a key
// of the mode is hit, the instance charges Redis, on the plain limit's own
// counters, for a share of the limit: about twice what this instance
// admitted of the key in one interval, at most a quarter of what Redis
// said remains. It then admits hits from that share locally until the
// share runs out or the interval ends, and goes back to Redis with one
// charge that tops the share up for the next interval (what is left of a
// window's share is kept and the charge is the difference; what is left
// of a token bucket's share is given back by a refund sent in the same
// call). So Redis's count of a window is never above the limit, and every
// instance, with the mode or without, reads the same counters.
//
// A share of a window holds only in the window it was charged in: its end
// is read from Redis's answer (ResetAfter, counted from before the call
// was sent, so never later than the real end) and the share is dropped
// there. A token bucket's share holds one interval; its tokens were taken
// up to one interval before the hits that use them, which is what the
// mode can let through beyond the exact bucket (docs/semantics.md, "Hot
// keys").
//
// # Near the limit, and cold keys
//
// When the share worth taking is no more than the hit itself (Redis said
// little remains, or the key is not hit often enough to be worth a share),
// or Redis refuses the share, the hit goes to the store as a plain hit,
// decided exactly; its answer tells this instance what remains, and the
// next share is taken once enough does. A key seen for the first time, or
// again after a few idle intervals, is decided plainly first, to measure
// its rate.
//
// Hits that cannot take a share go to the store plainly too: joint runs
// (a descriptor's several limits, decided together), peeks and refunds
// (cost ≤ 0), and hits with a hold.
//
// # Failures
//
// A share is only taken or topped up in the caller's call, under its
// context: when Redis fails, the hit that needed it gets the store's error
// (the service's failure mode decides it, as without the mode). A share is
// not used past its interval, but for what is left of a window's while its
// top up is in flight (it is paid for in Redis already), so within about
// one interval and one store timeout of Redis going down every hit of the
// key takes the failure mode. A call that plans a sync waits for no other
// call's: two calls that each wait for the other's unsent sync would wait
// until their deadlines.
//
// # Bounds
//
// Keys are kept in sharded maps of at most MaxKeys entries; a full shard
// drops an idle entry among a few it looks at, or an arbitrary one. A
// dropped entry's share is lost to the limit until its window ends (a
// bucket's, until it refills): a lower throughput, never a higher one.
package hotkey
