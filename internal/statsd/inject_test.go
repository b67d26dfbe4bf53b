package statsd

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/zap"

	"github.com/envoy-rls/envoy-rls/internal/metrics"
	"github.com/envoy-rls/envoy-rls/internal/statsdtest"
	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// hostileValues are request values of a detailed_metric descriptor: one
// with each of the 256 byte values between two letters, a statsd line of
// the caller's own after a newline, bytes that are not UTF-8, and the
// characters DogStatsD's tags reserve.
func hostileValues() []string {
	var vs []string
	for b := range 256 {
		vs = append(vs, "v"+string([]byte{byte(b)})+"w")
	}
	return append(vs,
		"x\nevil.injected_1_c.total_hits:3|c",
		"x\r\nevil.cr:1|c\x00evil.nul:1|c",
		"\xff\xfe\xc3(",
		"a,evil:tag#x y|@0.5",
		"\u2028münchen€")
}

// countHostile records one hit of each hostile value on a detailed_metric
// limit, and returns how many.
func countHostile(t *testing.T, m *metrics.Metrics) uint64 {
	t.Helper()
	d, err := config.Parse("limits.yaml", []byte("domain: edge\ndescriptors:\n  - key: client\n    detailed_metric: true\n    rate_limit: {unit: second, requests_per_unit: 10}\n"))
	if err != nil {
		t.Fatal(err)
	}
	ix := descriptors.NewIndex(&config.Config{Domains: map[string]*config.Domain{d.Name: d}})
	vs := hostileValues()
	for _, v := range vs {
		entries := []descriptors.Entry{{Key: "client", Value: v}}
		n, _, path := ix.Match("edge", entries, nil)
		if n == nil {
			t.Fatalf("%q matches nothing", v)
		}
		m.Decided(&metrics.Decision{Domain: "edge", Rule: "r", Outcome: metrics.OutcomeOK, Stats: true, Hit: metrics.RatelimitHit{
			Domain: "edge", Entries: entries, Path: path, Node: n, Hits: 1, Decided: true, Limit: 10, After: 1}})
	}
	return uint64(len(vs))
}

// safe reports whether s is made of the bytes a stat name or tag may hold.
func safe(s string) bool {
	for i := range len(s) {
		if !descriptors.StatByteSafe(s[i]) {
			return false
		}
	}
	return s != ""
}

// TestHostileValuesStayInTheirStat: whatever bytes a request's value has,
// every line a statsd receives over UDP, plain or DogStatsD with a
// mogrifier that makes tags of a name's parts, is one of the service's
// stats, with a name and tags of safe bytes, and the total_hits of the
// hostile values add up to the hits, none lost and none added; the
// Prometheus exposition of the same stats parses, with each series'
// labels UTF-8, and its total_hits add up the same.
func TestHostileValuesStayInTheirStat(t *testing.T) {
	mogs, err := ParseMogrifiers(`[{"pattern": "^ratelimit\\.service\\.rate_limit\\.([^.]+)\\.(.*)\\.([^.]+)$", "name": "ratelimit.service.rate_limit.$3", "tags": {"domain": "$1", "descriptor": "$2"}}]`)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		o    Options
	}{
		{"plain", Options{Network: "udp"}},
		{"DogStatsD", Options{Network: "udp", Dog: true, Mogrifiers: mogs}},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := statsdtest.Start(t, "udp")
			m := metrics.New()
			if err := m.EnableRatelimit(metrics.RatelimitOptions{Statsd: true}); err != nil {
				t.Fatal(err)
			}
			c.o.Addr = srv.Addr()
			p := pusher(t, c.o, m, zap.NewNop())
			want := countHostile(t, m)
			p.Flush()

			var hits uint64
			done := func(lines []string) bool {
				hits = 0
				for _, l := range ours(lines) {
					st, ok := statsdtest.Parse(l)
					if ok && strings.HasSuffix(st.Name, ".total_hits") || ok && st.Name == "ratelimit.service.rate_limit.total_hits" {
						n, _ := strconv.ParseUint(st.Value, 10, 64)
						hits += n
					}
				}
				return hits >= want
			}
			if !srv.WaitFor(5*time.Second, done) {
				t.Errorf("total_hits: got %d, want %d", hits, want)
			}
			for _, l := range ours(srv.Lines()) {
				st, ok := statsdtest.Parse(l)
				if !ok || !strings.HasPrefix(st.Name, "ratelimit.service.rate_limit.") || !safe(st.Name) {
					t.Errorf("line %q: not one of the service's stats, or a name with unsafe bytes", l)
					continue
				}
				if len(l) != len(st.Name)+1+len(st.Value)+1+len(st.Type) && !c.o.Dog {
					t.Errorf("line %q: more than NAME:VALUE|TYPE", l)
				}
				for _, tag := range st.Tags {
					k, v, ok := strings.Cut(tag, ":")
					if !ok || !safe(k) || !safe(v) || strings.Contains(v, ":") {
						t.Errorf("line %q: tag %q is not KEY:VALUE of safe bytes", l, tag)
					}
				}
			}
			if hits > want {
				t.Errorf("total_hits: got %d, want %d: a value made stats of its own", hits, want)
			}

			var exp bytes.Buffer
			mfs, err := m.RatelimitGatherer().Gather()
			if err != nil {
				t.Fatal(err)
			}
			enc := expfmt.NewEncoder(&exp, expfmt.NewFormat(expfmt.TypeTextPlain))
			for _, mf := range mfs {
				if err := enc.Encode(mf); err != nil {
					t.Fatal(err)
				}
			}
			parser := expfmt.NewTextParser(model.LegacyValidation)
			parsed, err := parser.TextToMetricFamilies(&exp)
			if err != nil {
				t.Fatalf("the exposition does not parse: %v", err)
			}
			var served float64
			total := parsed["ratelimit_service_rate_limit_total_hits"]
			for _, s := range total.GetMetric() {
				for _, lp := range s.GetLabel() {
					if !utf8.ValidString(lp.GetValue()) || !safe(lp.GetValue()) {
						t.Errorf("label %s=%q: not UTF-8 of safe bytes", lp.GetName(), lp.GetValue())
					}
				}
				served += s.GetCounter().GetValue()
			}
			// One more than the hits: the injected value's within_limit
			// stat (…injected_1_c.total_hits_3_c.within_limit) matches the
			// built-in mapper's total_hits regex, which is not anchored,
			// as it does under envoyproxy/ratelimit's.
			if served != float64(want+1) {
				t.Errorf("served total_hits: %v, want %d", served, want+1)
			}
		})
	}
}
