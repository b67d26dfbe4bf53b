// Package growth measures how the cost of a decision grows with the work:
// keys in the embedded store, rules in the config, descriptors per
// request, and a Redis Cluster's masters. BENCHMARKS.md ("How the cost
// grows") holds the figures, each with its command.
package growth

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
	"github.com/envoy-rls/envoy-rls/pkg/limits/memory"
	"github.com/envoy-rls/envoy-rls/pkg/limits/redisstore"
)

// heap is the live heap after a collection.
func heap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// keyOf is the store key of value i of one descriptor, as the service
// builds it.
func keyOf(l limits.Limit, i int) string {
	return descriptors.Key(descriptors.KeyInput{
		Domain:  "growth",
		Entries: []descriptors.Entry{{Key: "api_key", Value: "k" + strconv.Itoa(i)}},
		Limit:   l,
	})
}

// BenchmarkEmbeddedKeys decides a fixed window hit on a random one of the
// keys the embedded store holds, 1k to 1M of them: ns/op, and the heap per
// key (B/key, the key's name included).
func BenchmarkEmbeddedKeys(b *testing.B) {
	l := limits.Limit{Algorithm: limits.FixedWindow, Requests: limits.MaxRequests, Period: time.Hour}
	for _, n := range []int{1_000, 10_000, 100_000, 1_000_000} {
		b.Run("keys="+strconv.Itoa(n), func(b *testing.B) {
			keys := make([]string, n)
			for i := range keys {
				keys[i] = keyOf(l, i)
			}
			before := heap()
			s := memory.New(memory.Options{MaxKeys: 2 * n, SweepInterval: -1})
			defer s.Close()
			hits := make([]limits.Hit, 1)
			res := make([]limits.Result, 1)
			for _, k := range keys {
				hits[0] = limits.Hit{Key: k, Limit: l, Cost: 1}
				s.Decide(context.Background(), hits, res)
			}
			perKey := float64(heap()-before) / float64(n)
			rng := rand.New(rand.NewPCG(1, 2))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				hits[0] = limits.Hit{Key: keys[rng.IntN(n)], Limit: l, Cost: 1}
				s.Decide(context.Background(), hits, res)
			}
			b.StopTimer()
			if !res[0].Allowed {
				b.Fatalf("got %+v, want allowed", res[0])
			}
			b.ReportMetric(perKey, "B/key")
			if st := s.Stats(); st.Keys != n {
				b.Fatalf("store holds %d keys, want %d", st.Keys, n)
			}
		})
	}
}

// rulesFile is a limits file of n rules: one descriptor key with n values,
// each its own limit, every tenth a wildcard.
func rulesFile(n int) string {
	var b strings.Builder
	b.WriteString("domain: growth\ndescriptors:\n")
	algorithms := []string{"fixed_window", "sliding_window", "token_bucket"}
	for i := range n {
		value := "v" + strconv.Itoa(i)
		if i%10 == 9 {
			value += "-*"
		}
		fmt.Fprintf(&b, "  - key: route\n    value: %q\n    rate_limit: {algorithm: %s, unit: minute, requests_per_unit: %d}\n", value, algorithms[i%3], 1+i%1000)
	}
	return b.String()
}

// BenchmarkRules loads a limits file of 1k, 10k and 100k rules: ns/op is
// one load, and a reload (config.Load and the descriptor index the service
// builds from it); it reports the heap the loaded config and index hold
// (B/rule) and the time a request takes to find its rule (match-ns).
func BenchmarkRules(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run("rules="+strconv.Itoa(n), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "limits.yaml")
			if err := os.WriteFile(path, []byte(rulesFile(n)), 0o644); err != nil {
				b.Fatal(err)
			}
			var ix *descriptors.Index
			before := heap()
			for b.Loop() {
				c, err := config.Load(path)
				if err != nil {
					b.Fatal(err)
				}
				ix = descriptors.NewIndex(c)
			}
			b.StopTimer()
			held := heap()
			b.ReportMetric(float64(held-min(held, before))/float64(n), "B/rule")
			// A request for an exact value, and one that only the last
			// wildcard rule matches (wildcards are tried in config order).
			for _, m := range []struct{ unit, value string }{
				{"exact-match-ns", "v" + strconv.Itoa(n-2)},
				{"wildcard-match-ns", "v" + strconv.Itoa(n-1) + "-suffix"},
			} {
				const matches = 20_000
				path := make([]*descriptors.Node, 0, 4)
				entries := []descriptors.Entry{{Key: "route", Value: m.value}}
				start := time.Now()
				for range matches {
					if end, _, _ := ix.Match("growth", entries, path[:0]); end == nil {
						b.Fatalf("%s: no rule", m.value)
					}
				}
				b.ReportMetric(float64(time.Since(start).Nanoseconds())/matches, m.unit)
			}
			runtime.KeepAlive(ix)
		})
	}
}

