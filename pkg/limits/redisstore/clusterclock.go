package redisstore

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"

	"github.com/envoy-rls/envoy-rls/internal/redispipe"
)

// sampleMasters samples a cluster's clock (redispipe.Clock.SampleMasters);
// a walk that the call's ctx ended goes on aside (probeAside).
func (s *Store) sampleMasters(ctx context.Context) error {
	cluster, ok := s.client.(*redis.ClusterClient)
	if !ok {
		return errors.New("redisstore: a cluster's clock needs a cluster client")
	}
	stopped, err := s.redisClock.SampleMasters(ctx, cluster)
	if stopped {
		s.probeAside()
	}
	return err
}

// probeAside samples a cluster's clock from a goroutine of its own, unless
// a sample is out already: the master it asks is most likely not the one
// of the pipeline that found the sample due, and carried there it would
// make that pipeline, and every call merged into it, wait on a second
// master, and on a stalled or dead one.
func (s *Store) probeAside() {
	if !s.probing.CompareAndSwap(false, true) {
		return
	}
	s.probes.Add(1)
	go func() {
		defer s.probes.Done()
		defer s.probing.Store(false)
		_ = s.sampleMasters(context.Background())
	}()
}

// probeEvery is how often the clock is sampled: redispipe.ProbeEvery on a
// single Redis, by a TIME in a pipeline, redispipe.ClusterProbeEvery on a
// cluster, by a master's TIME of its own.
func (s *Store) probeEvery() int64 {
	if s.cluster {
		return redispipe.ClusterProbeEvery
	}
	return redispipe.ProbeEvery
}
