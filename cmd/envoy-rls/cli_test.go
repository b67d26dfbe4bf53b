package main

import (
	"errors"
	"flag"
	"slices"
	"strings"
	"testing"
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
		name := envName(tc.flag)
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

// TestParseArgs: flags may come before, between or after the positional
// arguments; "--" makes the rest positional.
func TestParseArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		rest []string
		n    int
		b    bool
	}{
		{[]string{"a", "b"}, []string{"a", "b"}, 0, false},
		{[]string{"-n", "3", "a", "b"}, []string{"a", "b"}, 3, false},
		{[]string{"a", "-n", "3", "b", "-b"}, []string{"a", "b"}, 3, true},
		{[]string{"a", "b", "-b", "--n=4"}, []string{"a", "b"}, 4, true},
		{[]string{"a", "--", "-b", "-n", "5"}, []string{"a", "-b", "-n", "5"}, 0, false},
		{[]string{"-b", "--", "--"}, []string{"--"}, 0, true},
		{[]string{"a", "-", "b"}, []string{"a", "-", "b"}, 0, false},
		{nil, nil, 0, false},
	} {
		cl := newCommandLine("test", "", "")
		n := cl.fs.Int("n", 0, "")
		b := cl.fs.Bool("b", false, "")
		rest, err := cl.parseArgs(tc.args)
		if err != nil || !slices.Equal(rest, tc.rest) || *n != tc.n || *b != tc.b {
			t.Errorf("parseArgs(%q) = %q, -n %d, -b %v, %v; want %q, %d, %v", tc.args, rest, *n, *b, err, tc.rest, tc.n, tc.b)
		}
	}
	for _, h := range []string{"-h", "-help", "--help"} {
		cl := newCommandLine("test", "", "")
		if _, err := cl.parseArgs([]string{"a", h}); !errors.Is(err, flag.ErrHelp) {
			t.Errorf("%s after an argument: %v, want flag.ErrHelp", h, err)
		}
	}
}

func TestWrap(t *testing.T) {
	got := wrap("one two three four", 9)
	if want := []string{"one two", "three", "four"}; !slices.Equal(got, want) {
		t.Errorf("wrap = %q, want %q", got, want)
	}
	if got := wrap("averyveryverylongword x", 5); !slices.Equal(got, []string{"averyveryverylongword", "x"}) {
		t.Errorf("a long word: %q", got)
	}
}
