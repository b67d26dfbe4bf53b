package server

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"time"

	"go.uber.org/zap"

	"github.com/envoy-rls/envoy-rls/internal/metrics"
	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
	"github.com/envoy-rls/envoy-rls/pkg/rlqs"
	"github.com/envoy-rls/envoy-rls/pkg/rlqs/redisdemand"
	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

// ExplainFlags defines on fs the server's flags that change what a
// descriptor matches, its key, or where its state is, with the server's
// names and defaults (but a second for -store-timeout: a person is
// waiting, not Envoy), and returns the options they fill: what
// `envoy-rls explain` builds its service from, so that it shows what the
// server does.
func ExplainFlags(fs *flag.FlagSet) *Options {
	o := &Options{failureMode: config.FailAllow, negativeHits: true} // -negative-hits's default: explain only peeks
	fs.StringVar(&o.configPath, "config", "config/limits.yaml", "limits file, or a directory of *.yaml/*.yml files")
	fs.StringVar(&o.redisURL, "redis-url", "", "redis://[user:pass@]host:port[/db] or rediss:// to read the shared state (empty: an embedded store, empty state)")
	redisFlags(fs, o)
	fs.StringVar(&o.redisKeyPrefix, "redis-key-prefix", descriptors.KeyPrefix, "the server's -redis-key-prefix")
	fs.BoolVar(&o.hashValues, "hash-values", false, "the server's -hash-values")
	fs.DurationVar(&o.storeTimeout, "store-timeout", time.Second, "longest the store read may take")
	limitDefaultFlags(fs, o)
	answerFlags(fs, &o.answers)
	fs.Var(failureModeFlag{&o.failureMode}, "failure-mode", "the server's -failure-mode (shown for limits without their own)")
	fs.DurationVar(&o.maxDelay, "max-delay", config.DefaultMaxDelay, "the server's -max-delay")
	fs.BoolVar(&o.shadowMode, "shadow-mode", false, "the server's -shadow-mode")
	fs.DurationVar(&o.rlqsReportInterval, "rlqs-report-interval", 5*time.Second, "the server's -rlqs-report-interval (with -rlqs)")
	fs.DurationVar(&o.rlqsAssignmentTTL, "rlqs-assignment-ttl", 0, "the server's -rlqs-assignment-ttl (with -rlqs)")
	return o
}

// CheckStore checks the flags ExplainFlags defines, as the server checks
// its own, and reads the passwords given by file.
func (o *Options) CheckStore() error {
	if err := o.checkRedis(); err != nil {
		return err
	}
	if o.storeTimeout <= 0 {
		return errors.New("-store-timeout must be positive")
	}
	if err := descriptors.CheckKeyPrefix(o.redisKeyPrefix); err != nil {
		return fmt.Errorf("-redis-key-prefix: %w", err)
	}
	return nil
}

// LoadConfig loads the limits as the server does at its start.
func (o *Options) LoadConfig() (*config.Config, error) {
	return o.loadOptions().Load(o.configPath)
}

// NewService builds the service the server would decide cfg with, on the
// store stack it would open (metrics and logs discarded), and returns it
// with the function that closes the store.
func (o *Options) NewService(cfg *config.Config) (*rls.Service, func() error, error) {
	m, log := metrics.New(), zap.NewNop()
	store, err := openStore(o, m, log, nil, nil)
	if err != nil {
		return nil, nil, err
	}
	svc, err := rls.New(descriptors.NewIndex(cfg), o.serviceOptions(store, log, m))
	if err != nil {
		store.close() //nolint:errcheck // the error that matters is rls.New's
		return nil, nil, err
	}
	return svc, store.close, nil
}

// StoreDescription names the store the options read, without its
// password.
func (o *Options) StoreDescription() string {
	switch {
	case o.redisCluster != "":
		return "Redis Cluster " + o.redisCluster
	case o.redisSentinel != "":
		return "Redis master " + o.redisSentinelMaster + " of Sentinels " + o.redisSentinel
	case o.redisURL != "":
		u, err := url.Parse(o.redisURL)
		if err != nil {
			return "Redis"
		}
		return "Redis " + u.Redacted()
	}
	return "embedded (this command's own: the state is empty; pass -redis-url to read the shared state)"
}

// NewRLQS builds the RLQS service the server would divide cfg's limits
// with, reading the demands the server's instances keep in Redis when the
// options name one (nothing is recorded: Explain only reads), and returns
// it with the function that closes the store. On the embedded store the
// demands live in each server's process, and this one has none.
func (o *Options) NewRLQS(cfg *config.Config) (*rlqs.Service, func() error, error) {
	if o.rlqsReportInterval < time.Second {
		return nil, nil, errors.New("-rlqs-report-interval must be at least 1s: Envoy reports in whole seconds")
	}
	m, log := metrics.New(), zap.NewNop()
	store, err := openStore(o, m, log, nil, nil)
	if err != nil {
		return nil, nil, err
	}
	ro := rlqs.Options{ReportInterval: o.rlqsReportInterval, AssignmentTTL: o.rlqsAssignmentTTL, Logger: log}
	if store.redis != nil {
		ro.Store = redisdemand.New(store.redis, o.redisKeyPrefix)
	}
	ix := descriptors.NewIndex(cfg)
	q, err := rlqs.New(func() *descriptors.Index { return ix }, ro)
	if err != nil {
		store.close() //nolint:errcheck // the error that matters is rlqs.New's
		return nil, nil, err
	}
	return q, store.close, nil
}
