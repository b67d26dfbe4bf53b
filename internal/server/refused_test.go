package server

import (
	"strings"
	"testing"

	"github.com/envoy-rls/envoy-rls/internal/cli"
)

// TestRefusedValues: a value a flag refuses, from the command line or from
// the environment, is reported with where it came from and what was wanted,
// for every kind of flag.
func TestRefusedValues(t *testing.T) {
	for _, tc := range []struct {
		flag, value, want string
	}{
		{"store-timeout", "50", "want a duration such as 50ms or 1s"},
		{"shutdown-timeout", "abc", "want a duration such as 50ms or 1s"},
		{"max-keys", "many", "want a whole number"},
		{"max-keys", "1e3", "want a whole number"},
		{"redis-pool-size", "99999999999999999999", "want a whole number"},
		{"hash-values", "maybe", "want true or false"},
		{"over-limit-cache", "yes", "want true or false"},
		{"failure-mode", "sometimes", "want allow, deny, local or error"},
		{"log-format", "xml", "want json or console"},
		{"log-level", "verbose", "want debug, info, warn or error"},
	} {
		_, err := parseFlags([]string{"-" + tc.flag + "=" + tc.value}, env(nil))
		if want := "-" + tc.flag + " " + `"` + tc.value + `": ` + tc.want; err == nil || err.Error() != want {
			t.Errorf("-%s=%s: got %v, want %q", tc.flag, tc.value, err, want)
		}
		// A boolean takes no separate value.
		_, err = parseFlags([]string{"-" + tc.flag, tc.value}, env(nil))
		if want := "-" + tc.flag + " " + `"` + tc.value + `": ` + tc.want; tc.want != "want true or false" && (err == nil || err.Error() != want) {
			t.Errorf("-%s %s: got %v, want %q", tc.flag, tc.value, err, want)
		}
		name := cli.EnvName(tc.flag)
		_, err = parseFlags(nil, env(map[string]string{name: tc.value}))
		if want := name + `="` + tc.value + `": ` + tc.want; err == nil || err.Error() != want {
			t.Errorf("%s=%s: got %v, want %q", name, tc.value, err, want)
		}
	}

	// Every refused variable is reported, not only the first.
	_, err := parseFlags(nil, env(map[string]string{"RLS_STORE_TIMEOUT": "abc", "RLS_MAX_KEYS": "x"}))
	if err == nil || !strings.Contains(err.Error(), "RLS_STORE_TIMEOUT") || !strings.Contains(err.Error(), "RLS_MAX_KEYS") {
		t.Errorf("two bad variables: got %v, want both named", err)
	}
	// A boolean without a value is still true, and the levels zap knows
	// beyond the four the help names still load.
	o, err := parseFlags([]string{"-hash-values", "-log-level", "DEBUG"}, env(nil))
	if err != nil || !o.hashValues || o.logLevel != "DEBUG" {
		t.Errorf("-hash-values -log-level DEBUG: %+v, %v", o, err)
	}
}
