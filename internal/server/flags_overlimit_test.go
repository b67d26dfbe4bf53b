package server

import (
	"testing"
)

// -over-limit-cache is on by default, and RLS_OVER_LIMIT_CACHE or the flag
// turns it off.
func TestOverLimitCacheFlag(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want bool
	}{
		{"default", nil, nil, true},
		{"env", nil, map[string]string{"RLS_OVER_LIMIT_CACHE": "false"}, false},
		{"flag", []string{"-over-limit-cache=false"}, nil, false},
		{"flag wins", []string{"-over-limit-cache=true"}, map[string]string{"RLS_OVER_LIMIT_CACHE": "false"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseFlags(tc.args, env(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			if o.overLimitCache != tc.want {
				t.Errorf("overLimitCache = %v, want %v", o.overLimitCache, tc.want)
			}
		})
	}
}
