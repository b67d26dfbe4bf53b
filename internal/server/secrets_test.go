package server

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// pprof's command line never shows a password given on it.
func TestPprofCmdlineRedacted(t *testing.T) {
	old := os.Args
	os.Args = []string{"envoy-rls", "-redis-url", "redis://:hunter2@127.0.0.1:1", "-redis-password=hunter2"}
	defer func() { os.Args = old }()
	s := startInProcess(t, "-debug-addr", "127.0.0.1:0")
	code, body := httpDo(t, "GET", "http://"+s.debugAddr+"/debug/pprof/cmdline", "")
	if code != http.StatusOK || strings.Contains(body, "hunter2") || !strings.Contains(body, "REDACTED") {
		t.Errorf("/debug/pprof/cmdline: %d %q", code, body)
	}
}

func TestPasswordFiles(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "password")
	if err := os.WriteFile(file, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o, err := parseFlags([]string{"-redis-url", "redis://127.0.0.1:1", "-redis-password-file", file}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if o.redisPassword != "s3cret" {
		t.Errorf("password %q, want the file's, without its newline", o.redisPassword)
	}
	o, err = parseFlags([]string{"-redis-sentinel", "h:1", "-redis-sentinel-master", "m"}, env(map[string]string{"RLS_REDIS_SENTINEL_PASSWORD_FILE": file}))
	if err != nil || o.redisSentinelPassword != "s3cret" {
		t.Errorf("sentinel password from RLS_REDIS_SENTINEL_PASSWORD_FILE: %q, %v", o.redisSentinelPassword, err)
	}
	for _, args := range [][]string{
		{"-redis-password", "x", "-redis-password-file", file},
		{"-redis-password-file", filepath.Join(dir, "missing")},
	} {
		if _, err := parseFlags(args, env(nil)); err == nil || !strings.Contains(err.Error(), "-redis-password") {
			t.Errorf("%q: %v, want an error naming the flag", args, err)
		}
	}
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, []byte("\n"), 0o600) //nolint:errcheck // checked by the parse below
	if _, err := parseFlags([]string{"-redis-password-file", empty}, env(nil)); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("an empty password file: %v, want an error", err)
	}
}
