package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
)

// The fleet tests run with Envoys reporting every second, as do the
// instances (-rlqs-report-interval): the demands expire after three
// intervals, the assignments after three seconds (two intervals and one).
const fleetInterval = time.Second

var fleetFlags = []string{"-rlqs-report-interval", fleetInterval.String()}

// fleetSetup is one way to run the fleet tests: the instances of one store
// and which instance each Envoy talks to.
type fleetSetup struct {
	name string
	// start starts the instances.
	start func(t *testing.T, config string) []*server
}

// fleetSetups: two instances sharing one real redis-server, and one
// instance on the embedded store, where the division holds within the
// instance. Envoy i talks to instance i % len(instances) of three: on
// Redis the 10 and the 200 a second on A, the 40 on B.
var fleetSetups = []fleetSetup{
	{name: "redis", start: func(t *testing.T, config string) []*server {
		url := redistest.Start(t).URL()
		flags := append([]string{"-redis-url", url}, fleetFlags...)
		return []*server{startServer(t, config, flags...), startServer(t, config, flags...)}
	}},
	{name: "embedded", start: func(t *testing.T, config string) []*server {
		return []*server{startServer(t, config, fleetFlags...)}
	}},
}

func forEachFleet(t *testing.T, f func(t *testing.T, setup fleetSetup)) {
	t.Helper()
	for _, setup := range fleetSetups {
		t.Run(setup.name, func(t *testing.T) {
			t.Parallel()
			f(t, setup)
		})
	}
}

// Three Envoys asking 10, 40 and 200 a second of one limit of 100 a
// second get a max-min fair division, 10, 40 and 50, and the fleet is
// allowed the limit: each Envoy's token bucket allows within 15 % (3 a
// second at least) of its fair share, and the three together within 15 %
// of the limit, counted over 10 s (what the simulated Envoys' token
// buckets allowed, from two intervals after they start: their first
// report is answered with an equal share, their second with the division
// of the measured demands).
func TestRLQSFleetFairShare(t *testing.T) {
	forEachFleet(t, func(t *testing.T, setup fleetSetup) {
		servers := setup.start(t, writeConfig(t, rlqsLimits))
		demands := []float64{10, 200, 40}
		names := []string{"10/s", "200/s", "40/s"}
		var envoys []*fleetEnvoy
		for i, d := range demands {
			envoys = append(envoys, startFleetEnvoy(t, servers[i%len(servers)].conn, names[i], d, fleetInterval))
		}
		fair := []float64{10, 50, 40}
		pollAssigned(t, "three Envoys", 3*fleetInterval+2*time.Second, envoys, fair)
		time.Sleep(fleetInterval) // the buckets refill at their new rates
		checkShares(t, "three Envoys", envoys, fleetRates(envoys, fleetWindow(t)), fair)
	})
}

// An Envoy that leaves (its stream closed) gives its share back at once:
// of 10, 40 and 200 a second, once the 40 leaves, the 200 gets the 90 it
// leaves at its next report, within two intervals.
func TestRLQSFleetLeave(t *testing.T) {
	forEachFleet(t, func(t *testing.T, setup fleetSetup) {
		servers := setup.start(t, writeConfig(t, rlqsLimits))
		demands := []float64{10, 200, 40}
		names := []string{"10/s", "200/s", "40/s"}
		var envoys []*fleetEnvoy
		for i, d := range demands {
			envoys = append(envoys, startFleetEnvoy(t, servers[i%len(servers)].conn, names[i], d, fleetInterval))
		}
		pollAssigned(t, "three Envoys", 3*fleetInterval+2*time.Second, envoys, []float64{10, 50, 40})
		envoys[2].leave()
		// The 200's next report (within an interval) is divided without
		// the 40's demand; the bound adds an interval and slack for the
		// shared cores.
		pollAssigned(t, "after the 40 left", 2*fleetInterval+time.Second, envoys[:2], []float64{10, 90})
		time.Sleep(fleetInterval)
		checkShares(t, "after the 40 left", envoys[:2], fleetRates(envoys[:2], 3*time.Second), []float64{10, 90})
	})
}

