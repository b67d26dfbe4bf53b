package integration

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
)

// TestRLQSFleetFigure is the run behind BENCHMARKS.md's "RLQS: a fleet
// dividing one limit" (scripts/rlqs-fleet.sh runs it; the default suite
// skips it): three simulated Envoys on two instances sharing one
// redis-server, at Envoy's real 5 s report interval
// ($RLQS_FLEET_INTERVAL to change it), one limit of 100 a second. E1 (20
// a second, on A) and E2 (200, on B) from the start; E3 (200, on A) joins
// two fifths of an interval after a phase (six intervals); E2 leaves three
// fifths of one after another; the run ends a phase later. Each second it samples what each Envoy's token bucket
// allowed and what it was assigned, and writes them to $RLQS_FLEET_CSV;
// beside it, a Mermaid chart (.mmd) and the figures (.txt): the time
// after the join and after the leave until every assignment is within 5 %
// of its new fair share, the fleet's excess over the limit in the two
// intervals after each, and what the new Envoy let through before its
// first assignment (its no-assignment behaviour, allow-all).
func TestRLQSFleetFigure(t *testing.T) {
	path := os.Getenv("RLQS_FLEET_CSV")
	if path == "" {
		t.Skip("set RLQS_FLEET_CSV=path, or run scripts/rlqs-fleet.sh")
	}
	interval := 5 * time.Second
	if v := os.Getenv("RLQS_FLEET_INTERVAL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second || d%time.Second != 0 {
			t.Fatalf("RLQS_FLEET_INTERVAL=%q: want whole seconds, at least 1s", v)
		}
		interval = d
	}
	phase := 6 * interval
	r := redistest.Start(t)
	config := writeConfig(t, rlqsLimits)
	flags := []string{"-redis-url", r.URL(), "-rlqs-report-interval", interval.String()}
	a, b := startServer(t, config, flags...), startServer(t, config, flags...)

	rec := &fleetRecorder{limit: fleetLimit}
	start := time.Now()
	rec.envoys = []*fleetEnvoy{
		startFleetEnvoy(t, a.conn, "E1", 20, interval),
		startFleetEnvoy(t, b.conn, "E2", 200, interval),
		nil, // E3 joins
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		rec.sample(start, stop)
	}()

	// The join and the leave fall between the reports of the Envoys
	// already there (E1 and E2 report at multiples of the interval from
	// the start, E3 two fifths of one later), as they would in a fleet.
	time.Sleep(time.Until(start.Add(phase + interval*2/5)))
	joined := time.Now()
	e3 := startFleetEnvoy(t, a.conn, "E3", 200, interval)
	rec.set(2, e3)
	// What E3 let through before its first assignment: Envoy reports a
	// new bucket at its first request, so this lasts one round trip.
	var first time.Duration
	var firstAllowed uint64
	for time.Since(joined) < interval {
		if s, _ := e3.Strategy(fleetBucket); s != nil {
			first, firstAllowed = time.Since(joined), e3.Stats().Allowed
			break
		}
		time.Sleep(time.Millisecond)
	}
	joinConv, joinPeak := converge(rec.present(), []float64{20, 40, 40}, 4*interval)

	time.Sleep(time.Until(start.Add(2*phase + interval*3/5)))
	left := time.Now()
	rec.envoys[1].leave()
	rec.set(1, nil)
	leaveConv, leavePeak := converge(rec.present(), []float64{20, 80}, 4*interval)

	time.Sleep(time.Until(start.Add(3 * phase)))
	close(stop)
	wg.Wait()

	at := func(t time.Time) int { return int(t.Sub(start) / time.Second) }
	steps := int(interval / time.Second)
	var sum strings.Builder
	fmt.Fprintf(&sum, "interval %v, phase %v, limit %.0f/s; E1 20/s on A, E2 200/s on B, E3 200/s on A joins at %ds, E2 leaves at %ds\n",
		interval, phase, fleetLimit, at(joined), at(left))
	fmt.Fprintf(&sum, "steady, phase 1 (E1, E2; fair 20, 80): %s\n", rec.mean(at(start)+2*steps, at(joined)))
	fmt.Fprintf(&sum, "join: E3's first assignment %v after its first request; allowed before it (no assignment, allow-all): %d\n",
		first.Round(time.Millisecond), firstAllowed)
	fmt.Fprintf(&sum, "join: every assignment within 5%% of fair (20, 40, 40) %s after; highest sum of assignments meanwhile %.1f/s\n",
		fmtConv(joinConv), joinPeak)
	fmt.Fprintf(&sum, "join: two intervals after: %s\n", rec.excess(at(joined), at(joined)+2*steps))
	fmt.Fprintf(&sum, "steady, phase 2 (E1, E2, E3; fair 20, 40, 40): %s\n", rec.mean(at(joined)+2*steps, at(left)))
	fmt.Fprintf(&sum, "leave: every assignment within 5%% of fair (20, 80) %s after; highest sum of assignments meanwhile %.1f/s\n",
		fmtConv(leaveConv), leavePeak)
	fmt.Fprintf(&sum, "leave: two intervals after: %s\n", rec.excess(at(left), at(left)+2*steps))
	fmt.Fprintf(&sum, "steady, phase 3 (E1, E3; fair 20, 80): %s\n", rec.mean(at(left)+2*steps, len(rec.rows)))
	fmt.Fprintf(&sum, "whole run: %s\n", rec.excess(0, len(rec.rows)))
	t.Log("\n" + sum.String())

	base := strings.TrimSuffix(path, ".csv")
	for name, data := range map[string]string{path: rec.csv(), base + ".mmd": rec.mermaid(), base + ".txt": sum.String()} {
		if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if joinConv < 0 || leaveConv < 0 {
		t.Errorf("the division did not converge within four intervals (join %v, leave %v)", joinConv, leaveConv)
	}
}

