package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
)

// Operators' mistakes the server serves through, saying so: files of the
// config directory it does not load, a config without a domain under
// -healthy-needs-config, a missing config path, a Redis that refuses the
// settings.

// grpcServing is what gRPC health says of the server at addr.
func grpcServing(t *testing.T, addr string) healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callBound)
	defer cancel()
	resp, err := healthpb.NewHealthClient(grpcDial(t, addr, insecure.NewCredentials())).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatalf("gRPC health: %v", err)
	}
	return resp.GetStatus()
}

// notLoadedWarnings are the warnings that name files not loaded.
func notLoadedWarnings(logs *observer.ObservedLogs) []observer.LoggedEntry {
	return logs.Filter(func(e observer.LoggedEntry) bool {
		return e.Level == zapcore.WarnLevel && strings.HasPrefix(e.Message, "not loaded from the config directory")
	}).All()
}

// A notes.txt and a team/ subdirectory in the config directory are served
// through and reported, at the start and at a reload alike: the start
// does not refuse what a reload took.
func TestNotLoadedReported(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("limits.yaml", serveLimits)
	write("notes.txt", "ask the edge team first\n")
	core, logs := observer.New(zapcore.InfoLevel)
	addr := serveDir(t, dir, zap.New(core))
	checkConfigInForce(t, addr, "1", "config: 1 domain")
	metric := func(n string) bool {
		_, body := httpDo(t, "GET", "http://"+addr+"/metrics", "")
		return strings.Contains(body, "\nrls_config_not_loaded_files "+n+"\n")
	}
	eventually(t, "rls_config_not_loaded_files 1", func() bool { return metric("1") })
	if w := notLoadedWarnings(logs); len(w) != 1 || !strings.Contains(fmt.Sprint(w[0].ContextMap()["not_loaded"]), "notes.txt") {
		t.Errorf("at the start: got warnings %v, want one naming notes.txt", w)
	}

	write("team/limits.yaml", "domain: team\ndescriptors: []\n")
	write("limits.yaml", serveLimits+"\n# edited\n")
	eventually(t, "rls_config_not_loaded_files 2 after the reload", func() bool { return metric("2") })
	w := notLoadedWarnings(logs)
	if len(w) != 2 {
		t.Fatalf("after the reload: got %d warnings, want 2", len(w))
	}
	if got := fmt.Sprint(w[1].ContextMap()["not_loaded"]); !strings.Contains(got, "notes.txt") || !strings.Contains(got, "team/") {
		t.Errorf("after the reload: got %v, want notes.txt and team/", got)
	}
	// And the next start serves the same directory.
	o, err := parseFlags([]string{"-config", dir}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	src, err := openSource(o, zap.NewNop(), nil)
	if err != nil {
		t.Fatalf("the next start: %v", err)
	}
	src.close()
}

// -healthy-needs-config (the drop-in's HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED)
// holds for files too: not serving while the directory has no limits,
// serving once it has.
func TestHealthyNeedsConfigFromFiles(t *testing.T) {
	dir := t.TempDir()
	grpcAddr, httpAddr := serveConfig(t, dir, zap.NewNop(), nil, "-allow-empty-config", "-healthy-needs-config")
	if code, _ := httpDo(t, "GET", "http://"+httpAddr+"/healthz", ""); code != 503 {
		t.Errorf("/healthz with no limits: got %d, want 503", code)
	}
	if got := grpcServing(t, grpcAddr); got != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("gRPC health with no limits: got %v, want NOT_SERVING", got)
	}
	if err := os.WriteFile(filepath.Join(dir, "limits.yaml"), []byte(serveLimits), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "healthy once the limits load", func() bool {
		code, _ := httpDo(t, "GET", "http://"+httpAddr+"/healthz", "")
		return code == 200 && grpcServing(t, grpcAddr) == healthpb.HealthCheckResponse_SERVING
	})
}

