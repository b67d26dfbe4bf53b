package server

import (
	"flag"
	"fmt"
	"github.com/envoy-rls/envoy-rls/internal/redact"
	"net/http"
	"os"
	"strings"
)

// Secrets reach the server by environment or file, never only by the
// command line: a command line is readable by every process of the machine
// (ps, /proc/PID/cmdline) and by whoever reaches pprof. The server never
// shows a secret back: the command line pprof serves is redact.Placeholder, and no
// log line or metric carries one.

// secretFileFlags defines the flags that read a secret from a file: a
// Kubernetes Secret mounted as a volume, a Docker secret.
func secretFileFlags(fs *flag.FlagSet, o *Options) {
	fs.StringVar(&o.redisPasswordFile, "redis-password-file", "", "file holding the Redis password (its trailing newline dropped); instead of -redis-password")
	fs.StringVar(&o.redisSentinelPasswordFile, "redis-sentinel-password-file", "", "file holding the Sentinels' password; instead of -redis-sentinel-password")
}

// readSecretFiles sets the passwords that are given by file.
func (o *Options) readSecretFiles() error {
	for _, f := range []struct {
		flag, file string
		value      *string
		other      string
	}{
		{"-redis-password-file", o.redisPasswordFile, &o.redisPassword, "-redis-password"},
		{"-redis-sentinel-password-file", o.redisSentinelPasswordFile, &o.redisSentinelPassword, "-redis-sentinel-password"},
	} {
		if f.file == "" {
			continue
		}
		if *f.value != "" {
			return fmt.Errorf("%s and %s are both set: choose one", f.other, f.flag)
		}
		b, err := os.ReadFile(f.file)
		if err != nil {
			return fmt.Errorf("%s: %w", f.flag, err)
		}
		s := strings.TrimRight(string(b), "\r\n")
		if s == "" {
			return fmt.Errorf("%s: %s is empty", f.flag, f.file)
		}
		*f.value = s
	}
	return nil
}

// redactedCmdline serves pprof's /debug/pprof/cmdline with the secrets
// replaced.
func redactedCmdline(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprint(w, strings.Join(redact.Args(os.Args), "\x00"))
}
