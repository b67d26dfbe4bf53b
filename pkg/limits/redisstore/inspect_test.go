package redisstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// inspectingStore returns a store on o that inspects Redis at every
// Ping, and the lines it logs.
func inspectingStore(t *testing.T, o ClientOptions) (*Store, *observer.ObservedLogs) {
	t.Helper()
	o.Timeout = testTimeout
	core, logs := observer.New(zapcore.InfoLevel)
	s := New(newClient(t, o), Options{KeyPrefix: "rls:", ResetChannel: "rls:resets", RLQS: true, Logger: zap.New(core)})
	s.inspect.Every = 0
	t.Cleanup(s.Close)
	return s, logs
}

// asUser is the client options of srv as user, password pass (none: the
// default user).
func asUser(srv *redistest.Server, user string) ClientOptions {
	o := ClientOptions{URL: srv.URL()}
	if user != "" {
		o.Username, o.Password = user, "pass"
	}
	return o
}

// logged is the messages of logs that contain part, each with its
// fields.
func logged(logs *observer.ObservedLogs, part string) []string {
	var out []string
	for _, e := range logs.All() {
		if strings.Contains(e.Message, part) {
			out = append(out, fmt.Sprint(e.Message, e.ContextMap()))
		}
	}
	return out
}

// do sends each command to srv, failing the test on an error.
func do(t *testing.T, srv *redistest.Server, cmds ...[]string) {
	t.Helper()
	for _, c := range cmds {
		if _, err := srv.Do(c...); err != nil {
			t.Fatalf("%v: %v", c, err)
		}
	}
}

// docsRule is the ACL rule of docs/operations.md (What Redis must be),
// its arguments unquoted, with the test's password: the test checks that
// the rule the docs give is all the store needs.
func docsRule(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	const start = "redis-cli ACL SETUSER envoy-rls "
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, start); ok {
			rule := strings.Fields(strings.ReplaceAll(rest, "'", ""))
			for i, f := range rule {
				if strings.HasPrefix(f, ">") {
					rule[i] = ">pass"
				}
			}
			return rule
		}
	}
	t.Fatalf("docs/operations.md has no line %q", start)
	return nil
}

// TestPermissionsMissing: a Redis user without a command, the keys or the
// reset channel the store sends is found at the first Ping, a
// *RefusedError that names the ACL rules to add in one line, where Ping
// said nothing and every call took the failure mode; the rule the docs
// give is enough, for the probe and for decisions.
func TestPermissionsMissing(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		acl  []string
		want []string // the rules named; none: Ping is nil
	}{
		{"the docs' rule", docsRule(t), nil},
		{"no BITFIELD, ZADD, PEXPIRE", []string{"on", ">pass", "~rls:*", "&rls:resets", "+@all", "-bitfield", "-zadd", "-pexpire"}, []string{"+bitfield", "+zadd", "+pexpire"}},
		{"no TIME", []string{"on", ">pass", "~rls:*", "&rls:resets", "+@all", "-time"}, []string{"+time"}},
		{"no keys", []string{"on", ">pass", "&rls:resets", "+@all"}, []string{"~rls:*"}},
		{"other keys", []string{"on", ">pass", "~other:*", "&rls:resets", "+@all"}, []string{"~rls:*"}},
		{"no channel", []string{"on", ">pass", "~rls:*", "resetchannels", "+@all"}, []string{"&rls:resets"}},
		{"no hashes for RLQS", []string{"on", ">pass", "~rls:*", "&rls:resets", "+@all", "-hset"}, []string{"+hset"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			user := strings.NewReplacer(" ", "-", ",", "").Replace(tc.name)
			do(t, srv, append([]string{"ACL", "SETUSER", user, "reset"}, tc.acl...))
			s, _ := inspectingStore(t, asUser(srv, user))
			err := s.Ping(ctx)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Ping: %v, want nil", err)
				}
				if r := decideOne(t, s, limits.Hit{Key: "rls:" + user, Limit: hourly(limits.SlidingLog, 3), Cost: 1}); r.Err != nil || !r.Allowed {
					t.Errorf("a hit with the docs' rule: %+v", r)
				}
				return
			}
			var re *RefusedError
			if !errors.As(err, &re) || re.Setting != Permissions {
				t.Fatalf("Ping: %v, want a refusal of the permissions", err)
			}
			msg := err.Error()
			for _, rule := range tc.want {
				if !strings.Contains(msg, rule) {
					t.Errorf("Ping: %q does not name %s", msg, rule)
				}
			}
			if !strings.Contains(msg, "ACL SETUSER "+user) || strings.Contains(msg, "\n") {
				t.Errorf("Ping: %q, want one line with the ACL SETUSER to run", msg)
			}
			if got := len(s.Inspection().Missing); got != len(tc.want) {
				t.Errorf("Inspection().Missing: %v, want %v", s.Inspection().Missing, tc.want)
			}
		})
	}
}

