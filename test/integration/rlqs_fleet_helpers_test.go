package integration

import (
	"context"
	"fmt"
	"math"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/envoy-rls/envoy-rls/internal/rlqstest"
)

// Helpers of the TestRLQSFleet* tests: simulated Envoys (internal/rlqstest,
// real gRPC clients enforcing as Envoy 1.40 does) asking for a steady rate
// of one bucket of rlqsLimits (100 a second) from envoy-rls processes.

// fleetBucket is the bucket every simulated Envoy of the fleet tests asks
// for: rlqsLimits's /api, 100 requests a second.
var fleetBucket = map[string]string{"path": "/api"}

const fleetLimit = 100.0 // requests per second, rlqsLimits's

// fleetEnvoy is one simulated Envoy and the load that drives it: demand
// requests a second of fleetBucket, paced on the real clock.
type fleetEnvoy struct {
	*rlqstest.Envoy
	name   string
	demand float64
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// startFleetEnvoy starts a simulated Envoy on conn reporting every
// interval and asking demand requests a second. The load catches up after
// a stall of the test process (up to a second of requests at once), so
// that what the Envoy asks over a window is its demand however the cores
// are shared; its token bucket decides what is allowed. It leaves when the
// test ends.
func startFleetEnvoy(t *testing.T, conn grpc.ClientConnInterface, name string, demand float64, interval time.Duration) *fleetEnvoy {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f := &fleetEnvoy{
		Envoy: rlqstest.New(conn, rlqstest.Options{Domain: "edge", ReportInterval: interval}),
		name:  name, demand: demand, cancel: cancel, done: make(chan struct{}),
	}
	go func() {
		defer close(f.done)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		start, sent := time.Now(), 0
		for {
			due := int(demand*time.Since(start).Seconds()) + 1
			if behind := due - sent; behind > int(demand) {
				sent = due - int(demand)
			}
			for ; sent < due; sent++ {
				f.Allow(fleetBucket)
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(f.leave)
	return f
}

// leave stops the load and closes the Envoy's stream, as an Envoy leaving
// the fleet does.
func (f *fleetEnvoy) leave() {
	f.once.Do(func() {
		f.cancel()
		<-f.done
		f.Close()
	})
}

// assigned is the rate of the Envoy's token bucket (requests a second), 0
// when it enforces none.
func (f *fleetEnvoy) assigned() float64 {
	s, _ := f.Strategy(fleetBucket)
	tb := s.GetTokenBucket()
	if tb == nil || tb.GetFillInterval().GetSeconds() <= 0 {
		return 0
	}
	return float64(tb.GetTokensPerFill().GetValue()) / float64(tb.GetFillInterval().GetSeconds())
}

// fleetRates measures what each Envoy's token bucket allowed over d, in
// requests a second of the time that actually passed.
func fleetRates(envoys []*fleetEnvoy, d time.Duration) []float64 {
	before := make([]uint64, len(envoys))
	for i, e := range envoys {
		before[i] = e.Stats().Allowed
	}
	start := time.Now()
	time.Sleep(d)
	secs := time.Since(start).Seconds()
	rates := make([]float64, len(envoys))
	for i, e := range envoys {
		rates[i] = float64(e.Stats().Allowed-before[i]) / secs
	}
	return rates
}

// fleetTolerance is how far a measured share may be from its fair share:
// 15 %, and at least 3 requests a second, for shares measured on 2 shared
// cores.
func fleetTolerance(fair float64) float64 { return math.Max(0.15*fair, 3) }

// checkShares fails the test unless each rate is within fleetTolerance of
// its fair share and their sum within 15 % of the limit.
func checkShares(t *testing.T, what string, envoys []*fleetEnvoy, rates, fair []float64) {
	t.Helper()
	total := 0.0
	var got []string
	for i, r := range rates {
		total += r
		got = append(got, fmt.Sprintf("%s %.1f (fair %.0f, assigned %.1f)", envoys[i].name, r, fair[i], envoys[i].assigned()))
		if math.Abs(r-fair[i]) > fleetTolerance(fair[i]) {
			t.Errorf("%s: %s allowed %.1f a second, want %.0f ± %.1f", what, envoys[i].name, r, fair[i], fleetTolerance(fair[i]))
		}
	}
	if math.Abs(total-fleetLimit) > 0.15*fleetLimit {
		t.Errorf("%s: the fleet allowed %.1f a second, want the limit %.0f ± 15 %%", what, total, fleetLimit)
	}
	t.Logf("%s: total %.1f a second; %s", what, total, strings.Join(got, ", "))
}

// pollAssigned waits up to bound for every Envoy's assignment to be within
// fleetTolerance of its fair share and returns how long that took; it
// fails the test if it never is.
func pollAssigned(t *testing.T, what string, bound time.Duration, envoys []*fleetEnvoy, fair []float64) time.Duration {
	t.Helper()
	start := time.Now()
	ok := poll(bound, func() bool {
		for i, e := range envoys {
			if math.Abs(e.assigned()-fair[i]) > fleetTolerance(fair[i]) {
				return false
			}
		}
		return true
	})
	took := time.Since(start)
	var got []string
	for i, e := range envoys {
		got = append(got, fmt.Sprintf("%s %.1f (fair %.0f)", e.name, e.assigned(), fair[i]))
	}
	if !ok {
		t.Errorf("%s: assignments not fair within %v: %s", what, bound, strings.Join(got, ", "))
	} else {
		t.Logf("%s: fair within %v: %s", what, took.Round(time.Millisecond), strings.Join(got, ", "))
	}
	return took
}

// fleetWindow is how long the fair division is measured: 10 s, or
// $RLS_SOAK for the long variant (scripts/soak.sh sets it).
func fleetWindow(t *testing.T) time.Duration {
	t.Helper()
	env := os.Getenv("RLS_SOAK")
	if env == "" {
		return 10 * time.Second
	}
	d, err := time.ParseDuration(env)
	if err != nil || d <= 0 {
		t.Fatalf("RLS_SOAK=%q: want a positive duration such as 60s", env)
	}
	return d
}

// kill ends the process with SIGKILL, as a crash or an OOM kill does: no
// drain, no stream ended by the server. The test's own stop is then a
// no-op.
func (s *server) kill(t *testing.T) {
	t.Helper()
	s.stopOnce.Do(func() {
		if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatalf("SIGKILL: %v", err)
		}
		if !s.wait(exitBound) {
			t.Fatalf("envoy-rls still running %v after SIGKILL", exitBound)
		}
	})
}

// startServerAt starts the service on the addresses of a server that has
// exited, as a restarted instance behind the same address is, and waits
// until it serves.
func startServerAt(t *testing.T, old *server, config string, flags ...string) *server {
	t.Helper()
	args := append(standardFlags(config, old.grpcAddr, old.httpAddr), flags...)
	p := startProc(t, args, nil)
	if err := waitHealth(t, p, old.grpcAddr, healthpb.HealthCheckResponse_SERVING); err != nil {
		t.Fatalf("envoy-rls %s: %v", strings.Join(args, " "), err)
	}
	s := &server{proc: p, grpcAddr: old.grpcAddr, httpAddr: old.httpAddr}
	t.Cleanup(func() { s.stop(t) })
	s.conn = dial(t, s.grpcAddr)
	t.Cleanup(func() { s.conn.Close() })
	s.rls = rlsv3.NewRateLimitServiceClient(s.conn)
	s.health = healthpb.NewHealthClient(s.conn)
	return s
}
