package dropin

import (
	"maps"
	"testing"
)

// TestDropInStatsSinks: USE_STATSD's default pushes to localhost:8125 as
// there, unless another sink is chosen; USE_DOG_STATSD pushes DogStatsD,
// with EXTRA_TAGS and the mogrifiers named; DISABLE_STATS is the server's
// -disable-stats, which turns every sink off.
func TestDropInStatsSinks(t *testing.T) {
	const mogs = `[{"pattern":"^ratelimit\\.service\\.rate_limit\\.([^.]+)\\.(.*)\\.([^.]+)$","name":"ratelimit.service.rate_limit.$3","tags":{"descriptor":"$2","domain":"$1"}},{"pattern":"^ratelimit_server\\.(.*)$","name":"server.$1"}]`
	for _, c := range []struct {
		name string
		vars map[string]string
		want map[string]string // the statsd flags; "" for none
	}{
		{"unset: statsd, its default", nil, map[string]string{"statsd-addr": "localhost:8125"}},
		{"off", map[string]string{"USE_STATSD": "false"}, nil},
		{"Prometheus chosen", map[string]string{"USE_PROMETHEUS": "true"}, nil},
		{"both asked for", map[string]string{"USE_PROMETHEUS": "true", "USE_STATSD": "true", "STATSD_HOST": "sd", "STATSD_PORT": "9125"},
			map[string]string{"statsd-addr": "sd:9125"}},
		{"DogStatsD", map[string]string{"USE_DOG_STATSD": "true"}, map[string]string{"statsd-addr": "localhost:8125", "dogstatsd": "true"}},
		{"DogStatsD with tags and mogrifiers", map[string]string{
			"USE_STATSD": "false", "USE_DOG_STATSD": "true", "STATSD_HOST": "127.0.0.1", "EXTRA_TAGS": "env:prod",
			"STATS_FLUSH_INTERVAL": "2s", "USE_DOG_STATSD_MOGRIFIERS": "hits, server",
			"DOG_STATSD_MOGRIFIER_HITS_PATTERN":   `^ratelimit\.service\.rate_limit\.([^.]+)\.(.*)\.([^.]+)$`,
			"DOG_STATSD_MOGRIFIER_HITS_NAME":      "ratelimit.service.rate_limit.$3",
			"DOG_STATSD_MOGRIFIER_HITS_TAGS":      "domain:$1,descriptor:$2",
			"DOG_STATSD_MOGRIFIER_SERVER_PATTERN": `^ratelimit_server\.(.*)$`, "DOG_STATSD_MOGRIFIER_SERVER_NAME": "server.$1",
		}, map[string]string{"statsd-addr": "127.0.0.1:8125", "dogstatsd": "true", "statsd-tags": "env:prod",
			"statsd-flush-interval": "2s", "dogstatsd-mogrifiers": mogs}},
		{"mogrifiers without DogStatsD", map[string]string{"USE_DOG_STATSD_MOGRIFIERS": "hits"}, map[string]string{"statsd-addr": "localhost:8125"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newUpstreamEnv(env(c.vars))
			e.translate()
			if len(e.errs) > 0 {
				t.Fatal(e.errs)
			}
			got := map[string]string{}
			for _, f := range []string{"statsd-addr", "dogstatsd", "statsd-tags", "dogstatsd-mogrifiers"} {
				if v, ok := e.flags[f]; ok {
					got[f] = v
				}
			}
			if v := e.flags["statsd-flush-interval"]; v != "10s" {
				got["statsd-flush-interval"] = v
			}
			if len(c.want) == 0 && len(got) == 0 {
				return
			}
			if !maps.Equal(got, c.want) {
				t.Errorf("got %v,\nwant %v", got, c.want)
			}
		})
	}
}
