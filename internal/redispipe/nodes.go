package redispipe

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/envoy-rls/envoy-rls/pkg/limits/breaker"
)

// nodeBatchers merges calls on a Redis Cluster one master at a time: each
// master has a batcher of its own, and a call whose keys all live on one
// master goes with that master's flushes. One batcher for the whole cluster
// would make every flush wait on its slowest node, so that with a master
// down the calls for the live ones would wait behind those for the dead
// one; per master, a dead one holds up only the calls for its own keys. A
// call whose keys span masters is split: each master's share goes with that
// master's flushes. Each master also has a gate (failfast.go): once calls
// have kept timing out on it, the calls for its keys fail at once.
//
// The flushes still go through the cluster client, which routes them (all
// to the one master) and follows MOVED and ASK; a key that moved between
// the choice of a batcher and the flush only costs that flush a redirect.
type nodeBatchers struct {
	pipes   *Pipes
	cluster *redis.ClusterClient
	flushes int
	// timeout is the store's (the client's read timeout), for the gates.
	timeout time.Duration

	// byAddr holds each *master by address; mu guards adding one,
	// retiring one, and closed.
	byAddr sync.Map
	mu     sync.Mutex
	closed bool
	// retiring counts the batchers of former masters being closed.
	retiring sync.WaitGroup
	// onGate is Options.OnGate.
	onGate func(addr string, shut bool)
}

func newNodeBatchers(p *Pipes, c *redis.ClusterClient, flushes int) *nodeBatchers {
	timeout := c.Options().ReadTimeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &nodeBatchers{pipes: p, cluster: c, flushes: flushes, timeout: timeout}
}

