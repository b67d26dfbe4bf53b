package redisstore

import (
	"testing"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/storetest"
)

// TestConformance runs the suite that every store passes, on one Redis for
// all cases (the suite's keys are unique per case).
func TestConformance(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, ClientOptions{URL: srv.URL(), Timeout: testTimeout})
	storetest.Run(t, func(t *testing.T, clock func() int64) limits.Store {
		return New(c, Options{Clock: clock})
	})
}
