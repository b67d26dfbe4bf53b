package redisstore

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
)

// A sliding window hit reads the previous window's count beside its charge
// (window.go), and that GET is a third of what such a hit costs Redis. Once
// the previous window has been over for a while, its count no longer
// changes in any way that could let more through: prevCounts keeps it, and
// the hits after that send their charge alone.
//
// What can still change a window's count after it has ended:
//
//   - the charge of a hit decided in it whose command reached Redis late. A
//     hit that was answered allowed had its reply before its call's
//     deadline, so its charge ran before the window's end plus the longest
//     wait any call of this store was given. A count read after twice that
//     (prevFinalAfter at least) holds every hit of the window that was
//     allowed; what runs later is the count of calls that had already
//     failed, which their failure mode answered;
//   - a refused hit's undo, and a refund: both lower the count, so the
//     count kept is higher than Redis's, and the estimate stricter, never
//     looser;
//   - Redis losing data (a restart, a failover to a replica behind): the
//     count kept is higher than what is left, stricter again.
//
// Calls of other instances are taken to wait no longer than this one's
// (they share a config). A call without a deadline has no bound on when its
// charge runs: after one, nothing is kept.
type prevCounts struct {
	seed   maphash.Seed
	shards [prevShards]prevShard
	// wait is the longest time to its deadline of any call seen, in µs;
	// noDeadline once a call had none.
	wait atomic.Int64
}

// prevFinalAfter is how far into a window, at the least, its previous
// window's count is taken as final: 250 ms, five times a store call's
// bound (50 ms by default) and far above what the instances' estimates of
// Redis's clock differ by (half a round trip), so that a per-second window,
// the commonest, keeps its previous count for three quarters of each
// second. It was 2 s, which no per-second window ever reached.
const prevFinalAfter = 250_000 // µs

// prevShards × prevPerShard bound the counts kept: 65,536, about 8 MiB at
// the most with their keys. A full shard is emptied: a count it held is
// only read from Redis again.
const (
	prevShards   = 64
	prevPerShard = 1024
)

const noDeadline = -1

type prevShard struct {
	mu sync.Mutex
	m  map[string]int64
}

// coldPrevs takes no previous window's count as final: the windows of a
// round at a provisional instant (Store.now) use it, so that an instant
// Redis's clock belies keeps no count.
var coldPrevs = func() *prevCounts {
	p := newPrevCounts()
	p.wait.Store(noDeadline)
	return p
}()

func newPrevCounts() *prevCounts {
	p := &prevCounts{seed: maphash.MakeSeed()}
	for i := range p.shards {
		p.shards[i].m = make(map[string]int64)
	}
	return p
}

// observe records how long a call may wait, from its deadline (ok false:
// none).
func (p *prevCounts) observe(deadline time.Time, ok bool, now time.Time) {
	if !ok {
		p.wait.Store(noDeadline)
		return
	}
	us := deadline.Sub(now).Microseconds()
	for {
		w := p.wait.Load()
		if w == noDeadline || us <= w || p.wait.CompareAndSwap(w, us) {
			return
		}
	}
}

// final reports whether a window that began at start (µs) has had its
// previous window's count final since before now.
func (p *prevCounts) final(start, now int64) bool {
	w := p.wait.Load()
	return w != noDeadline && now-start >= max(prevFinalAfter, 2*w)
}

func (p *prevCounts) shard(key string) *prevShard {
	return &p.shards[maphash.String(p.seed, key)%prevShards]
}

// get returns the count kept for the window counter key.
func (p *prevCounts) get(key string) (int64, bool) {
	s := p.shard(key)
	s.mu.Lock()
	n, ok := s.m[key]
	s.mu.Unlock()
	return n, ok
}

// put keeps n as the final count of the window counter key.
func (p *prevCounts) put(key string, n int64) {
	s := p.shard(key)
	s.mu.Lock()
	if len(s.m) >= prevPerShard {
		clear(s.m)
	}
	s.m[key] = n
	s.mu.Unlock()
}

// drop forgets the count kept for the window counter key, if any.
func (p *prevCounts) drop(key string) {
	s := p.shard(key)
	s.mu.Lock()
	delete(s.m, key)
	s.mu.Unlock()
}