// An Envoy that stops reporting without closing its stream (hung, or cut
// off by a network that drops packets) keeps its share until its demand
// expires, three report intervals after its last report; the others get
// it at their next report after that.
func TestRLQSFleetSilentEnvoy(t *testing.T) {
	forEachFleet(t, func(t *testing.T, setup fleetSetup) {
		servers := setup.start(t, writeConfig(t, rlqsLimits))
		e := startFleetEnvoy(t, servers[0].conn, "200/s", 200, fleetInterval)
		pollAssigned(t, "alone", 2*fleetInterval+2*time.Second, []*fleetEnvoy{e}, []float64{100})
		// The silent one reports 200 a second once, on the other
		// instance if there is one, and never again.
		silent := newRLQSClient(t, servers[len(servers)-1])
		silent.report(200, time.Second)
		reported := time.Now()
		pollAssigned(t, "beside the silent one", fleetInterval+2*time.Second, []*fleetEnvoy{e}, []float64{50})
		took := pollAssigned(t, "the silent one expired", 4*fleetInterval+2*time.Second, []*fleetEnvoy{e}, []float64{100})
		if since := time.Since(reported); since < 3*fleetInterval {
			t.Errorf("the silent Envoy's share came back %v after its report, before its demand expired (%v)", since, 3*fleetInterval)
		} else {
			t.Logf("the silent Envoy's share came back %v after its report (%v more polling)", since.Round(time.Millisecond), took.Round(time.Millisecond))
		}
	})
}

// A restart of envoy-rls: the process is killed (SIGKILL, no drain) and
// started again on the same port. Each Envoy's stream ends; it opens a new
// one at its next report timer, as Envoy does, and gets an assignment
// again within one interval of the instance serving. On Redis the killed
// process's entries live until they expire (three intervals), so until
// then the Envoys get less than their fair shares, never more (checked
// when the Envoys were assigned again within two intervals of the kill,
// while the entries surely live). On the
// embedded store the new process knows no demand: each Envoy's first
// report to it is divided among the Envoys that have reported so far, so
// the first to reconnect may hold the whole limit until its next report
// while the second gets its share of the two (with two Envoys, up to twice
// the limit for an interval).
func TestRLQSFleetRestart(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store) {
		config := writeConfig(t, rlqsLimits)
		flags := append(st.flags(t), fleetFlags...)
		s := startServer(t, config, flags...)
		conn := dial(t, s.grpcAddr)
		t.Cleanup(func() { conn.Close() })
		envoys := []*fleetEnvoy{
			startFleetEnvoy(t, conn, "40/s", 40, fleetInterval),
			startFleetEnvoy(t, conn, "200/s", 200, fleetInterval),
		}
		fair := []float64{40, 60}
		pollAssigned(t, "before the restart", 3*fleetInterval+2*time.Second, envoys, fair)
		before := make([]int, len(envoys))
		for i, e := range envoys {
			before[i] = e.Stats().Responses
		}
		killed := time.Now()
		s.kill(t)
		startServerAt(t, s, config, flags...) // on the same ports; the Envoys find it there
		serving := time.Now()
		if !poll(fleetInterval+time.Second, func() bool {
			for i, e := range envoys {
				st := e.Stats()
				if st.Streams < 2 || st.Responses <= before[i] || e.assigned() == 0 {
					return false
				}
			}
			return true
		}) {
			for _, e := range envoys {
				t.Errorf("%s %v after the new process served: stats %+v, assigned %.1f", e.name, time.Since(serving).Round(time.Millisecond), e.Stats(), e.assigned())
			}
			return
		}
		t.Logf("both Envoys reconnected and assigned %v after the new process served", time.Since(serving).Round(time.Millisecond))
		// The killed process's entries expire three intervals after its
		// last reports, at most an interval before the kill: Envoys
		// assigned within two intervals of the kill are divided beside
		// them. Past that (a start slowed by a loaded machine) they may be
		// gone, and the new process divides as the embedded store does.
		beside := st.name == "redis" && time.Since(killed) < 2*fleetInterval
		if st.name == "redis" && !beside {
			t.Logf("assigned %v after the kill, past two intervals: the old entries may have expired; the embedded store's bound applies", time.Since(killed).Round(time.Millisecond))
		}
		sum := 0.0
		for i, e := range envoys {
			got := e.assigned()
			sum += got
			if beside && got > fair[i]*1.05 {
				t.Errorf("%s after the restart: assigned %.1f a second, over its fair share %.0f", e.name, got, fair[i])
			}
		}
		// On the embedded store each Envoy's first report to the new
		// process is divided among the Envoys that have reported to it
		// so far: the first may get the whole limit, the second its share
		// of the two, until their next reports; never more than the
		// limit each.
		if bound := fleetLimit * float64(len(envoys)); sum > bound*1.05 {
			t.Errorf("after the restart: assignments sum to %.1f a second, over %.0f", sum, bound)
		}
		t.Logf("after the restart: assignments sum to %.1f a second", sum)
		pollAssigned(t, "after the restart", 4*fleetInterval+2*time.Second, envoys, fair)
	})
}