// A config path that does not exist names the setting that names it: the
// flag, its twin, or the drop-in's variable.
func TestMissingConfigNamesItsSetting(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nothing", "config")
	for _, tc := range []struct {
		args  []string
		vars  map[string]string
		names func(string) string
		want  string
	}{
		{[]string{"-config", missing}, nil, nil, missing + ": stat: no such file or directory: check -config"},
		{nil, map[string]string{"RLS_CONFIG": missing}, nil, missing + ": stat: no such file or directory: check RLS_CONFIG"},
		{nil, map[string]string{"RLS_CONFIG": missing}, func(f string) string {
			if f == "config" {
				return "RUNTIME_ROOT"
			}
			return ""
		}, missing + ": stat: no such file or directory: check RUNTIME_ROOT"},
	} {
		o, err := parseFlags(tc.args, env(tc.vars))
		if err != nil {
			t.Fatal(err)
		}
		o.NameSettings(tc.names)
		if _, err := openSource(o, zap.NewNop(), nil); err == nil || err.Error() != tc.want {
			t.Errorf("%v %v: got %v, want %q", tc.args, tc.vars, err, tc.want)
		}
	}
}

// A Redis that refuses the password is a configuration error: one line at
// the start naming the setting, /healthz 503 and gRPC health not serving
// until Redis takes it.
func TestRedisRefusesThePassword(t *testing.T) {
	srv := redistest.StartWith(t, redistest.Options{Password: "right"})
	core, logs := observer.New(zapcore.InfoLevel)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "limits.yaml"), []byte(serveLimits), 0o644); err != nil {
		t.Fatal(err)
	}
	grpcAddr, httpAddr := serveConfig(t, dir, zap.New(core), map[string]string{"RLS_REDIS_PASSWORD": "wrong"}, "-redis-url", srv.URL())
	refusedLines := func() []observer.LoggedEntry {
		return logs.Filter(func(e observer.LoggedEntry) bool {
			return e.Level == zapcore.ErrorLevel && strings.HasPrefix(e.Message, "Redis refuses the settings")
		}).All()
	}
	eventually(t, "the start's line", func() bool { return len(refusedLines()) > 0 })
	if lines := refusedLines(); len(lines) != 1 || lines[0].ContextMap()["check"] != "RLS_REDIS_PASSWORD" {
		t.Errorf("at the start: got %v, want one error line to check RLS_REDIS_PASSWORD", lines)
	}
	code, body := httpDo(t, "GET", "http://"+httpAddr+"/healthz", "")
	if code != 503 || !strings.Contains(body, "store: refused: a configuration error, not an outage: Redis refuses the credentials") || !strings.Contains(body, "check RLS_REDIS_PASSWORD") || strings.Contains(body, "wrong") {
		t.Errorf("/healthz: got %d %q, want 503 naming RLS_REDIS_PASSWORD, without the password", code, body)
	}
	eventually(t, "gRPC health not serving", func() bool { return grpcServing(t, grpcAddr) == healthpb.HealthCheckResponse_NOT_SERVING })
	eventually(t, "rls_store_refused 1", func() bool {
		_, body := httpDo(t, "GET", "http://"+httpAddr+"/metrics", "")
		return strings.Contains(body, "\nrls_store_refused 1\n")
	})

	// Redis takes any password once it asks for none: fixed.
	if _, err := srv.Do("CONFIG", "SET", "requirepass", ""); err != nil {
		t.Fatal(err)
	}
	eventually(t, "healthy once Redis takes the settings", func() bool {
		code, _ := httpDo(t, "GET", "http://"+httpAddr+"/healthz", "")
		return code == 200 && grpcServing(t, grpcAddr) == healthpb.HealthCheckResponse_SERVING
	})
}

// A sliding window on a calendar is served, and said at the load with the
// file, the line and the reason (config.Config.Warnings).
func TestCalendarSlidingLogged(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string]string{
		"limits.yaml":  serveLimits,
		"billing.yaml": "domain: billing\ndescriptors:\n  - key: plan\n    rate_limit: {unit: day, requests_per_unit: 2, calendar: true, algorithm: sliding_window}\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	core, logs := observer.New(zapcore.InfoLevel)
	addr := serveDir(t, dir, zap.New(core))
	checkConfigInForce(t, addr, "2", "config: 2 domains")
	w := logs.FilterMessage("the limits hold what loads but is most likely not meant").All()
	if len(w) != 1 || w[0].Level != zapcore.WarnLevel ||
		!strings.Contains(fmt.Sprint(w[0].ContextMap()["warnings"]), "billing.yaml:4: billing.plan: algorithm: sliding_window with calendar: true") {
		t.Errorf("got %v, want one warning naming billing.yaml:4", w)
	}
}
