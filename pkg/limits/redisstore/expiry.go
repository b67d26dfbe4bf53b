package redisstore

import (
	"hash/maphash"
	"math/rand/v2"
	"sync/atomic"
)

// expirySlots is the number of window counters an expirySeen remembers:
// 512 KiB of hashes. A counter it has forgotten only costs its next hit a
// PEXPIRE again.
const expirySlots = 1 << 16

// expirySeen remembers the window counters whose expiry this instance has
// seen set, so that further hits on one send their charge alone: a window's
// PEXPIRE … NX changes nothing once the counter has a TTL, and it is half
// of what a hit costs Redis (issue #13). The first hit of each instance on a
// counter still sends it, in the same pipeline as its charge, so a counter
// never waits on another instance for its TTL.
//
// What could leave a counter without a TTL is its being created again after
// this instance saw its expiry: Redis restarted with no data, or a replica
// without the tail of its master's stream took over. The first is caught at
// once: a charge whose reply is its own cost found no count, and the store
// then sends the PEXPIRE in a second round trip (as it gives back a refused
// cost). Both come with errors on the connections that were open, and every
// error forgets everything seen (forget), so the next hits set the TTL
// again.
//
// It is a table of hashes indexed by their low bits, each slot holding the
// last counter stored there; a slot that another counter took only costs a
// PEXPIRE again, and the 64-bit hash makes a false match (which the reply
// check above still covers) negligible. Each entry is mixed with an epoch,
// and forget draws a new one: everything stored before no longer matches,
// at the cost of one store, however often calls fail.
type expirySeen struct {
	seed  maphash.Seed
	epoch atomic.Uint64
	slots [expirySlots]atomic.Uint64
}

func newExpirySeen() *expirySeen {
	e := &expirySeen{seed: maphash.MakeSeed()}
	e.forget()
	return e
}

// hash is key's entry in the table.
func (e *expirySeen) hash(key string) uint64 {
	return maphash.String(e.seed, key)
}

// has reports whether the counter of hash h was seen with its expiry set.
func (e *expirySeen) has(h uint64) bool {
	return e.slots[h%expirySlots].Load() == h^e.epoch.Load()
}

// add records that the counter of hash h has its expiry set.
func (e *expirySeen) add(h uint64) {
	e.slots[h%expirySlots].Store(h ^ e.epoch.Load())
}

// forget drops everything seen: after an error, Redis may have lost keys or
// handed over to a replica that lacks some TTLs.
func (e *expirySeen) forget() {
	e.epoch.Store(rand.Uint64())
}

// drop forgets that the counter of hash h had its expiry set (it was
// deleted), so that its next hit sends its PEXPIRE again.
func (e *expirySeen) drop(h uint64) {
	e.slots[h%expirySlots].CompareAndSwap(h^e.epoch.Load(), 0)
}
