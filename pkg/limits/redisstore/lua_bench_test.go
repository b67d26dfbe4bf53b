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
// KEYS[1], one millisecond apart from a fixed instant, with the eight fields
// of ARGV[2..9], and returns the microseconds that took by the server's
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
// algorithm that has one (the windows' serve joint runs) inside Redis, as lua-ns/decision (ns/op is a loop of
// luaLoopDecisions of them), and the parts of one: the framework alone
// (nop), with a GET and a SET (getset), and rendering a number for a state
// string (fmt-d, fmt-g). It shows what bounds Redis's CPU per decision once
// merged calls share the script call and the syscalls.
func BenchmarkScriptCost(b *testing.B) {
	const luaLoopDecisions = 2000
	srv := redistest.Start(b)
	c := newClient(b, ClientOptions{URL: srv.URL(), Timeout: 10 * time.Second})
	src := newScript(luaLoopTail, fixedWindowLua, slidingWindowLua, slidingLogLua).src
	ctx := context.Background()
	type part struct {
		name string
		args []any
	}
	var parts []part
	for _, alg := range []limits.Algorithm{limits.FixedWindow, limits.SlidingWindow, limits.SlidingLog} {
		l := benchLimit(alg)
		parts = append(parts, part{alg.String(), []any{alg.ShortName(), l.Requests, l.PeriodMicros(), l.Capacity(), 1, 0, 0, ""}})
	}
	l := benchLimit(limits.FixedWindow)
	for _, name := range []string{"nop", "getset", "fmt-d", "fmt-g"} {
		parts = append(parts, part{name, []any{name, l.Requests, l.PeriodMicros(), l.Capacity(), 1, 0, 0, ""}})
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

// expireRaceTail writes KEYS[1] ARGV[2] times, each time with a TTL of 1 µs
// the way ARGV[1] says, and returns how many times the key was gone right
// after: "pexpire" is SET then PEXPIRE 1 (ms), "set-px" SET ... PX 1, and
// "ttl_ms" SET then PEXPIRE ttl_ms(1), the TTL every script uses.
const expireRaceTail = `
local lost = 0
for j = 1, tonumber(ARGV[2]) do
  redis.call('SET', KEYS[1], 'v')
  if ARGV[1] == 'pexpire' then
    redis.call('PEXPIRE', KEYS[1], 1)
  elseif ARGV[1] == 'set-px' then
    redis.call('SET', KEYS[1], 'v', 'PX', 1)
  else
    redis.call('PEXPIRE', KEYS[1], ttl_ms(1))
  end
  if redis.call('EXISTS', KEYS[1]) == 0 then
    lost = lost + 1
  end
end
return lost
`

// BenchmarkExpireRace counts, as lost/200k-writes, the keys Redis deletes
// as they are written: PEXPIRE (and RESTORE ... ABSTTL) delete a key whose
// expiry is due by the time the command checks it, which a 1 ms TTL is
// whenever a millisecond ends between the command's two clock reads. It is
// why ttl_ms never gives less than 2 ms (prelude.lua); its row should stay
// at 0 short of Redis stalling a whole millisecond inside one command.
func BenchmarkExpireRace(b *testing.B) {
	const writes = 20000
	srv := redistest.Start(b)
	c := newClient(b, ClientOptions{URL: srv.URL(), Timeout: 10 * time.Second})
	src := newScript(expireRaceTail).src
	for _, how := range []string{"pexpire", "set-px", "ttl_ms"} {
		b.Run(how, func(b *testing.B) {
			var lost int64
			for b.Loop() {
				n, err := c.Eval(context.Background(), src, []string{"{race}:" + how}, how, writes).Int64()
				if err != nil {
					b.Fatal(err)
				}
				lost += n
			}
			b.ReportMetric(float64(lost)*200000/float64(b.N*writes), "lost/200k-writes")
		})
	}
}
