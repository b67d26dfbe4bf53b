// Package redact hides secrets wherever envoy-rls shows a value back: a
// command line pprof serves, a variable an error names. Secrets reach the
// server by environment or file, never only by the command line, and no
// log line or metric carries one.
package redact

import (
	"net/url"
	"strings"
)

// Placeholder stands for a secret wherever one would be shown.
const Placeholder = "REDACTED"

// Args returns args with every secret replaced: the value of a flag
// whose name says it holds one (password, auth, secret, token), in either
// form (-flag=value, -flag value), and the password of any URL.
func Args(args []string) []string {
	out := make([]string, len(args))
	secretNext := false
	for i, a := range args {
		switch {
		case secretNext:
			out[i], secretNext = Placeholder, false
			continue
		case strings.HasPrefix(a, "-"):
			name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if IsSecretName(name) {
				if hasValue {
					out[i] = a[:strings.Index(a, "=")+1] + Placeholder
				} else {
					out[i], secretNext = a, true
				}
				continue
			}
		}
		out[i] = URLs(a)
	}
	return out
}

// IsSecretName reports whether a flag or variable name says it holds a
// secret (a password, auth, secret or token), but for a file of one.
func IsSecretName(name string) bool {
	name = strings.ToLower(name)
	for _, w := range []string{"password", "passwd", "auth", "secret", "token"} {
		if strings.Contains(name, w) && !strings.HasSuffix(name, "-file") {
			return true
		}
	}
	return false
}

// URLs replaces the password of a URL in s (a whole argument, or the
// value of -flag=URL).
func URLs(s string) string {
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
			return prefix + Placeholder
		}
		return s
	}
	if _, has := u.User.Password(); !has {
		return s
	}
	u.User = url.UserPassword(u.User.Username(), Placeholder)
	return prefix + u.String()
}