// fleetRow is one second of the run: what each Envoy's token bucket
// allowed in it (a second's worth: the count over the time that actually
// passed) and what it was assigned at its end; -1 for an Envoy absent.
type fleetRow struct {
	allowed, assigned [3]float64
}

func (r fleetRow) total() float64 {
	s := 0.0
	for _, v := range r.allowed {
		s += math.Max(v, 0)
	}
	return s
}

// fleetRecorder samples the fleet each second.
type fleetRecorder struct {
	limit  float64
	mu     sync.Mutex
	envoys []*fleetEnvoy
	rows   []fleetRow
}

func (rec *fleetRecorder) set(i int, e *fleetEnvoy) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.envoys[i] = e
}

func (rec *fleetRecorder) present() []*fleetEnvoy {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var out []*fleetEnvoy
	for _, e := range rec.envoys {
		if e != nil {
			out = append(out, e)
		}
	}
	return out
}

// sample records a row at each second after start until stop. An Envoy
// that joins mid-second counts from 0; one that leaves mid-second is
// absent from that second on (its last part-second is lost, a leave's
// figure errs low).
func (rec *fleetRecorder) sample(start time.Time, stop <-chan struct{}) {
	var last [3]uint64
	var was [3]*fleetEnvoy
	prev := start
	for i := 1; ; i++ {
		select {
		case <-stop:
			return
		case <-time.After(time.Until(start.Add(time.Duration(i) * time.Second))):
		}
		now := time.Now()
		secs := now.Sub(prev).Seconds()
		prev = now
		rec.mu.Lock()
		var row fleetRow
		for k, e := range rec.envoys {
			row.allowed[k], row.assigned[k] = -1, -1
			if e == nil {
				was[k] = nil
				continue
			}
			if was[k] != e {
				was[k], last[k] = e, 0
			}
			n := e.Stats().Allowed
			row.allowed[k] = float64(n-last[k]) / secs
			row.assigned[k] = e.assigned()
			last[k] = n
		}
		rec.rows = append(rec.rows, row)
		rec.mu.Unlock()
	}
}

