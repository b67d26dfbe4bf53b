package rlqs

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/rlqs/internal/share"
)

// DemandStore holds what each client (one Envoy's stream) wants of each
// bucket, shared by every envoy-rls instance that divides the bucket's
// limit. An entry lives for the ttl given at its last RecordAll, so a
// client that stops reporting gives its share back by itself.
//
// Writing and reading are apart because they are not equally frequent: a
// report writes its client's demand of each bucket, O(1) a bucket, while
// every client's demand is read only when the instance's division of the
// bucket is due again, once per refresh period however many clients
// report.
type DemandStore interface {
	// RecordAll notes client's demand of each bucket (demands[i] of
	// buckets[i]) for ttl: all the buckets of one report at once, one
	// round trip on Redis.
	RecordAll(ctx context.Context, client string, buckets []string, demands []Demand, ttl time.Duration) error
	// ReadAll returns, per bucket in the same order, the demand of every
	// live client of it: one round trip on Redis.
	ReadAll(ctx context.Context, buckets []string) ([]map[string]Demand, error)
	// Forget drops client's demand of bucket at once (its stream closed).
	Forget(ctx context.Context, bucket, client string) error
}

// Demand is one client's demand of a bucket, as a DemandStore records
// and reads it: the rate it asked for a second, and whether a report has
// measured it yet. Named here, as an alias of the arithmetic's own type, so
// that a DemandStore can be written outside this module.
type Demand = share.Demand

// Shape bounds the token buckets the service assigns (Options.Shape).
type Shape = share.Shape

// Memory is the DemandStore of one instance: it divides among the clients
// connected to this process only. It is safe for concurrent use; the zero
// value is not, use NewMemory.
//
// Each bucket's clients are a slice sorted by client id, not a map: most
// buckets have one client or a few (a made-up bucket id has one), and a
// map's smallest table is eight entries, several hundred bytes a bucket
// where the slice takes one entry's; a client is found by binary search,
// and only a join or a leave moves the entries after it.
type Memory struct {
	now     func() time.Time
	mu      sync.Mutex
	buckets map[string][]memoryEntry // by bucket: by client id, ascending
}

type memoryEntry struct {
	client  string
	demand  share.Demand
	expires time.Time
}

// find returns where client is in es, or would be.
func find(es []memoryEntry, client string) (int, bool) {
	return slices.BinarySearchFunc(es, client, func(e memoryEntry, c string) int { return strings.Compare(e.client, c) })
}

var _ DemandStore = (*Memory)(nil)

// NewMemory returns an empty store that reads the time from now.
func NewMemory(now func() time.Time) *Memory {
	return &Memory{now: now, buckets: make(map[string][]memoryEntry)}
}

// RecordAll implements DemandStore: a map write per bucket, no copy.
func (m *Memory) RecordAll(_ context.Context, client string, buckets []string, demands []share.Demand, ttl time.Duration) error {
	expires := m.now().Add(ttl)
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, b := range buckets {
		e := memoryEntry{client: client, demand: demands[i], expires: expires}
		es := m.buckets[b]
		if j, ok := find(es, client); ok {
			es[j] = e
		} else {
			m.buckets[b] = slices.Insert(es, j, e)
		}
	}
	return nil
}

// ReadAll implements DemandStore; the expired entries of each bucket read
// are dropped on the way.
func (m *Memory) ReadAll(_ context.Context, buckets []string) ([]map[string]share.Demand, error) {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]map[string]share.Demand, len(buckets))
	for i, b := range buckets {
		es, held := m.buckets[b]
		es = slices.DeleteFunc(es, func(e memoryEntry) bool { return !now.Before(e.expires) })
		live := make(map[string]share.Demand, len(es))
		for _, e := range es {
			live[e.client] = e.demand
		}
		switch {
		case len(es) > 0:
			m.buckets[b] = es
		case held:
			delete(m.buckets, b)
		}
		out[i] = live
	}
	return out, nil
}

// Forget implements DemandStore.
func (m *Memory) Forget(_ context.Context, bucket, client string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	es := m.buckets[bucket]
	if j, ok := find(es, client); ok {
		if es = slices.Delete(es, j, j+1); len(es) == 0 {
			delete(m.buckets, bucket)
		} else {
			m.buckets[bucket] = es
		}
	}
	return nil
}

// holds reports whether any client's demand of bucket is recorded, live or
// not yet dropped.
func (m *Memory) holds(bucket string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.buckets[bucket]) > 0
}
