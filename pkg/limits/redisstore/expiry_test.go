package redisstore

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// callsDuring is how many times Redis ran the command name while f ran.
func callsDuring(t *testing.T, c redis.UniversalClient, name string, f func()) int {
	t.Helper()
	before := cmdCalls(t, c, name)
	f()
	return cmdCalls(t, c, name) - before
}

// cmdCalls is how many times Redis has run the command name.
func cmdCalls(t *testing.T, c redis.UniversalClient, name string) int {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\r\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_"+name+":calls="); ok {
			n, err := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	return 0
}

// A window counter gets its PEXPIRE with an instance's first hit on it and
// not with the next ones; a counter that Redis lost (deleted here, as a
// restart without data or a give-back to zero leaves it) gets it again
// from the hit that creates it anew, and after an error the instance sends
// it again with its next hit. Every counter left has a TTL.
func TestWindowExpirySentOnce(t *testing.T) {
	s, c, _ := setup(t, Options{})
	defer s.Close()
	ctx := context.Background()
	for _, alg := range []limits.Algorithm{limits.FixedWindow, limits.SlidingWindow} {
		t.Run(alg.String(), func(t *testing.T) {
			l := hourly(alg, 1000)
			key := "expiry:" + alg.String()
			hit := func() {
				t.Helper()
				res := make([]limits.Result, 1)
				s.Decide(ctx, []limits.Hit{{Key: key, Limit: l, Cost: 1}}, res)
				s.settle() // a PEXPIRE that goes after the answer
				if res[0].Err != nil || !res[0].Allowed {
					t.Fatalf("hit: %+v", res[0])
				}
			}
			ttlSet := func(what string) {
				t.Helper()
				keys, err := c.Keys(ctx, key+"#*").Result()
				if err != nil || len(keys) == 0 {
					t.Fatalf("%s: counters %v, %v", what, keys, err)
				}
				for _, k := range keys {
					if ttl, err := c.PTTL(ctx, k).Result(); err != nil || ttl <= 0 {
						t.Errorf("%s: %s has TTL %v, %v; want one set", what, k, ttl, err)
					}
				}
			}
			sent := func(what string, want int, f func()) {
				t.Helper()
				if got := callsDuring(t, c, "pexpire", f); got != want {
					t.Errorf("%s: %d PEXPIREs, want %d", what, got, want)
				}
				ttlSet(what)
			}
			sent("first hit", 1, hit)
			sent("next hits", 0, func() { hit(); hit(); hit() })

			// Redis lost the counter: the hit that creates it again finds
			// no count and sends the PEXPIRE after it.
			keys, _ := c.Keys(ctx, key+"#*").Result()
			if err := c.Del(ctx, keys...).Err(); err != nil {
				t.Fatal(err)
			}
			sent("counter created again", 1, hit)
			sent("then", 0, hit)

			// An error forgets what was seen.
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			res := make([]limits.Result, 1)
			s.Decide(cctx, []limits.Hit{{Key: key, Limit: l, Cost: 1}}, res)
			if res[0].Err == nil {
				t.Fatalf("a call whose context ended: %+v, want an error", res[0])
			}
			sent("after an error", 1, hit)
		})
	}
}

// The table itself: a slot holds the last hash stored there, and forget
// makes every entry stale.
func TestExpirySeen(t *testing.T) {
	e := newExpirySeen()
	a, b := e.hash("a@1"), e.hash("b@1")
	if a == b {
		t.Fatalf("hashes %x, %x", a, b)
	}
	if e.has(a) {
		t.Error("empty table has a")
	}
	e.add(a)
	if !e.has(a) || e.has(b) {
		t.Errorf("after add(a): has(a) %v, has(b) %v", e.has(a), e.has(b))
	}
	clash := a + expirySlots // the same slot, another counter
	e.add(clash)
	if e.has(a) || !e.has(clash) {
		t.Errorf("after a clash: has(a) %v, has(clash) %v", e.has(a), e.has(clash))
	}
	e.forget()
	if e.has(clash) {
		t.Error("forget left an entry")
	}
}
