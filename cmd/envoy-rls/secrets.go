package main

import (
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
)

// Secrets reach the server by environment or file, never only by the
// command line: a command line is readable by every process of the machine
// (ps, /proc/PID/cmdline) and by whoever reaches pprof. The server never
// shows a secret back: the command line pprof serves is redacted, and no
// log line or metric carries one.

// secretFileFlags defines the flags that read a secret from a file: a
// Kubernetes Secret mounted as a volume, a Docker secret.
func secretFileFlags(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.redisPasswordFile, "redis-password-file", "", "file holding the Redis password (its trailing newline dropped); instead of -redis-password")
	fs.StringVar(&o.redisSentinelPasswordFile, "redis-sentinel-password-file", "", "file holding the Sentinels' password; instead of -redis-sentinel-password")
}

// readSecretFiles sets the passwords that are given by file.
func (o *options) readSecretFiles() error {
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

// redacted is the placeholder of a secret.
const redacted = "REDACTED"

// redactArgs returns args with every secret replaced: the value of a flag
// whose name says it holds one (password, auth, secret, token), in either
// form (-flag=value, -flag value), and the password of any URL.
func redactArgs(args []string) []string {
	out := make([]string, len(args))
	secretNext := false
	for i, a := range args {
		switch {
		case secretNext:
			out[i], secretNext = redacted, false
			continue
		case strings.HasPrefix(a, "-"):
			name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if isSecretName(name) {
				if hasValue {
					out[i] = a[:strings.Index(a, "=")+1] + redacted
				} else {
					out[i], secretNext = a, true
				}
				continue
			}
		}
		out[i] = redactURLs(a)
	}
	return out
}

func isSecretName(name string) bool {
	name = strings.ToLower(name)
	for _, w := range []string{"password", "passwd", "auth", "secret", "token"} {
		if strings.Contains(name, w) && !strings.HasSuffix(name, "-file") {
			return true
		}
	}
	return false
}

// redactURLs replaces the password of a URL in s (a whole argument, or the
// value of -flag=URL).
func redactURLs(s string) string {
	prefix, value := "", s
	if strings.HasPrefix(s, "-") {
		if name, v, ok := strings.Cut(s, "="); ok {
			prefix, value = name+"=", v
		}
	}
	if !strings.Contains(value, "://") {
		return s
	}
	u, err := url.Parse(value)
	if err != nil {
		// Unparsable, but it may still hold user:pass@: hide all of it.
		if strings.Contains(value, "@") {
			return prefix + redacted
		}
		return s
	}
	if _, has := u.User.Password(); !has {
		return s
	}
	u.User = url.UserPassword(u.User.Username(), redacted)
	return prefix + u.String()
}

// redactedCmdline serves pprof's /debug/pprof/cmdline with the secrets
// replaced.
func redactedCmdline(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprint(w, strings.Join(redactArgs(os.Args), "\x00"))
}
