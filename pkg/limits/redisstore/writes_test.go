package redisstore

import (
	"strings"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// writeAlgorithms are the algorithms whose hits write, each with a limit
// that allows the hit: every kind of key the store writes.
var writeAlgorithms = []limits.Limit{
	hourly(limits.FixedWindow, 10),
	hourly(limits.SlidingWindow, 10),
	hourly(limits.TokenBucket, 10),
	hourly(limits.SlidingLog, 10),
	{Algorithm: limits.Concurrency, Requests: 10, Period: time.Minute},
	{Algorithm: limits.SlidingLog, Requests: 10, Period: time.Hour, BlockFor: time.Minute},
}

// TestRefusedWriteFailsTheHit: a write Redis refuses (out of memory under
// noeviction, a user without ZADD, a user without PEXPIRE) fails the hit,
// of every algorithm, a charge and a refund alike, where it used to pass
// a sliding log's or a concurrency limit's charge as allowed with the
// whole limit remaining (its ZADD's error unread, the ZCARD after it
// answering) and leave keys without a TTL, silently.
func TestRefusedWriteFailsTheHit(t *testing.T) {
	srv := redistest.Start(t)
	do(t, srv,
		[]string{"ACL", "SETUSER", "nozadd", "on", ">pass", "~*", "&*", "+@all", "-zadd"},
		[]string{"ACL", "SETUSER", "nopexpire", "on", ">pass", "~*", "&*", "+@all", "-pexpire"})
	for _, tc := range []struct {
		name  string
		user  string
		setUp []string // a command on the server before the hits
		undo  []string
		// refunds: a window's and a bucket's refunds, which send PEXPIRE,
		// are refused too.
		refunds bool
		// fails tells the algorithms whose charge the case fails.
		fails func(limits.Limit) bool
		want  string
	}{
		{
			name: "out of memory", setUp: []string{"CONFIG", "SET", "maxmemory", "1"}, undo: []string{"CONFIG", "SET", "maxmemory", "0"},
			fails: func(limits.Limit) bool { return true }, want: "OOM",
		},
		{
			name: "no ZADD", user: "nozadd",
			fails: func(l limits.Limit) bool {
				return l.Algorithm == limits.SlidingLog || l.Algorithm == limits.Concurrency
			},
			want: "NOPERM",
		},
		{
			name: "no PEXPIRE", user: "nopexpire", refunds: true,
			fails: func(limits.Limit) bool { return true }, want: "NOPERM",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			do(t, srv, []string{"CONFIG", "SET", "maxmemory-policy", "noeviction"})
			o := ClientOptions{URL: srv.URL(), Timeout: testTimeout}
			if tc.user != "" {
				o.Username, o.Password = tc.user, "pass"
			}
			s := New(newClient(t, o), fixedClock(time.Now().UnixMicro()))
			t.Cleanup(s.Close)
			if tc.setUp != nil {
				do(t, srv, tc.setUp)
				t.Cleanup(func() { _, _ = srv.Do(tc.undo...) })
			}
			for i, l := range writeAlgorithms {
				key := "rls:" + tc.name + ":" + l.String() + ":" + string(rune('a'+i))
				r := decideOne(t, s, limits.Hit{Key: key, Limit: l, Cost: 1})
				switch {
				case !tc.fails(l) && r.Err != nil:
					t.Errorf("%s: a charge: %v, want it decided", l, r.Err)
				case tc.fails(l) && r.Err == nil:
					t.Errorf("%s: a charge: %+v, want it failed: Redis refused a write of it", l, r)
				case tc.fails(l) && !strings.Contains(r.Err.Error(), tc.want):
					t.Errorf("%s: a charge: %v, want an error that says %s", l, r.Err, tc.want)
				}
				if !tc.refunds || !isWindow(l.Algorithm) && !isBucket(l.Algorithm) {
					continue // a log's and a slot's refunds pop: no PEXPIRE
				}
				if r := decideOne(t, s, limits.Hit{Key: key, Limit: l, Cost: -1}); r.Err == nil {
					t.Errorf("%s: a refund: %+v, want it failed: Redis refused its PEXPIRE", l, r)
				}
			}
		})
	}
}
