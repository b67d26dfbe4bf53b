package redisstore

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// nodeBatchers merges calls on a Redis Cluster one master at a time: each
// master has a batcher of its own, and a call whose keys all live on one
// master goes with that master's flushes. One batcher for the whole cluster
// would make every flush wait on its slowest node, so that with a master
// down the calls for the live ones would wait behind those for the dead
// one; per master, a dead one holds up only the calls for its own keys. A
// call whose keys span masters goes on its own, as without batching (the
// cluster client splits its pipeline by node).
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

// do sends wk with the flushes of the master that holds all its keys, and
// reports whether it did; false, having done nothing, when its keys span
// masters, a master is unknown for now, or the batchers are closed.
func (n *nodeBatchers) do(ctx context.Context, wk *work) bool {
	key, ok := wk.onlyKey()
	if !ok {
		return false
	}
	master, err := n.cluster.MasterForKey(ctx, key)
	if err != nil {
		return false
	}
	addr := master.Options().Addr
	last := key
	if !wk.allOn(func(k string) bool {
		if k == last {
			return true // a window's INCRBY and PEXPIRE name one key
		}
		last = k
		m, err := n.cluster.MasterForKey(ctx, k)
		return err == nil && m.Options().Addr == addr
	}) {
		return false
	}
	b := n.batcher(addr)
	return b != nil && b.do(ctx, wk)
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

// onlyKey returns a key that wk names, if it names any: every native command
// the store sends has its key first, and every script call and run its keys.
func (wk *work) onlyKey() (string, bool) {
	for _, c := range wk.cmds {
		if k, ok := cmdKey(c); ok {
			return k, true
		}
	}
	for _, c := range wk.scripts {
		if len(c.keys) > 0 {
			return c.keys[0], true
		}
	}
	for k := range wk.runs {
		if len(wk.runs[k].keys) > 0 {
			return wk.runs[k].keys[0], true
		}
	}
	return "", false
}

// allOn reports whether on holds for every key wk names. A command whose
// first argument is not a string key makes it false: the work is then not
// known to stay on one node.
func (wk *work) allOn(on func(key string) bool) bool {
	for _, c := range wk.cmds {
		k, ok := cmdKey(c)
		if !ok || !on(k) {
			return false
		}
	}
	for _, c := range wk.scripts {
		for _, k := range c.keys {
			if !on(k) {
				return false
			}
		}
	}
	for i := range wk.runs {
		for _, k := range wk.runs[i].keys {
			if !on(k) {
				return false
			}
		}
	}
	return true
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
