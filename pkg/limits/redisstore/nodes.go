package redisstore

import (
	"context"
	"slices"
	"sync"

	"github.com/redis/go-redis/v9"
)

// nodeBatchers merges calls on a Redis Cluster one master at a time: each
// master has a batcher of its own, and a call whose keys all live on one
// master goes with that master's flushes. One batcher for the whole cluster
// would make every flush wait on its slowest node, so that with a master
// down the calls for the live ones would wait behind those for the dead
// one; per master, a dead one holds up only the calls for its own keys. A
// call whose keys span masters is split: each master's share goes with that
// master's flushes.
//
// The flushes still go through the cluster client, which routes them (all
// to the one master) and follows MOVED and ASK; a key that moved between
// the choice of a batcher and the flush only costs that flush a redirect.
type nodeBatchers struct {
	store   *Store
	cluster *redis.ClusterClient
	flushes int

	mu     sync.Mutex
	byAddr map[string]*batcher
	closed bool
}

func newNodeBatchers(s *Store, c *redis.ClusterClient, flushes int) *nodeBatchers {
	return &nodeBatchers{store: s, cluster: c, flushes: flushes, byAddr: map[string]*batcher{}}
}

// do sends wk with the flushes of the masters that hold its keys, and
// reports whether it did; false, having done nothing, when a master is
// unknown for now, wk names no key, or the batchers are closed. A work whose
// keys span masters is split by master, each part sent with its master's
// flushes at once, and done when all are.
func (n *nodeBatchers) do(ctx context.Context, wk *work) bool {
	parts, ok := n.split(ctx, wk)
	if !ok {
		return false
	}
	if len(parts) == 1 {
		b := n.batcher(parts[0].addr)
		return b != nil && b.do(ctx, wk)
	}
	var wg sync.WaitGroup
	for i := range parts {
		p := &parts[i]
		send := func() {
			if b := n.batcher(p.addr); b == nil || !b.do(ctx, p.work) {
				n.store.exec(ctx, p.work)
			}
		}
		if i == len(parts)-1 {
			send() // the last from this goroutine
			continue
		}
		wg.Go(send)
	}
	wg.Wait()
	for _, p := range parts {
		if p.work.err != nil {
			// A part stopped waiting: its flush may still be filling it,
			// and the call reads none of its work.
			wk.err = p.work.err
			return true
		}
	}
	for _, p := range parts {
		for j, k := range p.runs {
			wk.runs[k].reply = p.work.runs[j].reply
		}
	}
	return true
}

// part is the share of a work that one master holds.
type part struct {
	addr string
	work *work
	// runs[j] is the index in the whole work of the part's run j.
	runs []int
}

// split shares wk out by the master of each of its keys, in the order they
// first appear; false when a master is unknown or wk names no key. A
// script call's and a run's keys share a hash tag, so the first names
// their master. The work's decisions are shared out by the parts' share of
// its commands, for OnPipeline.
func (n *nodeBatchers) split(ctx context.Context, wk *work) ([]part, bool) {
	if wk.clock != nil {
		return nil, false // a clock sample of its own: not a call's
	}
	var parts []part
	lastKey, lastPart := "", -1
	partOf := func(key string) int {
		if key == lastKey && lastPart >= 0 {
			return lastPart // a window's INCRBY and PEXPIRE name one key
		}
		m, err := n.cluster.MasterForKey(ctx, key)
		if err != nil {
			return -1
		}
		addr := m.Options().Addr
		i := slices.IndexFunc(parts, func(p part) bool { return p.addr == addr })
		if i < 0 {
			i = len(parts)
			parts = append(parts, part{addr: addr, work: &work{}})
		}
		lastKey, lastPart = key, i
		return i
	}
	items := 0
	for _, c := range wk.cmds {
		k, ok := cmdKey(c)
		if !ok {
			return nil, false
		}
		i := partOf(k)
		if i < 0 {
			return nil, false
		}
		parts[i].work.cmds = append(parts[i].work.cmds, c)
		items++
	}
	for _, c := range wk.scripts {
		if len(c.keys) == 0 {
			return nil, false
		}
		i := partOf(c.keys[0])
		if i < 0 {
			return nil, false
		}
		parts[i].work.scripts = append(parts[i].work.scripts, c)
		items++
	}
	for k := range wk.runs {
		if len(wk.runs[k].keys) == 0 {
			return nil, false
		}
		i := partOf(wk.runs[k].keys[0])
		if i < 0 {
			return nil, false
		}
		parts[i].work.runs = append(parts[i].work.runs, wk.runs[k])
		parts[i].runs = append(parts[i].runs, k)
		items++
	}
	if len(parts) == 0 {
		return nil, false
	}
	if len(parts) > 1 {
		left := wk.decisions
		for i := range parts[1:] {
			p := parts[i+1].work
			p.decisions = wk.decisions * (len(p.cmds) + len(p.scripts) + len(p.runs)) / items
			left -= p.decisions
		}
		parts[0].work.decisions = left
	}
	return parts, true
}

// batcher returns the batcher of the master at addr, started at first use;
// nil once closed.
func (n *nodeBatchers) batcher(addr string) *batcher {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	b := n.byAddr[addr]
	if b == nil {
		b = newBatcher(n.store, n.flushes)
		n.byAddr[addr] = b
	}
	return b
}

// close closes every master's batcher: calls after it go on their own.
func (n *nodeBatchers) close() {
	n.mu.Lock()
	n.closed = true
	all := make([]*batcher, 0, len(n.byAddr))
	for _, b := range n.byAddr {
		all = append(all, b)
	}
	n.mu.Unlock()
	for _, b := range all {
		b.close()
	}
}

// cmdKey is the key of one of the store's native commands: its first
// argument after the name.
func cmdKey(c redis.Cmder) (string, bool) {
	args := c.Args()
	if len(args) < 2 {
		return "", false
	}
	k, ok := args[1].(string)
	return k, ok
}