// do sends wk with the flushes of the masters that hold its keys, and
// reports whether it did; false, having done nothing, when a master is
// unknown for now, wk names no key, or the batchers are closed. A work whose
// keys span masters is split by master, each part sent with its master's
// flushes at once, and done when all are.
func (n *nodeBatchers) do(ctx context.Context, wk *Work) bool {
	addr, spans := "", false
	m := n.masters(ctx)
	for key := range wk.keys {
		a := m(key)
		switch {
		case a == "":
			return false
		case addr == "":
			addr = a
		case a != addr:
			spans = true
		}
		if spans {
			break
		}
	}
	switch {
	case addr == "":
		return false
	case !spans:
		return n.doOn(ctx, addr, wk)
	}
	parts, ok := n.split(wk, m)
	if !ok {
		return false
	}
	var wg sync.WaitGroup
	for i := range parts {
		p := &parts[i]
		send := func() {
			if !n.doOn(ctx, p.addr, p.work) {
				n.pipes.exec(ctx, p.work)
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
		if p.work.Err != nil {
			// A part stopped waiting: its flush may still be filling it,
			// and the call reads none of its work.
			wk.Err = p.work.Err
			return true
		}
	}
	return true
}

// doOn sends wk with the flushes of the master at addr, through its gate:
// refused at once, wk.Err set, while the gate is shut (failfast.go). False,
// having done nothing, once the batchers are closed.
func (n *nodeBatchers) doOn(ctx context.Context, addr string, wk *Work) bool {
	m := n.master(addr)
	if m == nil {
		return false
	}
	probe, ok := m.gate.Admit()
	if !ok {
		// As a call that timed out would: the next reload may find the
		// slots moved to a replica, or the master answering again.
		n.pipes.topo.Kick()
		wk.Err = errMasterDown
		return true
	}
	if !m.batcher.do(ctx, wk) {
		m.gate.Record(probe, breaker.Unknown)
		return false
	}
	if m.gate.Record(probe, outcomeOn(ctx, wk, m.batcher, n.timeout)) {
		n.report(addr, m)
	}
	return true
}

// report tells onGate of m's gate if it differs from what it was last
// told. Reading the state under m.reportMu, rather than passing each
// change along, keeps two changes made at once by two calls from reaching
// it in the wrong order.
func (n *nodeBatchers) report(addr string, m *master) { n.tell(addr, m, m.gate.Open) }

// retired tells onGate that m, no longer a master, fails no call fast:
// its slots are another node's now, behind that node's gate.
func (n *nodeBatchers) retired(addr string, m *master) {
	n.tell(addr, m, func() bool { return false })
}

// tell tells onGate what shut says of m, if it differs from what onGate
// was last told.
func (n *nodeBatchers) tell(addr string, m *master, shut func() bool) {
	if n.onGate == nil {
		return
	}
	m.reportMu.Lock()
	defer m.reportMu.Unlock()
	if now := shut(); now != m.reported {
		m.reported = now
		n.onGate(addr, now)
	}
}

// shut counts the masters whose gate is shut.
func (n *nodeBatchers) shut() int {
	count := 0
	n.byAddr.Range(func(_, m any) bool {
		if m.(*master).gate.Open() {
			count++
		}
		return true
	})
	return count
}

// masters returns the function that names the master of a key: its
// address, "" for no key (a command without one) or when the cluster's
// state does not know it. It remembers the last key it was asked, since a
// window's charge and PEXPIRE name one.
func (n *nodeBatchers) masters(ctx context.Context) func(key string) string {
	lastKey, lastAddr := "", ""
	return func(key string) string {
		switch {
		case key == "":
			return "" // not a call's command: the work goes unmerged
		case key == lastKey:
			return lastAddr
		}
		m, err := n.cluster.MasterForKey(ctx, key)
		if err != nil {
			return ""
		}
		lastKey, lastAddr = key, m.Options().Addr
		return lastAddr
	}
}

// part is the share of a work that one master holds.
type part struct {
	addr string
	work *Work
}

// split shares wk out by the master (master names it) of each of its keys,
// in the order they first appear; false when a master is unknown. The
// keys of a joint run share a hash tag, so its commands all go to one
// master. The work's decisions are shared out by the parts' share of its
// commands, for OnPipeline.
func (n *nodeBatchers) split(wk *Work, master func(key string) string) ([]part, bool) {
	var parts []part
	partOf := func(key string) *part {
		addr := master(key)
		if addr == "" {
			return nil
		}
		i := slices.IndexFunc(parts, func(p part) bool { return p.addr == addr })
		if i < 0 {
			i = len(parts)
			parts = append(parts, part{addr: addr, work: &Work{Caller: wk.Caller}})
		}
		return &parts[i]
	}
	for _, c := range wk.Cmds {
		k, _ := CmdKey(c)
		p := partOf(k)
		if p == nil {
			return nil, false
		}
		p.work.Cmds = append(p.work.Cmds, c)
	}
	items := len(wk.Cmds)
	left := wk.Decisions
	for i := range parts[1:] {
		p := parts[i+1].work
		p.Decisions = wk.Decisions * len(p.Cmds) / items
		left -= p.Decisions
	}
	parts[0].work.Decisions = left
	return parts, true
}

// master is one master's batcher and gate.
type master struct {
	batcher *batcher
	gate    *breaker.Circuit

	reportMu sync.Mutex
	reported bool // what onGate was last told: shut
}

// master returns the batcher and gate of the master at addr, started at
// first use; nil once closed. A master's are found without a lock: new
// masters are rare, calls are not.
func (n *nodeBatchers) master(addr string) *master {
	if m, ok := n.byAddr.Load(addr); ok {
		return m.(*master)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	if m, ok := n.byAddr.Load(addr); ok {
		return m.(*master) // another call started it meanwhile
	}
	m := &master{batcher: newBatcher(n.pipes, n.flushes), gate: newGate(n.timeout)}
	n.byAddr.Store(addr, m)
	return m
}

// found is told the masters a reload of the map found. It opens the gate
// of each that answered its PING, and closes the batchers of the nodes
// that are no longer masters (a master failed over to its replica), once
// their flushes in flight are done, so that no batcher outlives its
// master. A call that found one just before sends its work on its own.
func (n *nodeBatchers) found(masters []MasterState) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	n.byAddr.Range(func(addr, m any) bool {
		i := slices.IndexFunc(masters, func(ms MasterState) bool { return ms.Addr == addr })
		switch {
		case i < 0:
			n.byAddr.Delete(addr)
			n.retiring.Go(m.(*master).batcher.close)
			n.retired(addr.(string), m.(*master))
		case masters[i].Err == nil:
			m.(*master).gate.Heard()
			n.report(addr.(string), m.(*master))
		}
		return true
	})
}

// close closes every master's batcher: calls after it go on their own.
func (n *nodeBatchers) close() {
	n.mu.Lock()
	n.closed = true
	n.mu.Unlock()
	n.byAddr.Range(func(_, m any) bool {
		m.(*master).batcher.close()
		return true
	})
	n.retiring.Wait()
}