// TestSubscribeRefusedLogged: a SUBSCRIBE that Redis refuses is logged,
// where go-redis waited on it silently.
func TestSubscribeRefusedLogged(t *testing.T) {
	srv := redistest.Start(t)
	do(t, srv, []string{"ACL", "SETUSER", "nosub", "on", ">pass", "~rls:*", "&rls:resets", "+@all", "-subscribe"})
	s, logs := inspectingStore(t, asUser(srv, "nosub"))
	s.HearResets(nil)
	deadline := time.Now().Add(5 * time.Second)
	for len(logged(logs, "subscription to the reset channel")) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no line says the refused SUBSCRIBE; logged: %v", logs.All())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestEvictionPolicy: a maxmemory-policy that can evict the service's keys
// (allkeys-*, and volatile-*, since every key the service writes has a
// TTL) is said in a warning that names it and the safe setting, each
// policy once; the keys Redis evicts are counted and said; noeviction
// with a full memory makes Ping a *MemoryFullError, degraded.
func TestEvictionPolicy(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	s, logs := inspectingStore(t, asUser(srv, ""))
	if err := s.Ping(ctx); err != nil || s.Inspection().Evicts() {
		t.Fatalf("Ping on a Redis without maxmemory: %v, %+v", err, s.Inspection())
	}
	for _, policy := range []string{"allkeys-lru", "volatile-lru"} {
		do(t, srv, []string{"CONFIG", "SET", "maxmemory", "100mb"}, []string{"CONFIG", "SET", "maxmemory-policy", policy})
		for range 2 {
			if err := s.Ping(ctx); err != nil {
				t.Fatalf("Ping under %s: %v", policy, err)
			}
		}
		if in := s.Inspection(); !in.Evicts() || in.Policy != policy {
			t.Errorf("Inspection under %s: %+v, want it to evict", policy, in)
		}
		said := logged(logs, "may evict the service's keys")
		if len(said) == 0 || !strings.Contains(said[len(said)-1], "maxmemory-policy:"+policy) || !strings.Contains(said[len(said)-1], "noeviction") {
			t.Errorf("under %s: logged %q, want a line that names the policy and noeviction", policy, said)
		}
	}
	if n := len(logged(logs, "may evict the service's keys")); n != 2 {
		t.Errorf("%d warnings of the policy, want one per policy", n)
	}
	// A flood of keys that all have a TTL, then memory runs out.
	for i := range 200 {
		r := decideOne(t, s, limits.Hit{Key: fmt.Sprintf("rls:flood:%d", i), Limit: hourly(limits.FixedWindow, 10), Cost: 1})
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	do(t, srv, []string{"CONFIG", "SET", "maxmemory", "1"})
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	if in := s.Inspection(); in.Evicted == 0 {
		t.Errorf("Inspection after the flood: %+v, want keys evicted", in)
	}
	if said := logged(logs, "Redis evicted keys"); len(said) != 1 {
		t.Errorf("logged %q, want one line of keys evicted", said)
	}
	// noeviction, and memory full.
	do(t, srv, []string{"CONFIG", "SET", "maxmemory-policy", "noeviction"})
	err := s.Ping(ctx)
	var full *MemoryFullError
	if !errors.As(err, &full) || !full.Degraded() || !s.Inspection().Full() {
		t.Fatalf("Ping with memory full under noeviction: %v, want a *MemoryFullError", err)
	}
	if len(logged(logs, "out of memory")) != 1 {
		t.Errorf("no line says that memory is full: %v", logs.All())
	}
	do(t, srv, []string{"CONFIG", "SET", "maxmemory", "0"})
	if err := s.Ping(ctx); err != nil || s.Inspection().Evicts() {
		t.Errorf("Ping once memory is back: %v, %+v", err, s.Inspection())
	}
}

// TestStateLost: a Redis that lost its data (FLUSHALL, a restart without
// persistence) is noticed at the next inspection, by every store that
// shares it, counted once each and said once each with what was lost,
// where nothing said it.
func TestStateLost(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	a, logsA := inspectingStore(t, asUser(srv, ""))
	b, logsB := inspectingStore(t, asUser(srv, ""))
	ping := func(s *Store) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			err := s.Ping(ctx)
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("Ping: %v", err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	ping(a)
	ping(b)
	for i := range 5 {
		decideOne(t, a, limits.Hit{Key: fmt.Sprintf("rls:month:%d", i), Limit: hourly(limits.FixedWindow, 10), Cost: 1})
	}
	ping(a)
	ping(b)
	if a.Inspection().Lost+b.Inspection().Lost != 0 {
		t.Fatalf("lost before anything was: %d, %d", a.Inspection().Lost, b.Inspection().Lost)
	}
	do(t, srv, []string{"FLUSHALL"})
	ping(a) // writes the marker again: b finds a's token
	ping(b)
	ping(a)
	ping(b)
	for _, s := range []*Store{a, b} {
		if got := s.Inspection().Lost; got != 1 {
			t.Errorf("after FLUSHALL: lost %d, want 1", got)
		}
	}
	said := logged(logsA, "lost the service's state")
	if len(said) != 1 || !strings.Contains(said[0], "keys_before:") || len(logged(logsB, "lost the service's state")) != 1 {
		t.Errorf("logged %q and %q, want one line each that says what was lost", said, logged(logsB, "lost the service's state"))
	}
	srv.Restart()
	ping(a)
	if got := a.Inspection().Lost; got != 2 {
		t.Errorf("after a restart without persistence: lost %d, want 2", got)
	}
	if said := logged(logsA, "lost the service's state"); len(said) != 2 || !strings.Contains(said[1], "restarted:true") {
		t.Errorf("logged %q, want a second line that says Redis restarted", said)
	}
}

// TestInspectCluster: on a Redis Cluster, INFO is read from every master
// (a policy that evicts on one of them is said) and each master has a
// marker of its own, so that a master that alone lost its data is found,
// and named.
func TestInspectCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	ctx := context.Background()
	s, logs := inspectingStore(t, ClientOptions{Cluster: cl.Addrs()})
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	if n := len(s.inspect.Markers()); n != 3 {
		t.Errorf("%d markers (%v), want one per master", n, s.inspect.Markers())
	}
	node := cl.Nodes[1]
	do(t, node, []string{"CONFIG", "SET", "maxmemory", "100mb"}, []string{"CONFIG", "SET", "maxmemory-policy", "volatile-lfu"})
	if err := s.Ping(ctx); err != nil || !s.Inspection().Evicts() || s.Inspection().Policy != "volatile-lfu" {
		t.Errorf("one master evicts: Ping %v, %+v", err, s.Inspection())
	}
	do(t, node, []string{"FLUSHALL"})
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	said := logged(logs, "lost the service's state")
	if s.Inspection().Lost != 1 || len(said) != 1 || !strings.Contains(said[0], node.Addr()) {
		t.Errorf("one master flushed: lost %d, logged %q, want one line naming %s", s.Inspection().Lost, said, node.Addr())
	}
}

// TestPermissionsOfTheLimitsInForce: the probe checks what the limits in
// force use (Options.Needs): a user without the sorted set commands is
// enough for windows, and found short once a sliding log is in force; a
// user without SET only turns the lost-data check off, said once.
func TestPermissionsOfTheLimitsInForce(t *testing.T) {
	srv := redistest.Start(t)
	do(t, srv, []string{"ACL", "SETUSER", "windows", "on", ">pass", "~rls:*", "&rls:resets", "+@all", "-zadd", "-set"})
	s, logs := inspectingStore(t, asUser(srv, "windows"))
	inForce := []limits.Limit{hourly(limits.FixedWindow, 10)}
	s.needs = func() Needs { return NeedsOf(inForce...) }
	ctx := context.Background()
	for range 2 {
		if err := s.Ping(ctx); err != nil {
			t.Fatalf("Ping with windows in force: %v", err)
		}
	}
	if said := logged(logs, "refuses the marker key"); len(said) != 1 {
		t.Errorf("logged %q, want one line that the lost-data check is off", said)
	}
	inForce = append(inForce, hourly(limits.SlidingLog, 10))
	if err := s.Ping(ctx); err == nil || !strings.Contains(err.Error(), "+zadd") || strings.Contains(err.Error(), "+set") {
		t.Errorf("Ping with a sliding log in force: %v, want +zadd named, and not +set", err)
	}
}

// TestInfoRefused: a Redis that refuses INFO (a managed Redis may) is
// said once, and nothing else: Ping is not failed for it, and data lost
// is still seen by the marker.
func TestInfoRefused(t *testing.T) {
	srv := redistest.Start(t)
	do(t, srv, []string{"ACL", "SETUSER", "noinfo", "on", ">pass", "~rls:*", "&rls:resets", "+@all", "-info"})
	s, logs := inspectingStore(t, asUser(srv, "noinfo"))
	ctx := context.Background()
	for range 2 {
		if err := s.Ping(ctx); err != nil {
			t.Fatalf("Ping without INFO: %v", err)
		}
	}
	if said := logged(logs, "refuses INFO"); len(said) != 1 {
		t.Errorf("logged %q, want one line", said)
	}
	do(t, srv, []string{"FLUSHALL"})
	if err := s.Ping(ctx); err != nil || s.Inspection().Lost != 1 {
		t.Errorf("after FLUSHALL without INFO: %v, lost %d, want 1", err, s.Inspection().Lost)
	}
}
