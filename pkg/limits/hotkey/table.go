package hotkey

import (
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/internal/keymap"
)

// entry locks the shard of key and returns it with the key's entry for
// limit l, made (or made again, when the limit changed or the key idled
// past its use) as a key seen for the first time. The caller unlocks.
func (s *Store) entry(key string, l limits.Limit, now time.Time) (*keymap.Shard[*entry], *entry) {
	sh := s.keys.Shard(key)
	sh.Lock()
	e, ok := sh.Get(key)
	if ok && (e.limit != l || e.idle(now)) && e.wait == nil {
		ok = false
	}
	if !ok {
		e = &entry{limit: l, remaining: l.Capacity(), lastUse: now}
		sh.Put(key, e, now, (*entry).idle)
	}
	return sh, e
}

// plan says what one hit sent to the store is for.
type plan struct {
	i    int    // the caller's hit it answers; -1 for none
	e    *entry // the key's entry; nil for a hit of a limit without the mode
	kind kind
	// cost is the caller's hit's (kind charge).
	cost int64
}

type kind uint8

const (
	plain   kind = iota // a hit the mode leaves alone: its answer is the caller's
	observe             // a hit of the mode sent plainly: its answer tells what remains
	refund              // a bucket's unused share given back: no caller's
	charge              // a share taken or topped up, the caller's hit in it
)

// scratch is one call's sub-batch for the store and what each hit of it is
// for.
type scratch struct {
	hits    []limits.Hit
	results []limits.Result
	plans   []plan
	retry   []plan // the charges Redis refused whose hit goes again plainly
	sent    time.Time
}

func (sc *scratch) add(h limits.Hit, p plan) {
	sc.hits = append(sc.hits, h)
	sc.plans = append(sc.plans, p)
}

// clearSent empties the sub-batch, dropping its key strings and entries.
func (sc *scratch) clearSent() {
	clear(sc.hits)
	clear(sc.plans)
	sc.hits, sc.plans = sc.hits[:0], sc.plans[:0]
}

// clearRetry empties the refused charges, dropping their entries.
func (sc *scratch) clearRetry() {
	clear(sc.retry)
	sc.retry = sc.retry[:0]
}

// planned reports whether this call already plans a sync: it must then
// wait for none, since the sync it waits for may be another call's that
// waits for this one's, not yet sent.
func (sc *scratch) planned() bool {
	for _, p := range sc.plans {
		if p.kind == charge {
			return true
		}
	}
	return false
}