// decideLoad runs goroutines callers, each deciding calls of perCall fixed
// window hits (count_refused, one key per hit, drawn from keys), until b.N
// hits are decided, and returns the hits decided.
func decideLoad(b *testing.B, s *redisstore.Store, goroutines, perCall, keys int) int64 {
	l := limits.Limit{Algorithm: limits.FixedWindow, Requests: limits.MaxRequests, Period: time.Hour, CountRefused: true}
	names := make([]string, keys)
	for i := range names {
		names[i] = keyOf(l, i)
	}
	var decided atomic.Int64
	calls := int64(b.N/perCall + 1)
	var next atomic.Int64
	done := make(chan struct{})
	for g := range goroutines {
		go func() {
			defer func() { done <- struct{}{} }()
			rng := rand.New(rand.NewPCG(uint64(g), 3))
			hits := make([]limits.Hit, perCall)
			res := make([]limits.Result, perCall)
			for next.Add(1) <= calls {
				for i := range hits {
					hits[i] = limits.Hit{Key: names[rng.IntN(keys)], Limit: l, Cost: 1}
				}
				s.Decide(context.Background(), hits, res)
				for _, r := range res {
					if r.Err != nil || !r.Allowed {
						b.Errorf("got %+v, want allowed", r)
						return
					}
				}
				decided.Add(int64(perCall))
			}
		}()
	}
	for range goroutines {
		<-done
	}
	return decided.Load()
}

// redisCPU is the CPU time a Redis server has used so far (INFO CPU).
func redisCPU(b *testing.B, srv *redistest.Server) time.Duration {
	b.Helper()
	cpu, err := srv.CPU()
	if err != nil {
		b.Fatal(err)
	}
	return cpu
}

// BenchmarkDescriptorsPerRequest decides requests of 1 to 16 descriptors
// (one Decide call each, one hit per descriptor on 10,000 keys) from 16
// goroutines on one Redis: ns/op and Redis's CPU per decision.
func BenchmarkDescriptorsPerRequest(b *testing.B) {
	srv := redistest.Start(b)
	c, err := redisstore.NewClient(redisstore.ClientOptions{URL: srv.URL(), Timeout: 5 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	for _, d := range []int{1, 2, 4, 8, 16} {
		b.Run("descriptors="+strconv.Itoa(d), func(b *testing.B) {
			s := redisstore.New(c, redisstore.Options{})
			defer s.Close()
			cpu0 := redisCPU(b, srv)
			b.ResetTimer()
			n := decideLoad(b, s, 16, d, 10_000)
			b.StopTimer()
			b.ReportMetric(float64((redisCPU(b, srv)-cpu0).Nanoseconds())/float64(n), "redis-cpu-ns/decision")
		})
	}
}

// BenchmarkCluster decides requests of 1 and 4 descriptors from 16
// goroutines on a Redis Cluster of 3 masters, each call one pipeline per
// node (the default) or calls merged (batching=on): ns/op and each node's
// Redis CPU per decision it served (a third of them), to compare with one
// Redis with batching off, as on a cluster.
func BenchmarkCluster(b *testing.B) {
	cl := redistest.StartCluster(b, 3)
	c, err := redisstore.NewClient(redisstore.ClientOptions{Cluster: cl.Addrs(), Timeout: 5 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	single := redistest.Start(b)
	sc, err := redisstore.NewClient(redisstore.ClientOptions{URL: single.URL(), Timeout: 5 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer sc.Close()
	for _, d := range []int{1, 4} {
		for _, m := range []struct {
			name     string
			batching redisstore.Batching
		}{{"", redisstore.BatchAuto}, {"batching=off/", redisstore.BatchOff}} {
			b.Run(fmt.Sprintf("masters=3/%sdescriptors=%d", m.name, d), func(b *testing.B) {
				s := redisstore.New(c, redisstore.Options{Batching: m.batching})
				defer s.Close()
				cpu0 := make([]time.Duration, len(cl.Nodes))
				for i, n := range cl.Nodes {
					cpu0[i] = redisCPU(b, n)
				}
				b.ResetTimer()
				n := decideLoad(b, s, 16, d, 10_000)
				b.StopTimer()
				for i, node := range cl.Nodes {
					// Each node serves about a third of the decisions.
					b.ReportMetric(float64((redisCPU(b, node)-cpu0[i]).Nanoseconds())/(float64(n)/3), fmt.Sprintf("node%d-redis-cpu-ns/decision", i))
				}
			})
		}
		b.Run(fmt.Sprintf("single/batching=off/descriptors=%d", d), func(b *testing.B) {
			s := redisstore.New(sc, redisstore.Options{Batching: redisstore.BatchOff})
			defer s.Close()
			cpu0 := redisCPU(b, single)
			b.ResetTimer()
			n := decideLoad(b, s, 16, d, 10_000)
			b.StopTimer()
			b.ReportMetric(float64((redisCPU(b, single)-cpu0).Nanoseconds())/float64(n), "redis-cpu-ns/decision")
		})
	}
}
