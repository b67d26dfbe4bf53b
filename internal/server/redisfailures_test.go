package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
)

// logLimits is a sliding log limit: its hits write with ZADD.
const logLimits = `
domain: test
descriptors:
  - key: k
    rate_limit: {name: log, algorithm: sliding_log, unit: hour, requests_per_unit: 5}
`

// serveOnRedis serves logLimits on srv with -failure-mode deny, as user
// (RLS_REDIS_PASSWORD pass), and returns the HTTP address and the log.
func serveOnRedis(t *testing.T, srv *redistest.Server, user string) (string, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zapcore.InfoLevel)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "limits.yaml"), []byte(logLimits), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"-redis-url", srv.URL(), "-failure-mode", "deny"}
	vars := map[string]string{}
	if user != "" {
		args = append(args, "-redis-username", user)
		vars["RLS_REDIS_PASSWORD"] = "pass"
	}
	_, httpAddr := serveConfig(t, dir, zap.New(core), vars, args...)
	return httpAddr, logs
}

// hasMetric reports whether /metrics has the line.
func hasMetric(t *testing.T, httpAddr, line string) bool {
	_, body := httpDo(t, "GET", "http://"+httpAddr+"/metrics", "")
	return strings.Contains(body, "\n"+line+"\n")
}

// TestRedisLacksPermissions: a user without ZADD is found at the start,
// not by the first request: /healthz 503 naming the rule to add, the
// metrics, one line; and a sliding log's hit, whose ZADD Redis refuses,
// takes failure mode deny (429), where it was allowed with the whole
// limit remaining.
func TestRedisLacksPermissions(t *testing.T) {
	srv := redistest.Start(t)
	if _, err := srv.Do("ACL", "SETUSER", "nozadd", "on", ">pass", "~rls:*", "&rls:resets", "+@all", "-zadd"); err != nil {
		t.Fatal(err)
	}
	httpAddr, logs := serveOnRedis(t, srv, "nozadd")
	code, body := httpDo(t, "GET", "http://"+httpAddr+"/healthz", "")
	if code != 503 || !strings.Contains(body, "store: refused:") || !strings.Contains(body, "ACL SETUSER nozadd +zadd") {
		t.Errorf("/healthz: %d %q, want 503 naming the rule to add", code, body)
	}
	eventually(t, "the metrics", func() bool {
		return hasMetric(t, httpAddr, "rls_store_permissions_missing 1") && hasMetric(t, httpAddr, "rls_store_refused 1")
	})
	eventually(t, "one line", func() bool {
		return logs.FilterMessageSnippet("Redis refuses the settings").Len() == 1
	})
	code, body = httpDo(t, "POST", "http://"+httpAddr+"/json", jsonRequest("a", ""))
	if code != 429 {
		t.Errorf("POST /json, its ZADD refused, failure mode deny: %d %s, want 429", code, body)
	}
}

// TestRedisOutOfMemory: a noeviction Redis whose memory is full is said
// in /healthz (degraded, 200) and a metric; a policy that evicts is
// warned of and exported.
func TestRedisOutOfMemory(t *testing.T) {
	srv := redistest.Start(t)
	for _, c := range [][]string{{"CONFIG", "SET", "maxmemory-policy", "allkeys-lru"}, {"CONFIG", "SET", "maxmemory", "100mb"}} {
		if _, err := srv.Do(c...); err != nil {
			t.Fatal(err)
		}
	}
	httpAddr, logs := serveOnRedis(t, srv, "")
	eventually(t, "the policy's warning and metric", func() bool {
		return logs.FilterMessageSnippet("may evict the service's keys").Len() == 1 && hasMetric(t, httpAddr, "rls_store_redis_evicts 1")
	})
	for _, c := range [][]string{{"CONFIG", "SET", "maxmemory-policy", "noeviction"}, {"CONFIG", "SET", "maxmemory", "1"}} {
		if _, err := srv.Do(c...); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "/healthz says memory is full", func() bool {
		code, body := httpDo(t, "GET", "http://"+httpAddr+"/healthz", "")
		return code == 200 && strings.Contains(body, "store: degraded: redisstore: Redis is out of memory")
	})
	eventually(t, "rls_store_redis_memory_full 1", func() bool { return hasMetric(t, httpAddr, "rls_store_redis_memory_full 1") })
	code, body := httpDo(t, "POST", "http://"+httpAddr+"/json", jsonRequest("a", ""))
	if code != 429 {
		t.Errorf("POST /json, out of memory, failure mode deny: %d %s, want 429", code, body)
	}
	if _, err := srv.Do("CONFIG", "SET", "maxmemory", "0"); err != nil {
		t.Fatal(err)
	}
}

// TestRedisLostItsData: a FLUSHALL while no traffic flows is noticed by
// the health check, counted and said once.
func TestRedisLostItsData(t *testing.T) {
	srv := redistest.Start(t)
	httpAddr, logs := serveOnRedis(t, srv, "")
	httpDo(t, "POST", "http://"+httpAddr+"/json", jsonRequest("a", ""))
	eventually(t, "the marker written", func() bool {
		v, err := srv.Do("GET", "rls:{marker}")
		return err == nil && v != "(nil)"
	})
	if _, err := srv.Do("FLUSHALL"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the loss counted and said", func() bool {
		return hasMetric(t, httpAddr, "rls_store_state_lost_total 1") && logs.FilterMessageSnippet("Redis lost the service's state").Len() == 1
	})
}
