package redact

import (
	"strings"
	"testing"
)

func TestRedactArgs(t *testing.T) {
	for _, tt := range []struct{ in, want []string }{
		{[]string{"envoy-rls", "-redis-url", "redis://u:hunter2@h:6379/0"}, []string{"envoy-rls", "-redis-url", "redis://u:REDACTED@h:6379/0"}},
		{[]string{"envoy-rls", "-redis-url=rediss://:hunter2@h:6379"}, []string{"envoy-rls", "-redis-url=rediss://:REDACTED@h:6379"}},
		{[]string{"envoy-rls", "-redis-password", "hunter2", "-log-level", "debug"}, []string{"envoy-rls", "-redis-password", "REDACTED", "-log-level", "debug"}},
		{[]string{"envoy-rls", "--redis-sentinel-password=hunter2"}, []string{"envoy-rls", "--redis-sentinel-password=REDACTED"}},
		{[]string{"envoy-rls", "-redis-password-file", "/run/secrets/redis"}, []string{"envoy-rls", "-redis-password-file", "/run/secrets/redis"}},
		{[]string{"envoy-rls", "-redis-url", "redis://h:6379"}, []string{"envoy-rls", "-redis-url", "redis://h:6379"}},
		{[]string{"envoy-rls", "-redis-url", "redis://u:p%zz@h"}, []string{"envoy-rls", "-redis-url", "REDACTED"}},
	} {
		got := Args(tt.in)
		if strings.Join(got, " ") != strings.Join(tt.want, " ") {
			t.Errorf("Args(%q) = %q, want %q", tt.in, got, tt.want)
		}
		for _, a := range got {
			if strings.Contains(a, "hunter2") {
				t.Errorf("Args(%q) shows the secret", tt.in)
			}
		}
	}
}
