// Package redisdemand is the DemandStore of package rlqs that Redis holds,
// so that every envoy-rls instance sharing the server divides a bucket's
// limit among the clients of them all, rather than each among its own.
//
// New makes a Store from a go-redis client (plain, failover or cluster:
// it needs only the few commands it sends) and the key prefix; pass it as rlqs.Options.Store. It keeps demands, not counts:
// each Envoy enforces its share by itself, and nothing here decides a
// request.
//
// # How demands are kept
//
// Each bucket is one hash, a field per client whose value is the entry's
// expiry (on the Redis server's clock, in milliseconds) and the demand. A
// report is one pipeline of native commands, as every decision of the
// Redis store is: for each bucket HSET of this client's entry and PEXPIRE
// of the hash; apart, when an instance's division of a bucket is due,
// HGETALL of it, the entries whose expiry has passed left out of the
// answer and deleted after. The key is a hash tag of its own,
// so on a Cluster a bucket lives on one slot.
package redisdemand
