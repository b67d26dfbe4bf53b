package redisstore

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// BenchmarkDecideParallel measures many goroutines each deciding one hit of
// its own key per call, with one pipeline per call and with merged
// pipelines. Besides ns/op it reports the Redis server's CPU time per
// decision (used_cpu_sys + used_cpu_user of INFO CPU); pipelines/op is how
// many pipelines each decision took a share of.
func BenchmarkDecideParallel(b *testing.B) {
	srv := redistest.Start(b)
	c := newClient(b, ClientOptions{URL: srv.URL(), Timeout: time.Second, PoolSize: 256})
	for _, mode := range []struct {
		name string
		opts Options
	}{
		{"batching=off", Options{Batching: BatchOff}},
		{"batching=on", Options{}},
	} {
		for _, par := range []int{1, 8, 64} {
			b.Run(fmt.Sprintf("%s/parallelism=%d", mode.name, par), func(b *testing.B) {
				var pipelines atomic.Int64
				opts := mode.opts
				opts.OnPipeline = func(int) { pipelines.Add(1) }
				s := New(c, opts)
				defer s.Close()
				l := benchLimit(limits.FixedWindow)
				var id atomic.Int64
				cpu0 := redisCPU(b, srv)
				b.SetParallelism(par)
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					hits := []limits.Hit{{Key: fmt.Sprintf("bp:%d", id.Add(1)), Limit: l, Cost: 1}}
					res := make([]limits.Result, 1)
					for pb.Next() {
						s.Decide(context.Background(), hits, res)
						if res[0].Err != nil || !res[0].Allowed {
							b.Errorf("got %+v, want allowed", res[0])
							return
						}
					}
				})
				b.StopTimer()
				cpu := redisCPU(b, srv) - cpu0
				b.ReportMetric(cpu.Seconds()*1e9/float64(b.N), "redis-cpu-ns/op")
				b.ReportMetric(float64(pipelines.Load())/float64(b.N), "pipelines/op")
			})
		}
	}
}

// redisCPU returns the CPU time the Redis server has used so far.
func redisCPU(b *testing.B, srv *redistest.Server) time.Duration {
	total := infoSum(b, srv, "CPU", func(k, v string) string {
		if k != "used_cpu_sys" && k != "used_cpu_user" {
			return ""
		}
		return v
	})
	return time.Duration(total * float64(time.Second))
}

// infoSum adds up the numbers that pick takes from the fields of a section
// of INFO ("" skips a field).
func infoSum(b *testing.B, srv *redistest.Server, section string, pick func(k, v string) string) float64 {
	b.Helper()
	info, err := srv.Do("INFO", section)
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		if n := pick(k, v); n != "" {
			f, err := strconv.ParseFloat(n, 64)
			if err != nil {
				b.Fatalf("INFO %s: %q: %v", section, line, err)
			}
			total += f
		}
	}
	return total
}

// BenchmarkRedisFloor measures what Redis itself spends on the simplest
// work, as redis-cpu-ns per command (per decision for the last two): a GET
// per round trip (the cost of the syscalls of one round trip), GETs 16 to a
// pipeline, and the native commands of a window hit and of a bucket hit, 16
// decisions to a pipeline. cmd-ns/cmd is the
// time inside the commands (INFO commandstats). It is the floor the store's
// numbers compare with.
func BenchmarkRedisFloor(b *testing.B) {
	srv := redistest.Start(b)
	c := newClient(b, ClientOptions{URL: srv.URL(), Timeout: time.Second})
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		per  int
		add  func(p redis.Pipeliner, i int)
	}{
		{"get/round-trip", 1, func(p redis.Pipeliner, i int) { p.Get(ctx, "floor") }},
		{"get/pipelined-16", 16, func(p redis.Pipeliner, i int) { p.Get(ctx, "floor") }},
		// A window hit's native commands, and a bucket's (window.go,
		// bucket.go), 16 decisions to a pipeline on keys of their own.
		{"bitfield-sat-pexpire-nx/pipelined-16", 16, func(p redis.Pipeliner, i int) {
			k := "floor:w:" + strconv.Itoa(i)
			p.Do(ctx, "bitfield", k, "overflow", "sat", "incrby", "u63", 0, 1)
			p.Do(ctx, "pexpire", k, 3_600_000, "nx")
		}},
		{"bitfield-pexpire/pipelined-16", 16, func(p redis.Pipeliner, i int) {
			k := "floor:b:" + strconv.Itoa(i)
			l := limits.Limit{Algorithm: limits.TokenBucket, Requests: limits.MaxRequests, Period: time.Hour}
			plan := planBucket(l, 1, time.Now().UnixMicro(), 0)
			p.Do(ctx, plan.appendCond([]any{"bitfield", k})...)
			p.Do(ctx, "pexpire", k, plan.ttl)
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			cpu0, cmd0 := redisCPU(b, srv), commandMicros(b, srv)
			for b.Loop() {
				p := c.Pipeline()
				for i := range tc.per {
					tc.add(p, i)
				}
				if _, err := p.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
					b.Fatal(err)
				}
			}
			cpu := redisCPU(b, srv) - cpu0
			b.ReportMetric(cpu.Seconds()*1e9/float64(b.N*tc.per), "redis-cpu-ns/cmd")
			b.ReportMetric((commandMicros(b, srv)-cmd0)*1000/float64(b.N*tc.per), "cmd-ns/cmd")
		})
	}
}

