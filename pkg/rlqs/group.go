package rlqs

import (
	"context"
	"sync"

	"go.uber.org/zap"

	"github.com/envoy-rls/envoy-rls/pkg/rlqs/internal/share"
)

// group is the streams of one client identity on this instance (Options
// ClientOf), which the division counts as one client: each stream is
// otherwise a client of its own, and one peer opening many streams that
// claim much would take a share for each. The group's demand of a bucket
// is the sum of its streams' last demands; its share is split among them
// in proportion to those demands (evenly while one is unknown). A stream
// that leaves takes its demand out of the sum and leaves the others'
// recorded; the group's entry is forgotten with its last stream.
type group struct {
	id   string // the client id in the division: the instance and the identity
	refs int    // the open streams of the group; guarded by Service.groupsMu

	mu      sync.Mutex                          // guards members, and orders the group's writes
	members map[string]map[*client]share.Demand // by bucket key: each stream's last demand
}

// join returns the group of identity, counting one more stream in it.
func (s *Service) join(identity string) *group {
	s.groupsMu.Lock()
	defer s.groupsMu.Unlock()
	g := s.groups[identity]
	if g == nil {
		g = &group{id: s.instance + "-" + identity, members: make(map[string]map[*client]share.Demand)}
		s.groups[identity] = g
	}
	g.refs++
	return g
}

// quit counts one stream of g out, once it gave back its buckets.
func (s *Service) quit(identity string, g *group) {
	s.groupsMu.Lock()
	defer s.groupsMu.Unlock()
	if g.refs--; g.refs <= 0 {
		delete(s.groups, identity)
	}
}

// record notes stream c's demands (demands[i] of keys[i]) and records the
// group's: it replaces demands with the group's and returns the part of
// the group's share that is c's, per bucket.
func (g *group) record(ctx context.Context, s *Service, c *client, keys []string, demands []share.Demand) (parts []float64, err error) {
	parts = make([]float64, len(keys))
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, key := range keys {
		m := g.members[key]
		if m == nil {
			m = make(map[*client]share.Demand)
			g.members[key] = m
		}
		mine := demands[i]
		m[c] = mine
		sum := total(m)
		demands[i] = sum
		switch {
		case sum.Known && sum.Rate > 0:
			parts[i] = mine.Rate / sum.Rate
		default:
			parts[i] = 1 / float64(len(m))
		}
	}
	// Under g.mu: a report's sum is not overwritten by an older one's.
	return parts, s.recordAll(ctx, g.id, keys, demands)
}

// leave takes stream c's demand of key out of the group's, and records
// what the others want, or forgets the group's entry if none is left.
func (g *group) leave(ctx context.Context, s *Service, c *client, key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m := g.members[key]
	delete(m, c)
	if len(m) == 0 {
		delete(g.members, key)
		s.forget(ctx, key, g.id)
		return
	}
	if err := s.recordAll(ctx, g.id, []string{key}, []share.Demand{total(m)}); err != nil {
		// The entry expires by itself, or the next report renews it.
		s.opts.Logger.Debug("rlqs: recording a group's demand", zap.Error(err))
	}
}

// total is the demands' sum, unknown while any is.
func total(m map[*client]share.Demand) share.Demand {
	sum := share.Demand{Known: true}
	for _, d := range m {
		sum.Rate += d.Rate
		sum.Known = sum.Known && d.Known
	}
	return sum
}

// divided is the client id c is divided under: its group's, or its own.
func (c *client) divided() string {
	if c.group != nil {
		return c.group.id
	}
	return c.id
}

// recordAll records client's demands in this instance's store and in the
// shared one, for three report intervals (a demand not renewed by then is
// a client's that left); the error is the shared store's.
func (s *Service) recordAll(ctx context.Context, client string, keys []string, demands []share.Demand) error {
	ttl := 3 * s.opts.ReportInterval
	_ = s.local.RecordAll(ctx, client, keys, demands, ttl)
	if s.store != DemandStore(s.local) {
		return s.store.RecordAll(ctx, client, keys, demands, ttl)
	}
	return nil
}

// forget drops client's demand of key from both stores.
func (s *Service) forget(ctx context.Context, key, client string) {
	_ = s.local.Forget(ctx, key, client)
	if s.store != DemandStore(s.local) {
		if err := s.store.Forget(ctx, key, client); err != nil {
			// The entry expires by itself within three report intervals.
			s.opts.Logger.Debug("rlqs: forgetting a demand", zap.Error(err))
		}
	}
}