// mean is the mean per-second total and each Envoy's mean over rows
// [from, to).
func (rec *fleetRecorder) mean(from, to int) string {
	rows := rec.window(from, to)
	if len(rows) == 0 {
		return "no samples"
	}
	var total float64
	var each [3]float64
	for _, r := range rows {
		total += r.total()
		for k, v := range r.allowed {
			each[k] += math.Max(v, 0)
		}
	}
	n := float64(len(rows))
	return fmt.Sprintf("total %.1f/s (%+.1f %% of the limit), E1 %.1f, E2 %.1f, E3 %.1f, over %d s",
		total/n, 100*(total/n-rec.limit)/rec.limit, each[0]/n, each[1]/n, each[2]/n, len(rows))
}

// excess is the highest per-second total over rows [from, to) and the
// requests allowed over the limit in them.
func (rec *fleetRecorder) excess(from, to int) string {
	rows := rec.window(from, to)
	peak, over, total := 0.0, 0.0, 0.0
	for _, r := range rows {
		peak = math.Max(peak, r.total())
		over += math.Max(0, r.total()-rec.limit)
		total += r.total()
	}
	return fmt.Sprintf("highest second %.0f (%.2f× the limit), %.0f requests over the limit in %d s (%.1f %% of the %.0f the limit allows), mean %.1f/s",
		peak, peak/rec.limit, over, len(rows), 100*over/(rec.limit*float64(len(rows))), rec.limit*float64(len(rows)), total/math.Max(1, float64(len(rows))))
}

func (rec *fleetRecorder) window(from, to int) []fleetRow {
	from, to = max(0, from), min(len(rec.rows), to)
	if from >= to {
		return nil
	}
	return rec.rows[from:to]
}

func (rec *fleetRecorder) csv() string {
	var b strings.Builder
	b.WriteString("second,limit,total,e1,e2,e3,e1_assigned,e2_assigned,e3_assigned\n")
	for i, r := range rec.rows {
		fmt.Fprintf(&b, "%d,%.0f,%.1f", i+1, rec.limit, r.total())
		for _, v := range append(r.allowed[:], r.assigned[:]...) {
			if v < 0 {
				b.WriteString(",")
			} else {
				fmt.Fprintf(&b, ",%.1f", v)
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// mermaid is a Mermaid xychart-beta of the run: the limit, the fleet's
// total, then E1, E2 and E3 (0 while absent), one point a second.
func (rec *fleetRecorder) mermaid() string {
	series := func(f func(fleetRow) float64) string {
		var vs []string
		for _, r := range rec.rows {
			vs = append(vs, strconv.FormatFloat(math.Round(math.Max(f(r), 0)), 'f', -1, 64))
		}
		return "[" + strings.Join(vs, ", ") + "]"
	}
	var b strings.Builder
	b.WriteString("```mermaid\nxychart-beta\n")
	b.WriteString("    title \"One limit of 100/s, three Envoys on two instances (lines: limit, total, E1, E2, E3)\"\n")
	fmt.Fprintf(&b, "    x-axis \"second\" 1 --> %d\n", len(rec.rows))
	b.WriteString("    y-axis \"allowed per second\" 0 --> 250\n")
	b.WriteString("    line " + series(func(fleetRow) float64 { return rec.limit }) + "\n")
	b.WriteString("    line " + series(fleetRow.total) + "\n")
	for k := range 3 {
		b.WriteString("    line " + series(func(r fleetRow) float64 { return r.allowed[k] }) + "\n")
	}
	b.WriteString("```\n")
	return b.String()
}

// converge polls the Envoys' assignments every 10 ms until each is within
// 5 % of its fair share, and returns how long that took (-1: not within
// bound) and the highest sum of their assignments on the way.
func converge(envoys []*fleetEnvoy, fair []float64, bound time.Duration) (time.Duration, float64) {
	start := time.Now()
	peak := 0.0
	for time.Since(start) < bound {
		done, sum := true, 0.0
		for i, e := range envoys {
			got := e.assigned()
			sum += got
			if math.Abs(got-fair[i]) > 0.05*fair[i] {
				done = false
			}
		}
		peak = math.Max(peak, sum)
		if done {
			return time.Since(start), peak
		}
		time.Sleep(10 * time.Millisecond)
	}
	return -1, peak
}

func fmtConv(d time.Duration) string {
	if d < 0 {
		return "never (within four intervals)"
	}
	return d.Round(10 * time.Millisecond).String()
}
