package redispipe

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// A cluster's topology: which masters hold the slots, and whether each
// answers. go-redis reloads its map of the slots when a node answers MOVED
// or ASK, and otherwise once a minute; a master that died or hangs answers
// neither, so that after its replica is promoted the client would go on
// sending the keys of its slots to it for up to a minute, and each of them
// would take the failure mode. So the store reloads the map itself when a
// call finds a node unreachable (Kick), at most once every reloadEvery,
// and so does every health check (Check); each reload also PINGs every
// master, for health and metrics (Masters).

// reloadEvery is the least time between two reloads of a cluster's map:
// a failover is followed within about that much of the promotion, and
// calls that all fail on a dead master cost Redis at most a few reloads a
// second (a CLUSTER SLOTS and a PING for each master).
const reloadEvery = 250 * time.Millisecond

// sweepTimeout bounds a reload and its PINGs; each command is bounded by the
// client's own timeout too.
const sweepTimeout = time.Second

// MasterState is what the last check found of one master of a cluster.
type MasterState struct {
	// Addr is the master's host:port.
	Addr string
	// Err is why it did not answer the check's PING; nil if it did.
	Err error
}

// UnreachableError is Ping's error on a cluster when some of its masters,
// or all of them, do not answer: the keys of their slots take the failure
// mode, the others are decided.
type UnreachableError struct {
	// Down are the masters that did not answer, by address.
	Down []MasterState
	// Masters is how many masters hold slots.
	Masters int
}

func (e *UnreachableError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "redisstore: %d of %d masters unreachable", len(e.Down), e.Masters)
	for i, m := range e.Down {
		sep := ", "
		if i == 0 {
			sep = ": "
		}
		fmt.Fprintf(&b, "%s%s (%v)", sep, m.Addr, m.Err)
	}
	return b.String()
}

// Degraded reports whether some masters answer: the store decides part of
// the keys.
func (e *UnreachableError) Degraded() bool { return len(e.Down) < e.Masters }

// Unwrap is the first master's error.
func (e *UnreachableError) Unwrap() error { return e.Down[0].Err }

// topology reloads a cluster client's map and checks its masters. It is
// safe for concurrent use.
type Topology struct {
	cluster *redis.ClusterClient
	// onMasters is told the masters of every reload that found the map.
	onMasters func([]MasterState)

	// sweeping lets one reload run at a time.
	sweeping sync.Mutex
	// mu guards what follows.
	mu sync.Mutex
	// last is when the last reload ended, masters what it found (nil
	// before the first), err why it found no map.
	last    time.Time
	masters []MasterState
	err     error
	// pending is set by a kick that the reloads goroutine has not yet
	// answered; running while that goroutine runs; closed after close.
	pending, running, closed bool
	wg                       sync.WaitGroup
	// ctx ends at close, and with it a reload under way.
	ctx    context.Context
	cancel context.CancelFunc
}

func NewTopology(c *redis.ClusterClient, onMasters func([]MasterState)) *Topology {
	ctx, cancel := context.WithCancel(context.Background())
	return &Topology{cluster: c, onMasters: onMasters, ctx: ctx, cancel: cancel}
}

// Kick asks for a reload, made by a goroutine of its own as soon as
// reloadEvery has passed since the last one: a call that found a node
// unreachable does not wait for it. Kicks that come while one is pending
// share it.
func (t *Topology) Kick() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pending = true
	if t.running || t.closed {
		return
	}
	t.running = true
	t.wg.Add(1)
	go t.reloads()
}

// reloads answers the kicks until none is pending.
func (t *Topology) reloads() {
	defer t.wg.Done()
	for {
		t.mu.Lock()
		if !t.pending || t.closed {
			t.running = false
			t.mu.Unlock()
			return
		}
		t.pending = false
		wait := time.Until(t.last.Add(reloadEvery))
		t.mu.Unlock()
		if wait > 0 {
			select {
			case <-t.ctx.Done():
				continue
			case <-time.After(wait):
			}
		}
		ctx, cancel := context.WithTimeout(t.ctx, sweepTimeout)
		_, _ = t.sweep(ctx, 0)
		cancel()
	}
}

// sweep reloads the map and PINGs every master it names, unless a reload
// ended less than maxAge ago: then it returns what that one found.
func (t *Topology) sweep(ctx context.Context, maxAge time.Duration) ([]MasterState, error) {
	t.sweeping.Lock()
	defer t.sweeping.Unlock()
	t.mu.Lock()
	if maxAge > 0 && !t.last.IsZero() && time.Since(t.last) < maxAge {
		defer t.mu.Unlock()
		return t.masters, t.err
	}
	t.mu.Unlock()

	var mu sync.Mutex
	var found []MasterState
	// ForEachMaster reloads the client's map before it walks its masters.
	err := t.cluster.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		err := m.Ping(ctx).Err()
		mu.Lock()
		found = append(found, MasterState{Addr: m.Options().Addr, Err: err})
		mu.Unlock()
		return nil
	})
	slices.SortFunc(found, func(a, b MasterState) int { return strings.Compare(a.Addr, b.Addr) })
	t.mu.Lock()
	t.last, t.err = time.Now(), err
	if err == nil {
		t.masters = found
	}
	masters := t.masters
	t.mu.Unlock()
	if err != nil {
		return masters, err
	}
	t.onMasters(found)
	return found, nil
}

// Check is Ping's: a reload, or the last one if it ended less than
// reloadEvery ago; an *UnreachableError names the masters that did not
// answer.
func (t *Topology) Check(ctx context.Context) error {
	masters, err := t.sweep(ctx, reloadEvery)
	if err != nil {
		return err
	}
	var down []MasterState
	for _, m := range masters {
		if m.Err != nil {
			down = append(down, m)
		}
	}
	if len(down) > 0 {
		return &UnreachableError{Down: down, Masters: len(masters)}
	}
	return nil
}

// LastMasters are the masters of the last reload that found the map.
func (t *Topology) LastMasters() []MasterState {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.masters)
}

// Close ends the reloads goroutine, if one runs, and waits for it.
func (t *Topology) Close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.cancel()
	t.wg.Wait()
}

// FailedOn reports whether err, a command's, says that its node could not
// be reached (a failed dial, a timeout, a node that is down or without
// the slot), which a reload of the map may cure: not a reply of a node
// that answered, nor a call that gave up.
func FailedOn(err error) bool {
	return err != nil && Unavailable(err) && !errors.Is(err, context.Canceled)
}

// Unavailable tells a store that is down or unreachable (no connection, a
// timeout, a cluster without a master for the slot) from a reply error of a
// store that answered (a key of the wrong type).
func Unavailable(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return true
	}
	for _, p := range []string{"CLUSTERDOWN", "LOADING", "MASTERDOWN", "TRYAGAIN", "BUSY", "NOAUTH", "WRONGPASS"} {
		if redis.HasErrorPrefix(err, p) {
			return true
		}
	}
	return false
}
