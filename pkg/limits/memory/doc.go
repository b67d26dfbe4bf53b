// Package memory is the embedded store: limits decided in process, for a
// single instance, for tests, and as the "local" failure mode when Redis is
// unreachable.
//
// New makes a Store from Options (their zero value is usable: MaxKeys
// keys at most, swept every SweepInterval); it is a limits.Store, safe for
// concurrent use, that decides exactly as every store does (package
// storetest). Close stops its janitor; Stats counts its keys and what it
// forgot. It shares nothing between processes: instances that must agree
// on a count need package redisstore.
//
// # How memory is bounded
//
// Keys live in up to 64 shards, each a mutex over a map, eviction lists and
// a heap of expiry instants. A decision is one critical section of its key's
// shard, so it is atomic per key; shards keep unrelated keys from contending.
//
// Memory is bounded by Options.MaxKeys, each shard holding its share. A full
// shard forgets what is cheapest to forget first: expired state; then keys
// in probation; then, only if nothing else is left, established keys. A key
// is in probation from the decision that stores it until it is decided
// again while held (allowed, refused or peeked at), which establishes it.
// Within each of the two, a key with more than half its quota left goes
// before one with half or less, which goes before one with none, and among
// equals the least recently decided goes first. Established keys weigh at
// most 4/5 of the shard: beyond that, the one that would go first of them
// goes back to probation (a segmented LRU, ranked by quota left).
//
// So a flood of new keys, each decided once, however many, makes the store
// forget only expired state and keys in probation, rank by rank (once one
// of the flood's keys is held, only keys ranked no higher than it): keys
// decided once, each losing at most what that decision charged, and
// established keys that went back to probation. It never pushes out an
// established key that has not: such a key, for instance one at its limit
// that a refusal has touched, is kept until its state expires, provided no
// single new key weighs more than a fifth of the shard's share (a new key
// weighs 1, a sliding log's first hit 2). Established keys go back to
// probation only as keys are established or grow (a sliding log): when the
// shard's established keys outweigh their 4/5 (a full shard whose keys are
// all established and live), those with the most quota left, least
// recently decided first; a key at its limit only once every established
// key of its shard is at its limit too and was decided more recently. Each
// live key forgotten counts in Stats.Evictions.
//
// Holds (limits.Hold) live beside their key's entry and weigh as much as a
// key each, so MaxKeys bounds them too; they are exact: a lapsed hold is
// given back before any decision reads its key, and by the janitor for keys
// nobody decides (holds.go). A key without holds pays nothing for them.
//
// A key's shard is chosen by its hit's Tag, the hash of its Redis Cluster
// hash tag, when it has one, else by a hash of the whole key. The keys of a
// joint run (one descriptor's rate_limits list) share a tag, so a run locks
// a single shard; a run whose keys do not share one still decides
// atomically, locking its shards in index order.
package memory
