package metrics_test

import (
	"fmt"
	"testing"

	"github.com/envoy-rls/envoy-rls/internal/metrics"
)

// The hot-key collector reports the layer's figures as they are at each
// scrape, beside the service's own collectors.
func TestHotKeyCollector(t *testing.T) {
	var st metrics.HotKeyStats
	m := metrics.New()
	m.Registry.MustRegister(metrics.NewHotKeyCollector(func() metrics.HotKeyStats { return st }))
	for _, c := range []metrics.HotKeyStats{{}, {Keys: 3, Local: 900, Direct: 7, Syncs: 12, Charged: 1100}, {Keys: 1, Local: 1 << 40, Direct: 8, Syncs: 13, Charged: 1 << 41}} {
		st = c
		wantLines(t, scrape(t, m),
			"# TYPE rls_hot_key_keys gauge",
			fmt.Sprint("rls_hot_key_keys ", c.Keys),
			"# TYPE rls_hot_key_local_decisions_total counter",
			fmt.Sprint("rls_hot_key_local_decisions_total ", float64(c.Local)),
			"# TYPE rls_hot_key_store_decisions_total counter",
			fmt.Sprint("rls_hot_key_store_decisions_total ", c.Direct),
			"# TYPE rls_hot_key_syncs_total counter",
			fmt.Sprint("rls_hot_key_syncs_total ", c.Syncs),
			"# TYPE rls_hot_key_charged_total counter",
			fmt.Sprint("rls_hot_key_charged_total ", float64(c.Charged)),
		)
	}
}