// A Redis outage: with the store gone each instance goes on dividing, among
// its own Envoys, the part of the limit they held at its last good read,
// counts each such division in rls_rlqs_store_failures_total and logs it
// (once an interval); the fleet stays at the limit. When Redis is back
// (empty: it was killed) the instances divide from it again at the next
// reports, and the failures stop.
func TestRLQSFleetRedisOutage(t *testing.T) {
	t.Parallel()
	r := redistest.Start(t)
	config := writeConfig(t, rlqsLimits)
	flags := append([]string{"-redis-url", r.URL()}, fleetFlags...)
	a, b := startServer(t, config, flags...), startServer(t, config, flags...)
	envoys := []*fleetEnvoy{
		startFleetEnvoy(t, a.conn, "10/s", 10, fleetInterval),
		startFleetEnvoy(t, a.conn, "40/s", 40, fleetInterval),
		startFleetEnvoy(t, b.conn, "200/s", 200, fleetInterval),
	}
	fair := []float64{10, 40, 50}
	pollAssigned(t, "before the outage", 3*fleetInterval+2*time.Second, envoys, fair)
	failures := func(s *server) float64 {
		v, _ := s.metric(t, "rls_rlqs_store_failures_total")
		return v
	}

	r.Stop()
	stopped := time.Now()
	if !poll(2*fleetInterval+time.Second, func() bool { return failures(a) > 0 && failures(b) > 0 }) {
		t.Fatalf("rls_rlqs_store_failures_total %v on A, %v on B, %v after Redis stopped; want both above 0",
			failures(a), failures(b), time.Since(stopped).Round(time.Millisecond))
	}
	// Two intervals into the outage, the assignments are what they were:
	// A's Envoys share the half it held, B's Envoy keeps the other.
	time.Sleep(fleetInterval)
	checkShares(t, "Redis down", envoys, fleetRates(envoys, 3*fleetInterval), fair)
	for _, s := range []*server{a, b} {
		if !strings.Contains(s.stderr.String(), "demand store unreachable") {
			t.Errorf("no log line saying the demand store is unreachable; stderr:\n%s", s.stderr.String())
		}
	}

	r.Restart()
	restarted := time.Now()
	// Recovered: the failures stop growing over two intervals.
	var last [2]float64
	if !poll(6*fleetInterval, func() bool {
		now := [2]float64{failures(a), failures(b)}
		if now != last {
			last = now
			time.Sleep(2 * fleetInterval)
			return now == [2]float64{failures(a), failures(b)}
		}
		return true
	}) {
		t.Errorf("rls_rlqs_store_failures_total still growing %v after Redis came back: %v", time.Since(restarted), last)
	}
	t.Logf("divisions without Redis: %v on A, %v on B; none for two intervals by %v after it came back",
		last[0], last[1], time.Since(restarted).Round(time.Millisecond))
	pollAssigned(t, "Redis back", 2*fleetInterval+time.Second, envoys, fair)
	// The first division from the emptied Redis may move a share out of
	// its band, and the replaced bucket starts full: measure after it.
	time.Sleep(2 * fleetInterval)
	checkShares(t, "Redis back", envoys, fleetRates(envoys, 3*fleetInterval), fair)
}
