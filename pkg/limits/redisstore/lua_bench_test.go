package redisstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
)

// luaLoopTail replaces a script's tail: it decides ARGV[1] hits in a row on
// KEYS[1], one millisecond apart from a fixed instant, with the seven fields
// of ARGV[2..8], and returns the microseconds that took by the server's
// TIME. What it measures is the Lua (and the commands it calls) of one
// decision, without the script call, the network or the client.
const luaLoopTail = `
local t0 = redis.call('TIME')
for j = 1, tonumber(ARGV[1]) do
  decide_run(0, 1, 1, 1767225600000000 + j * 1000)
end
local t1 = redis.call('TIME')
return (t1[1] - t0[1]) * 1000000 + (t1[2] - t0[2])
`

// BenchmarkScriptCost measures the Lua of one allowed decision per
// algorithm inside Redis, as lua-ns/decision; ns/op is a loop of
// luaLoopDecisions of them. It shows what bounds Redis's CPU per decision
// once merged calls share the script call and the syscalls.
func BenchmarkScriptCost(b *testing.B) {
	const luaLoopDecisions = 2000
	srv := redistest.Start(b)
	c := newClient(b, ClientOptions{URL: srv.URL(), Timeout: 10 * time.Second})
	src := newScript(luaLoopTail, algorithmLua[:]...).src
	ctx := context.Background()
	for _, alg := range implemented {
		b.Run(alg.String(), func(b *testing.B) {
			l := benchLimit(alg)
			args := []any{luaLoopDecisions, alg.ShortName(), l.Requests, l.PeriodMicros(), l.Capacity(), 1, 0, 0}
			key := "{lua}:" + strings.ReplaceAll(alg.String(), "_", "")
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