// BenchmarkBatchRedis measures Redis's side of one merged flush: a Decide
// call of 16 hits on distinct keys (drawn from 10,000, as many callers'
// would be), serially, so that nothing else competes for the CPU. Each
// algorithm is measured with 16 lone hits that are allowed, 8 joint runs
// of two (a limit of the algorithm and a fixed window) that are allowed,
// and 16 lone hits that are refused (a limit of one, full: a window's and a
// log's charge undone, a bucket's refused by its BITFIELD). It reports the
// time Redis spent inside every command per decision (cmd-us/decision,
// from INFO commandstats: the pipeline's TIME included; a joint run's two
// hits count as two decisions) and its whole CPU per decision
// (redis-cpu-ns/decision, the syscalls of the round trips included).
func BenchmarkBatchRedis(b *testing.B) {
	const batch, keys = 16, 10000
	srv := redistest.Start(b)
	c := newClient(b, ClientOptions{URL: srv.URL(), Timeout: 10 * time.Second})
	for _, alg := range implemented {
		for _, shape := range []string{"lone", "joint", "refused"} {
			b.Run(alg.String()+"/"+shape, func(b *testing.B) {
				s := New(c, Options{})
				defer s.Close()
				l, other := benchLimit(alg), benchLimit(limits.FixedWindow)
				allowed := shape != "refused"
				if !allowed {
					l = limits.Limit{Algorithm: alg, Requests: 1, Period: time.Hour}
				}
				hits := make([]limits.Hit, batch)
				res := make([]limits.Result, batch)
				names := make([]string, keys)
				for i := range names {
					names[i] = fmt.Sprintf("envoy-rls:bench:{%s_%s_k%d}:", alg.ShortName(), shape, i)
				}
				ctx := context.Background()
				if !allowed {
					for i := range names {
						hits[i%batch] = limits.Hit{Key: names[i] + "0", Limit: l, Cost: 1}
						if i%batch == batch-1 {
							s.Decide(ctx, hits, res)
						}
					}
				}
				cpu0, cmd0 := redisCPU(b, srv), commandMicros(b, srv)
				next := 0
				for b.Loop() {
					for i := range hits {
						if shape == "joint" && i%2 == 1 {
							// The second limit of the run of hits[i-1].
							hits[i-1].Joint = true
							hits[i] = limits.Hit{Key: names[next] + "1", Limit: other, Cost: 1}
							next = (next + 1) % keys
							continue
						}
						hits[i] = limits.Hit{Key: names[next] + "0", Limit: l, Cost: 1}
						if shape != "joint" {
							next = (next + 1) % keys
						}
					}
					s.Decide(ctx, hits, res)
					for i := range res {
						if res[i].Err != nil || res[i].Allowed != allowed {
							b.Fatalf("hit %d: %+v, want allowed %v", i, res[i], allowed)
						}
					}
				}
				decisions := float64(b.N * batch)
				b.ReportMetric((commandMicros(b, srv)-cmd0)/decisions, "cmd-us/decision")
				b.ReportMetric((redisCPU(b, srv)-cpu0).Seconds()*1e9/decisions, "redis-cpu-ns/decision")
			})
		}
	}
}

// commandMicros returns the microseconds Redis has spent running commands,
// every command but INFO, which the benchmarks send
// themselves.
func commandMicros(b *testing.B, srv *redistest.Server) float64 {
	return infoSum(b, srv, "commandstats", func(k, v string) string {
		if k == "cmdstat_info" {
			return ""
		}
		_, rest, _ := strings.Cut(v, "usec=")
		us, _, _ := strings.Cut(rest, ",")
		return us
	})
}

// BenchmarkFlushes measures the merged pipelines with 1, 2 and 4 of them
// in flight (Options.Flushes), for 16 and 64 goroutines each deciding one
// fixed window hit of its own key per call: the decisions a pipeline
// carries, Redis's CPU per decision and ns/op.
func BenchmarkFlushes(b *testing.B) {
	srv := redistest.Start(b)
	c := newClient(b, ClientOptions{URL: srv.URL(), Timeout: time.Second, PoolSize: 256})
	for _, goroutines := range []int{16, 64} {
		for _, flushes := range []int{1, 2, 4} {
			b.Run(fmt.Sprintf("goroutines=%d/flushes=%d", goroutines, flushes), func(b *testing.B) {
				var pipelines, runs atomic.Int64
				s := New(c, Options{Flushes: flushes, OnPipeline: func(n int) { pipelines.Add(1); runs.Add(int64(n)) }})
				defer s.Close()
				l := benchLimit(limits.FixedWindow)
				l.CountRefused = true
				var id atomic.Int64
				cpu0 := redisCPU(b, srv)
				b.SetParallelism((goroutines + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					hits := []limits.Hit{{Key: fmt.Sprintf("fl:%d", id.Add(1)), Limit: l, Cost: 1}}
					res := make([]limits.Result, 1)
					for pb.Next() {
						s.Decide(context.Background(), hits, res)
						if res[0].Err != nil || !res[0].Allowed {
							b.Errorf("got %+v, want allowed", res[0])
							return
						}
					}
				})
				b.StopTimer()
				b.ReportMetric((redisCPU(b, srv)-cpu0).Seconds()*1e9/float64(b.N), "redis-cpu-ns/op")
				b.ReportMetric(float64(runs.Load())/float64(max(1, pipelines.Load())), "decisions/pipeline")
			})
		}
	}
}
