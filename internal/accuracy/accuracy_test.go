package accuracy

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
	"github.com/envoy-rls/envoy-rls/internal/trace"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

func run(t *testing.T, c Config) *Report {
	t.Helper()
	r, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// figures returns the figures of shape s and algorithm a.
func figures(t *testing.T, r *Report, s trace.Shape, a limits.Algorithm) Figures {
	t.Helper()
	for i := range r.Config.Shapes {
		for j := range r.Config.Algorithms {
			if r.Config.Shapes[i] == s && r.Config.Algorithms[j] == a {
				return r.Figures[i][j]
			}
		}
	}
	t.Fatalf("no figures for %s %s", s, a)
	return Figures{}
}

// TestSmallRunBounds runs the report's small seeded run and checks what
// each algorithm is known to do: the sliding log is the truth, a fixed
// window lets through twice the threshold at an edge and never more, a
// token bucket of capacity N at most N more, a leaky bucket's service never
// exceeds the threshold, and nothing refuses a source at half of it.
func TestSmallRunBounds(t *testing.T) {
	r := run(t, Small(1))
	for i, s := range r.Config.Shapes {
		for a, alg := range r.Config.Algorithms {
			f := r.Figures[i][a]
			name := fmt.Sprintf("%s %s", s, alg)
			if f.Requests == 0 || f.Sources != int64(r.Config.Sources) {
				t.Errorf("%s: %d requests from %d sources", name, f.Requests, f.Sources)
			}
			switch alg {
			case limits.SlidingLog, limits.LeakyBucket:
				if f.WrongAllowed != 0 || f.WrongRefused != 0 {
					t.Errorf("%s: %d wrongly allowed, %d wrongly refused; want none", name, f.WrongAllowed, f.WrongRefused)
				}
			case limits.FixedWindow, limits.TokenBucket:
				if f.WorstOvershoot() > 1 {
					t.Errorf("%s: worst overshoot %.0f%%, want at most 100%%", name, 100*f.WorstOvershoot())
				}
			}
			if s.Load <= 0.5 && (f.WrongRefused != 0 || f.Allowed != f.Requests) {
				t.Errorf("%s: %d of %d allowed at half the threshold", name, f.Allowed, f.Requests)
			}
		}
	}
	edge := trace.Shape{Kind: trace.Edge, Load: 1}
	if f := figures(t, r, edge, limits.FixedWindow); f.WorstOvershoot() != 1 || f.FalseNegative != f.Sources {
		t.Errorf("fixed window at the edges: worst overshoot %.0f%% in %d of %d sources, want 100%% in all",
			100*f.WorstOvershoot(), f.FalseNegative, f.Sources)
	}
	if f := figures(t, r, edge, limits.SlidingWindow); f.WorstOver != 0 {
		t.Errorf("sliding window at the edges: %d over, want none", f.WorstOver)
	}
	// Cloudflare's order of magnitude for the sliding window's estimate.
	for _, s := range r.Config.Shapes {
		if f := figures(t, r, s, limits.SlidingWindow); s.Kind == trace.Poisson && f.MeanRateError() > 0.1 {
			t.Errorf("sliding window on %s: mean rate error %.1f%%, want under 10%%", s, 100*f.MeanRateError())
		}
	}
	if r.Timeline == nil || len(r.Timeline.Admitted) != len(r.Config.Algorithms) {
		t.Fatal("no timeline of the edge trace")
	}
}

// TestDeterministic checks that the figures depend on the seed only, not
// on the number of workers.
func TestDeterministic(t *testing.T) {
	c := Small(3)
	c.Sources, c.Duration = 150, 2*time.Minute
	c.Workers = 1
	a := run(t, c)
	c.Workers = 4
	b := run(t, c)
	a.Config.Workers, b.Config.Workers = 0, 0
	if !reflect.DeepEqual(a, b) {
		t.Error("1 worker and 4 workers gave different reports")
	}
	c.Seed = 4
	if d := run(t, c); reflect.DeepEqual(a.Figures, d.Figures) {
		t.Error("seeds 3 and 4 gave the same figures")
	}
}

// TestRedisMatchesPure replays a short run through a real redis-server
// (package redisstore, the replay's instants as its clock): its figures are
// the pure functions' to the request.
func TestRedisMatchesPure(t *testing.T) {
	srv := redistest.Start(t)
	d, closeRedis, err := OpenRedis(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer closeRedis()
	c := Config{Seed: 5, Sources: 6, Duration: 3 * time.Minute, Requests: 20, Period: time.Minute}
	pure := run(t, c)
	c.Decider, c.KeyPrefix = d, "acc:"
	onRedis := run(t, c)
	for i, s := range pure.Config.Shapes {
		for a, alg := range pure.Config.Algorithms {
			if p, r := pure.Figures[i][a], onRedis.Figures[i][a]; p != r {
				t.Errorf("%s %s: pure %+v, Redis %+v", s, alg, p, r)
			}
		}
	}
	if n, err := srv.Do("DBSIZE"); err != nil || n == "0" {
		t.Errorf("Redis holds %q keys (%v): the run did not go through it", n, err)
	}
	if !reflect.DeepEqual(pure.Timeline, onRedis.Timeline) {
		t.Error("the edge timelines differ")
	}
}
