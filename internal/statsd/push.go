package statsd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/envoy-rls/envoy-rls/internal/metrics"
)

// Options say where and how the stats are pushed.
type Options struct {
	// Addr is the statsd's host:port.
	Addr string
	// Network is tcp or udp; empty is tcp for statsd and udp for
	// DogStatsD, as envoyproxy/ratelimit sends them.
	Network string
	// Dog pushes DogStatsD, with tags, instead of plain statsd.
	Dog bool
	// Tags go on every stat; Mogrifiers rename and tag stats for
	// DogStatsD.
	Tags       []Tag
	Mogrifiers []Mogrifier
	// Interval is the time between flushes (10 s, as
	// envoyproxy/ratelimit's STATS_FLUSH_INTERVAL, when zero).
	Interval time.Duration
	// Timeout bounds a dial and each write (1 s when zero, and never
	// more than Interval).
	Timeout time.Duration
}

// DefaultInterval is envoyproxy/ratelimit's STATS_FLUSH_INTERVAL.
const DefaultInterval = 10 * time.Second

// sink is what a flush writes to, and writes out.
type sink interface {
	metrics.StatsdSink
	flush()
}

// Pusher pushes m's envoyproxy/ratelimit stats on an interval (Run).
type Pusher struct {
	o     Options
	m     *metrics.Metrics
	t     *transport
	sink  sink
	close func() error
}

// New makes the pusher of m's stats, which must be kept for a statsd sink
// (metrics.RatelimitOptions.Statsd). Nothing is dialled before the first
// flush.
func New(o Options, m *metrics.Metrics, log *zap.Logger) (*Pusher, error) {
	if o.Addr == "" {
		return nil, errors.New("statsd: no address")
	}
	if o.Network == "" {
		o.Network = "tcp"
		if o.Dog {
			o.Network = "udp"
		}
	}
	if o.Network != "tcp" && o.Network != "udp" {
		return nil, fmt.Errorf("statsd: network %q: want tcp or udp", o.Network)
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Timeout <= 0 {
		o.Timeout = time.Second
	}
	o.Timeout = min(o.Timeout, o.Interval)
	p := &Pusher{o: o, m: m, t: newTransport(o.Network, o.Addr, o.Timeout, m, log)}
	if !o.Dog {
		max := tcpPayload
		if o.Network == "udp" {
			max = udpPayload
		}
		p.sink, p.close = newPlainSink(p.t, o.Tags, max), p.t.Close
		return p, nil
	}
	d, err := newDogSink(p.t, o.Tags, o.Mogrifiers, m)
	if err != nil {
		return nil, fmt.Errorf("statsd: %w", err)
	}
	p.sink, p.close = d, d.client.Close // which closes the transport
	return p, nil
}

// Flush pushes what the stats counted since the last flush, now.
func (p *Pusher) Flush() {
	p.m.FlushStatsd(p.sink)
	p.sink.flush()
	p.t.flushed()
}

// Run flushes every interval until ctx ends, then flushes once more and
// closes the connection.
func (p *Pusher) Run(ctx context.Context) {
	t := time.NewTicker(p.o.Interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			p.Flush()
		case <-ctx.Done():
			p.Flush()
			_ = p.close()
			return
		}
	}
}
