package metrics

import "github.com/prometheus/client_golang/prometheus"

// XDSStats are the counts of the xDS client (xds.Client.Stats) that the
// metrics report.
type XDSStats struct {
	// Version is the version_info of the snapshot in force, empty before
	// the first.
	Version                    string
	Applied, Refused, Failures uint64
	Connected                  bool
}

var (
	xdsVersionDesc = prometheus.NewDesc("rls_xds_config_info",
		"Always 1, labelled with the version_info of the xDS snapshot in force; absent until one is applied.", []string{"version"}, nil)
	xdsAppliedDesc = prometheus.NewDesc("rls_xds_snapshots_applied_total",
		"xDS snapshots that validated, were applied and ACKed.", nil, nil)
	xdsRefusedDesc = prometheus.NewDesc("rls_xds_snapshots_refused_total",
		"xDS snapshots NACKed because they did not validate; the config in force stayed.", nil, nil)
	xdsFailuresDesc = prometheus.NewDesc("rls_xds_connection_failures_total",
		"Attempts to reach the xDS server that failed, and streams that ended.", nil, nil)
	xdsConnectedDesc = prometheus.NewDesc("rls_xds_connected",
		"Whether a stream to the xDS server is open and has had an answer.", nil, nil)
)

// NewXDSCollector returns a collector of the xDS client's counts, read
// from stats at each scrape. Reading them then, rather than counting
// here, keeps what the client did before the server's metrics existed:
// the first snapshot is fetched before the service answers.
func NewXDSCollector(stats func() XDSStats) prometheus.Collector {
	return xdsCollector(stats)
}

type xdsCollector func() XDSStats

func (c xdsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- xdsVersionDesc
	ch <- xdsAppliedDesc
	ch <- xdsRefusedDesc
	ch <- xdsFailuresDesc
	ch <- xdsConnectedDesc
}

func (c xdsCollector) Collect(ch chan<- prometheus.Metric) {
	s := c()
	if s.Applied > 0 {
		ch <- prometheus.MustNewConstMetric(xdsVersionDesc, prometheus.GaugeValue, 1, s.Version)
	}
	ch <- prometheus.MustNewConstMetric(xdsAppliedDesc, prometheus.CounterValue, float64(s.Applied))
	ch <- prometheus.MustNewConstMetric(xdsRefusedDesc, prometheus.CounterValue, float64(s.Refused))
	ch <- prometheus.MustNewConstMetric(xdsFailuresDesc, prometheus.CounterValue, float64(s.Failures))
	connected := 0.0
	if s.Connected {
		connected = 1
	}
	ch <- prometheus.MustNewConstMetric(xdsConnectedDesc, prometheus.GaugeValue, connected)
}
