// Package overlimit is a local over-limit cache in front of a shared store:
// once the store has refused a key, the same hit is refused here, without a
// round trip, until the moment the store said it would be allowed again.
//
// New wraps a limits.Store in a Cache, itself a limits.Store: put it in
// front of a Redis store, to spare Redis the hits of a client that keeps
// calling past its limit. Clear forgets everything (call it when the
// config changes: rls.Options.OnConfigChange); Forget drops given keys.
// It only ever answers refusals the store gave first, and never allows a
// hit by itself; over an embedded store it saves nothing.
//
// # What is cached
//
// Only a refusal of a hit of cost 1 with Remaining 0, not part of a joint
// run (a run is decided in one atomic step by the store), of a limit whose
// refusal lasts until RetryAfter if nothing else arrives: one that is not
// count_refused (a refused hit changes nothing), but for a leaky_bucket (its
// answer depends on the caller's deadline); and a count_refused
// fixed_window, whose count only grows until its window ends, so that a
// refused hit answered here rather than added to the count changes no
// answer, only the count: as envoyproxy/ratelimit's local cache
// (LOCAL_CACHE_SIZE_IN_BYTES), which skips the increment of a key it holds.
// A count_refused sliding window or bucket carries a refused hit into later
// answers, so it is never cached. The entry remembers the key, the limit
// value, and T = (local time the store call was sent) + RetryAfter (and
// likewise the instant the key is back at its maximum, from ResetAfter).
// Redis decided
// at or after the send, so T is never later than the real moment the key
// allows again: the cache errs toward asking the store.
//
// # What is answered locally
//
// Until T, a hit of cost exactly 1 on a cached key with the same limit value
// is answered as refused, Remaining 0, RetryAfter T − now (a lower bound of
// the store's answer, by at most the store call's latency; ResetAfter
// likewise). Hits of any other
// cost go to the store: a peek (cost 0) and a refund (cost < 0) always, as
// their answer is not a refusal (envoyproxy/ratelimit serves them from its
// over-limit cache, and so answers a peek or a refund on a cached key as
// refused), and a cost above 1 too, so that its RetryAfter stays exact.
// A refund sent through this cache also forgets the key (it may be allowed
// again at once); a refund sent through another instance is not seen, so this
// instance may go on refusing that key until T, never longer than the store
// first said.
//
// A hit with a hold id (limits.Hold) is never answered here nor cached: a
// settle must reach the store, which ends the hold and charges the actual
// cost, and a reserve may repeat one the store holds, which the store
// answers allowed. A settle also forgets the key, as a refund does, since
// it gives the held cost back; a hold that lapses, or a settle sent
// through another instance, is not seen, as a refund there is not.
//
// # Config changes
//
// An entry also matches on the limit value, so a changed limit misses; and
// Clear, which rls.Options.OnConfigChange calls on every SetIndex, forgets
// everything, so that no decision of an old config outlives it.
//
// # Bounds
//
// Entries are kept in sharded maps; each shard holds at most MaxEntries /
// shards. An entry expires at its T (a lookup at or after T drops it); a
// full shard makes room by dropping the expired entries among a few it looks
// at, or else an arbitrary live one (a dropped entry only means the store is
// asked again).
package overlimit
