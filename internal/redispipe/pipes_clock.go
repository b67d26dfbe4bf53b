package redispipe

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// sampleMasters samples a cluster's clock (Clock.SampleMasters);
// a walk that the call's ctx ended goes on aside (probeAside).
func (p *Pipes) sampleMasters(ctx context.Context) error {
	cluster, ok := p.client.(*redis.ClusterClient)
	if !ok {
		return errors.New("redisstore: a cluster's clock needs a cluster client")
	}
	stopped, err := p.redisClock.SampleMasters(ctx, cluster)
	if stopped {
		p.probeAside()
	}
	return err
}

// probeAside samples a cluster's clock from a goroutine of its own, unless
// a sample is out already: the master it asks is most likely not the one
// of the pipeline that found the sample due, and carried there it would
// make that pipeline, and every call merged into it, wait on a second
// master, and on a stalled or dead one.
func (p *Pipes) probeAside() {
	if !p.probing.CompareAndSwap(false, true) {
		return
	}
	p.probes.Add(1)
	go func() {
		defer p.probes.Done()
		defer p.probing.Store(false)
		_ = p.sampleMasters(context.Background())
	}()
}

// probeEvery is how often the clock is sampled: ProbeEvery on a
// single Redis, by a TIME in a pipeline, ClusterProbeEvery on a
// cluster, by a master's TIME of its own.
func (p *Pipes) probeEvery() int64 {
	if p.cluster {
		return ClusterProbeEvery
	}
	return ProbeEvery
}

// askClock samples Redis's clock for the calls that have no estimate they
// may use (Ask): a TIME in a pipeline of its own on a single Redis, a
// master's TIME on a cluster.
func (p *Pipes) askClock(ctx context.Context) error {
	if p.cluster {
		return p.sampleMasters(ctx)
	}
	probe := &Probe{}
	wk := &Work{Clock: probe}
	p.Send(ctx, wk)
	if wk.Err != nil {
		return wk.Err // the call stopped waiting: the probe is not for it to read
	}
	return probe.Err()
}

// ClockAsk is a TIME asked for calls that have no estimate of the clock to
// use (Ask).
type ClockAsk struct {
	done chan struct{}
	err  error
}

// Wait waits until the TIME is answered, and returns its error, or until
// ctx ends, and returns ctx's.
func (a *ClockAsk) Wait(ctx context.Context) error {
	select {
	case <-a.done:
		return a.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Ask returns the TIME out for calls without an estimate, or sends one:
// from a goroutine of its own, with no deadline but the client's
// timeouts, so that the calls that wait for it each wait as long as their
// own deadline allows, none queues behind another, and one that gives up
// does not fail the others.
func (p *Pipes) Ask() *ClockAsk {
	p.askMu.Lock()
	defer p.askMu.Unlock()
	if p.asking != nil {
		return p.asking
	}
	a := &ClockAsk{done: make(chan struct{})}
	p.asking = a
	p.probes.Add(1)
	go func() {
		defer p.probes.Done()
		err := p.askClock(context.Background())
		p.askMu.Lock()
		p.asking = nil
		p.askMu.Unlock()
		a.err = err
		close(a.done)
	}()
	return a
}
