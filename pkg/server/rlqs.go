package server

import (
	"go.uber.org/zap"

	"github.com/envoy-rls/envoy-rls/pkg/metrics"
	"github.com/envoy-rls/envoy-rls/pkg/rlqs"
	"github.com/envoy-rls/envoy-rls/pkg/rlqs/redisdemand"
	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

// newRLQS makes the RLQS service of -rlqs, nil when it is off. It reads
// the config in force from the RLS service, so that a reload (files or
// xDS) reaches both; with Redis the demands are shared under
// -redis-key-prefix, so that every instance divides among all Envoys.
func newRLQS(o *Options, svc *rls.Service, store *storeHandle, m *metrics.Metrics, log *zap.Logger) (*rlqs.Service, error) {
	if !o.rlqs {
		return nil, nil
	}
	ro := rlqs.Options{
		ReportInterval:   o.rlqsReportInterval,
		AssignmentTTL:    o.rlqsAssignmentTTL,
		MaxStreamBuckets: o.rlqsMaxStreamBuckets,
		MaxBuckets:       o.rlqsMaxBuckets,
		Logger:           log.Named("rlqs"),
	}
	if store.redis != nil {
		ro.Store = redisdemand.New(store.redis, o.redisKeyPrefix)
	}
	q, err := rlqs.New(svc.Index, ro)
	if err != nil {
		return nil, err
	}
	m.Registry.MustRegister(q.Collector())
	return q, nil
}
