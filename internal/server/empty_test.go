package server

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/envoy-rls/envoy-rls/internal/xds/xdstest"
)

// emptyWarnings counts the warnings that the config in force is empty.
func emptyWarnings(logs *observer.ObservedLogs) int {
	return logs.Filter(func(e observer.LoggedEntry) bool {
		return e.Level == zapcore.WarnLevel && strings.Contains(e.Message, "config in force is empty")
	}).Len()
}

// checkConfigInForce fails the test unless, within reloadBound, the
// server at httpAddr reports domains domains in its metrics and health
// says healthLine, with a 200.
func checkConfigInForce(t *testing.T, httpAddr string, domains, healthLine string) {
	t.Helper()
	eventually(t, "rls_config_domains "+domains, func() bool {
		_, body := httpDo(t, "GET", "http://"+httpAddr+"/metrics", "")
		return strings.Contains(body, "\nrls_config_domains "+domains+"\n")
	})
	if code, body := httpDo(t, "GET", "http://"+httpAddr+"/healthz", ""); code != 200 || !strings.Contains(body, healthLine+"\n") {
		t.Errorf("/healthz with %s domains: got %d %q, want 200 saying %q", domains, code, body, healthLine)
	}
}

// serveDir runs the server on the config in dir, logging to log, until
// the test ends, and returns its HTTP address.
func serveDir(t *testing.T, dir string, log *zap.Logger, args ...string) string {
	t.Helper()
	_, httpAddr := serveConfig(t, dir, log, nil, args...)
	return httpAddr
}

// serveConfig is serveDir with the environment env, returning the gRPC
// address too.
func serveConfig(t *testing.T, dir string, log *zap.Logger, vars map[string]string, args ...string) (grpcAddr, httpAddr string) {
	t.Helper()
	o, err := parseFlags(append([]string{"-config", dir, "-grpc-addr", "127.0.0.1:0", "-http-addr", "127.0.0.1:0",
		"-debug-addr", "", "-shutdown-timeout", "5s"}, args...), env(vars))
	if err != nil {
		t.Fatal(err)
	}
	src, err := openSource(o, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	ls, err := listen(o, log)
	if err != nil {
		src.close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	serveLoggingUntilCleanup(t, ctx, cancel, o, src, ls, log)
	return ls.grpc.Addr().String(), ls.http.Addr().String()
}

// TestEmptiedConfigDirIsLoud: a config directory emptied under
// -allow-empty-config (the drop-in's) still lifts every limit, but says
// so: a warning, rls_config_domains 0 and a line of /healthz; limits that
// come back are reported again.
func TestEmptiedConfigDirIsLoud(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "limits.yaml")
	if err := os.WriteFile(file, []byte(serveLimits), 0o644); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.InfoLevel)
	addr := serveDir(t, dir, zap.New(core), "-allow-empty-config")

	checkConfigInForce(t, addr, "1", "config: 1 domain")
	if n := emptyWarnings(logs); n != 0 {
		t.Errorf("with limits: %d warnings of an empty config, want none", n)
	}
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	checkConfigInForce(t, addr, "0", "config: empty: no limits, every request is allowed")
	if n := emptyWarnings(logs); n != 1 {
		t.Errorf("emptied: %d warnings of an empty config, want 1", n)
	}
	if err := os.WriteFile(file, []byte(serveLimits), 0o644); err != nil {
		t.Fatal(err)
	}
	checkConfigInForce(t, addr, "1", "config: 1 domain")
}

// TestEmptyXDSSnapshotIsLoud: an empty snapshot lifts every limit, and
// says so as an emptied directory does; -xds-healthy-needs-config (its
// own test) turns health to not serving as well.
func TestEmptyXDSSnapshotIsLoud(t *testing.T) {
	m := newXDSMTLS(t)
	srv := xdstest.Start(t, xdstest.Options{TLS: m.serverTLS(t), Down: true})
	core, logs := observer.New(zapcore.InfoLevel)
	s := startXDSServerLogging(t, zap.New(core), append(m.flags(srv), "-xds-force-start")...)
	if code, body := httpDo(t, "GET", "http://"+s.httpAddr+"/healthz", ""); code != 200 || !strings.Contains(body, "config: none yet\n") {
		t.Errorf("/healthz before the first snapshot: got %d %q, want 200 saying config: none yet", code, body)
	}
	srv.Set(t, xdsNode, "1", hourly("k", 1))
	srv.Up()

	checkConfigInForce(t, s.httpAddr, "1", "config: 1 domain")
	srv.Set(t, xdsNode, "2")
	checkConfigInForce(t, s.httpAddr, "0", "config: empty: no limits, every request is allowed")
	if n := emptyWarnings(logs); n != 1 {
		t.Errorf("an empty snapshot: %d warnings of an empty config, want 1", n)
	}
	srv.Set(t, xdsNode, "3", hourly("k", 2))
	checkConfigInForce(t, s.httpAddr, "1", "config: 1 domain")
}
