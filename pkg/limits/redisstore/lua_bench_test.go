package redisstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// luaLoopTail replaces a script's tail: it decides ARGV[1] hits in a row on
// KEYS[1], one millisecond apart from a fixed instant, with the seven fields
// of ARGV[2..8], and returns the microseconds that took by the server's
// TIME. What it measures is the Lua (and the commands it calls) of one
// decision, without the script call, the network or the client.
//
// Two stand-in algorithms split a decision's cost: "nop" answers at once
// (what decide_run costs around any algorithm: reading the arguments,
// dispatch, the reply), "getset" only reads the key and writes it back as
// an algorithm would. With ARGV[2] = "fmt-d" or "fmt-g" the loop renders a
// microsecond instant with string.format instead, as a state write does.
const luaLoopTail = `
algorithms.nop = function() return true, 0, 0, 0, nil end
algorithms.getset = function(key)
  redis.call('GET', key)
  return true, 0, 0, 0, set_write(key, '123 456', 1000000)
end
local t0 = redis.call('TIME')
local formats = {['fmt-d'] = '%d', ['fmt-g'] = '%.17g'}
local f = formats[ARGV[2]]
for j = 1, tonumber(ARGV[1]) do
  if f then
    string.format(f, 1767225600000000 + j)
  else
    decide_run(0, 1, 1, 1767225600000000 + j * 1000, argv_hit)
  end
end
local t1 = redis.call('TIME')
return (t1[1] - t0[1]) * 1000000 + (t1[2] - t0[2])
`

// BenchmarkScriptCost measures the Lua of one allowed decision per
// algorithm inside Redis, as lua-ns/decision (ns/op is a loop of
// luaLoopDecisions of them), and the parts of one: the framework alone
// (nop), with a GET and a SET (getset), and rendering a number for a state
// string (fmt-d, fmt-g). It shows what bounds Redis's CPU per decision once
// merged calls share the script call and the syscalls.
func BenchmarkScriptCost(b *testing.B) {
	const luaLoopDecisions = 2000
	srv := redistest.Start(b)
	c := newClient(b, ClientOptions{URL: srv.URL(), Timeout: 10 * time.Second})
	src := newScript(luaLoopTail, algorithmLua[:]...).src
	ctx := context.Background()
	type part struct {
		name string
		args []any
	}
	var parts []part
	for _, alg := range implemented {
		l := benchLimit(alg)
		parts = append(parts, part{alg.String(), []any{alg.ShortName(), l.Requests, l.PeriodMicros(), l.Capacity(), 1, 0, 0}})
	}
	l := benchLimit(limits.FixedWindow)
	for _, name := range []string{"nop", "getset", "fmt-d", "fmt-g"} {
		parts = append(parts, part{name, []any{name, l.Requests, l.PeriodMicros(), l.Capacity(), 1, 0, 0}})
	}
	for _, p := range parts {
		b.Run(p.name, func(b *testing.B) {
			args := append([]any{luaLoopDecisions}, p.args...)
			key := "{lua}:" + strings.ReplaceAll(p.name, "_", "")
			var spent time.Duration
			for b.Loop() {
				us, err := c.Eval(ctx, src, []string{key}, args...).Int64()
				if err != nil {
					b.Fatal(err)
				}
				spent += time.Duration(us) * time.Microsecond
			}
			b.ReportMetric(float64(spent.Nanoseconds())/float64(b.N*luaLoopDecisions), "lua-ns/decision")
		})
	}
}
