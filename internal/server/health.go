package server

import (
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// Health, beyond serving until the drain: /healthz and gRPC health report
// not serving while the config in force has no domain under
// -healthy-needs-config (or -xds-healthy-needs-config), as
// envoyproxy/ratelimit's HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED, and
// while Redis refuses the settings (refused.go): /healthz finds that at
// each check, gRPC health from the store's watch.

// setGRPCHealth sets both of gRPC health's names to serving or not. Once
// the drain has shut hs down, it ignores this.
func setGRPCHealth(hs *health.Server, serving bool) {
	st := healthpb.HealthCheckResponse_SERVING
	if !serving {
		st = healthpb.HealthCheckResponse_NOT_SERVING
	}
	hs.SetServingStatus("", st)
	hs.SetServingStatus(rlsv3.RateLimitService_ServiceDesc.ServiceName, st)
}

// updateHealth gives gRPC health the say of the config in force and of the
// store. It runs on the source's loads and on the store's watch at once,
// so each finding and its setting go under healthMu: a finding already
// stale must not overwrite a newer one.
func (r *running) updateHealth() {
	r.healthMu.Lock()
	defer r.healthMu.Unlock()
	setGRPCHealth(r.hs, r.src.healthy() && !r.storeRefused.Load())
}

// storeRefusedChanged records whether Redis refuses the settings, for
// gRPC health.
func (r *running) storeRefusedChanged(refused bool) {
	r.storeRefused.Store(refused)
	r.updateHealth()
}

// limitsInForce is the config the service decides by: the service's once
// it runs (files reloaded, xDS snapshots), the source's before.
func (r *running) limitsInForce() *config.Config {
	if r.svc != nil {
		return r.svc.Index().Config()
	}
	if cfg := r.src.config(); cfg != nil {
		return cfg
	}
	return &config.Config{}
}
