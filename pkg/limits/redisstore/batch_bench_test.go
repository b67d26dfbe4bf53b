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
// decision (used_cpu_sys + used_cpu_user of INFO CPU), and the script calls
// per decision (INFO commandstats): none since every hit on its own is
// decided with native commands; pipelines/op is how many pipelines each
// decision took a share of.
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
				cpu0, calls0 := redisCPU(b, srv), scriptCalls(b, srv)
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
				b.ReportMetric(float64(scriptCalls(b, srv)-calls0)/float64(b.N), "scripts/op")
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

// scriptCalls returns the EVAL and EVALSHA calls the Redis server has run.
func scriptCalls(b *testing.B, srv *redistest.Server) int64 {
	return int64(infoSum(b, srv, "commandstats", func(k, v string) string {
		if k != "cmdstat_evalsha" && k != "cmdstat_eval" {
			return ""
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
		return calls
	}))
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
// pipeline, a script that only GETs and SETs a key, 16 to a pipeline (the
// least a decision in Lua can cost), and the native commands of a window
// hit and of a bucket hit, 16 decisions to a pipeline. cmd-ns/cmd is the
// time inside the commands (INFO commandstats). It is the floor the store's
// numbers compare with.
func BenchmarkRedisFloor(b *testing.B) {
	srv := redistest.Start(b)
	c := newClient(b, ClientOptions{URL: srv.URL(), Timeout: time.Second})
	ctx := context.Background()
	getSet := redis.NewScript(`redis.call('GET', KEYS[1]) redis.call('SET', KEYS[1], '1 2', 'PX', 60000) return 1`)
	if err := getSet.Load(ctx, c).Err(); err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		per  int
		add  func(p redis.Pipeliner, i int)
	}{
		{"get/round-trip", 1, func(p redis.Pipeliner, i int) { p.Get(ctx, "floor") }},
		{"get/pipelined-16", 16, func(p redis.Pipeliner, i int) { p.Get(ctx, "floor") }},
		{"evalsha-get-set/pipelined-16", 16, func(p redis.Pipeliner, i int) {
			getSet.EvalSha(ctx, p, []string{"floor:" + strconv.Itoa(i)})
		}},
		// A window hit's native commands, and a bucket's (window.go,
		// bucket.go), 16 decisions to a pipeline on keys of their own.
		{"incrby-pexpire-nx/pipelined-16", 16, func(p redis.Pipeliner, i int) {
			k := "floor:w:" + strconv.Itoa(i)
			p.IncrBy(ctx, k, 1)
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

// BenchmarkBatchScript measures Redis's side of one merged flush: a Decide
// call of 16 hits on 16 distinct keys (drawn from 10,000, as many callers'
// would be), serially, so that nothing else competes for the CPU: one
// pipeline of native commands (its name is from the batch script of every
// algorithm that it measured before them). It reports the time Redis spent inside scripts per decision
// (script-us/decision, from INFO commandstats: arguments, Lua, commands,
// reply), inside every command (cmd-us/decision: scripts, native commands
// and the pipeline's TIME), and its whole CPU per decision
// (redis-cpu-ns/decision, the syscalls of the round trip included).
func BenchmarkBatchScript(b *testing.B) {
	const batch, keys = 16, 10000
	srv := redistest.Start(b)
	c := newClient(b, ClientOptions{URL: srv.URL(), Timeout: 10 * time.Second})
	for _, alg := range implemented {
		b.Run(alg.String(), func(b *testing.B) {
			s := New(c, Options{})
			defer s.Close()
			l := benchLimit(alg)
			hits := make([]limits.Hit, batch)
			res := make([]limits.Result, batch)
			names := make([]string, keys)
			for i := range names {
				names[i] = fmt.Sprintf("envoy-rls:bench:%s_k%d:0", alg.ShortName(), i)
			}
			ctx := context.Background()
			cpu0, us0, cmd0 := redisCPU(b, srv), scriptMicros(b, srv), commandMicros(b, srv)
			next := 0
			for b.Loop() {
				for i := range hits {
					hits[i] = limits.Hit{Key: names[next], Limit: l, Cost: 1}
					next = (next + 1) % keys
				}
				s.Decide(ctx, hits, res)
				for i := range res {
					if res[i].Err != nil || !res[i].Allowed {
						b.Fatalf("hit %d: %+v, want allowed", i, res[i])
					}
				}
			}
			decisions := float64(b.N * batch)
			b.ReportMetric((scriptMicros(b, srv)-us0)/decisions, "script-us/decision")
			b.ReportMetric((commandMicros(b, srv)-cmd0)/decisions, "cmd-us/decision")
			b.ReportMetric((redisCPU(b, srv)-cpu0).Seconds()*1e9/decisions, "redis-cpu-ns/decision")
		})
	}
}

// scriptMicros returns the microseconds Redis has spent running EVAL and
// EVALSHA calls.
func scriptMicros(b *testing.B, srv *redistest.Server) float64 {
	return infoSum(b, srv, "commandstats", func(k, v string) string {
		if k != "cmdstat_evalsha" && k != "cmdstat_eval" {
			return ""
		}
		_, rest, _ := strings.Cut(v, "usec=")
		us, _, _ := strings.Cut(rest, ",")
		return us
	})
}

// commandMicros returns the microseconds Redis has spent running commands,
// every command (native and scripts) but INFO, which the benchmarks send
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
