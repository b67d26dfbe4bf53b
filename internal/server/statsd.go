package server

import (
	"context"
	"errors"
	"flag"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/envoy-rls/envoy-rls/internal/cli"
	"github.com/envoy-rls/envoy-rls/internal/metrics"
	"github.com/envoy-rls/envoy-rls/internal/statsd"
)

// envoyproxy/ratelimit's stats pushed to a statsd (package statsd), as its
// USE_STATSD and USE_DOG_STATSD push them, from the same records as the
// Prometheus families of stats.go.

// statsdOptions are the flags of the statsd sink.
type statsdOptions struct {
	// addr is -statsd-addr; empty: no statsd.
	addr     string
	network  string
	dog      bool
	interval time.Duration
	tags     tagsFlag
	mogs     mogrifiersFlag
}

// statsdFlags defines the flags of the statsd sink.
func statsdFlags(fs *flag.FlagSet, o *statsdOptions) {
	fs.StringVar(&o.addr, "statsd-addr", "", "host:port of a statsd to push envoyproxy/ratelimit's stats to (ratelimit.service.rate_limit.…), every -statsd-flush-interval; empty: off")
	fs.Var(networkFlag{&o.network}, "statsd-protocol", "tcp or udp (empty: tcp for statsd, udp for -dogstatsd, as envoyproxy/ratelimit sends them)")
	fs.BoolVar(&o.dog, "dogstatsd", false, "push DogStatsD, with tags, instead of plain statsd")
	fs.DurationVar(&o.interval, "statsd-flush-interval", statsd.DefaultInterval, "time between two pushes to -statsd-addr")
	fs.Var(&o.tags, "statsd-tags", "KEY:VALUE,… tags on every stat pushed (plain statsd folds them into the name, NAME.__KEY=VALUE)")
	fs.Var(&o.mogs, "dogstatsd-mogrifiers", `with -dogstatsd, a JSON list of {"pattern": REGEXP, "name": NAME, "tags": {KEY: VALUE}} that rename and tag the stats whose names match ($1… the groups)`)
}

// check reports flags that need another.
func (o *statsdOptions) check() error {
	switch {
	case o.interval <= 0:
		return errors.New("-statsd-flush-interval must be positive")
	case o.dog && o.addr == "":
		return errors.New("-dogstatsd needs -statsd-addr, the DogStatsD to push to")
	case len(o.mogs.m) > 0 && !o.dog:
		return errors.New("-dogstatsd-mogrifiers needs -dogstatsd: plain statsd has no tags")
	}
	return nil
}

// newPusher makes the pusher of m's stats; nil when there is no statsd,
// or -disable-stats turns the stats off.
func newPusher(o *Options, m *metrics.Metrics, log *zap.Logger) (*statsd.Pusher, error) {
	s := &o.statsd
	if s.addr == "" || o.stats.disable {
		return nil, nil
	}
	p, err := statsd.New(statsd.Options{Addr: s.addr, Network: s.network, Dog: s.dog, Tags: s.tags.t,
		Mogrifiers: s.mogs.m, Interval: s.interval}, m, log.Named("statsd"))
	if err != nil {
		return nil, err
	}
	log.Info("pushing envoyproxy/ratelimit's stats to a statsd", zap.String("addr", s.addr), zap.Bool("dogstatsd", s.dog),
		zap.Duration("interval", s.interval))
	return p, nil
}

// startPush runs p until the stop it returns is called, which flushes a
// last time; nothing when p is nil.
func startPush(p *statsd.Pusher) (stop func()) {
	if p == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); p.Run(ctx) }()
	return func() { cancel(); wg.Wait() }
}

// networkFlag is -statsd-protocol.
type networkFlag struct{ n *string }

func (f networkFlag) String() string {
	if f.n == nil {
		return ""
	}
	return *f.n
}

func (f networkFlag) Set(s string) error {
	s = strings.ToLower(strings.TrimSpace(s))
	if s != "" && s != "tcp" && s != "udp" {
		return errors.New("want tcp or udp")
	}
	*f.n = s
	return nil
}

func (f networkFlag) Kind() cli.ValueKind { return cli.ValueKind{Word: "protocol", Want: "tcp or udp"} }

// tagsFlag is -statsd-tags.
type tagsFlag struct {
	s string
	t []statsd.Tag
}

func (f *tagsFlag) String() string { return f.s }

func (f *tagsFlag) Set(s string) error {
	t, err := statsd.ParseTags(s)
	if err != nil {
		return err
	}
	f.s, f.t = s, t
	return nil
}

func (f *tagsFlag) Kind() cli.ValueKind {
	return cli.ValueKind{Word: "tags", Want: "KEY:VALUE pairs separated by commas"}
}

// mogrifiersFlag is -dogstatsd-mogrifiers.
type mogrifiersFlag struct {
	s string
	m []statsd.Mogrifier
}

func (f *mogrifiersFlag) String() string { return f.s }

func (f *mogrifiersFlag) Set(s string) error {
	m, err := statsd.ParseMogrifiers(s)
	if err != nil {
		return err
	}
	f.s, f.m = s, m
	return nil
}

func (f *mogrifiersFlag) Kind() cli.ValueKind {
	return cli.ValueKind{Word: "json", Want: `a JSON list of {"pattern", "name", "tags"}`}
}
