package cli

import (
	"errors"
	"flag"
	"slices"
	"testing"
)

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
		cl := New("test", "", "")
		n := cl.FS.Int("n", 0, "")
		b := cl.FS.Bool("b", false, "")
		rest, err := cl.ParseArgs(tc.args)
		if err != nil || !slices.Equal(rest, tc.rest) || *n != tc.n || *b != tc.b {
			t.Errorf("parseArgs(%q) = %q, -n %d, -b %v, %v; want %q, %d, %v", tc.args, rest, *n, *b, err, tc.rest, tc.n, tc.b)
		}
	}
	for _, h := range []string{"-h", "-help", "--help"} {
		cl := New("test", "", "")
		if _, err := cl.ParseArgs([]string{"a", h}); !errors.Is(err, flag.ErrHelp) {
			t.Errorf("%s after an argument: %v, want flag.ErrHelp", h, err)
		}
	}
}

func TestWrap(t *testing.T) {
	got := Wrap("one two three four", 9)
	if want := []string{"one two", "three", "four"}; !slices.Equal(got, want) {
		t.Errorf("wrap = %q, want %q", got, want)
	}
	if got := Wrap("averyveryverylongword x", 5); !slices.Equal(got, []string{"averyveryverylongword", "x"}) {
		t.Errorf("a long word: %q", got)
	}
}

// An RLS_ variable that is no flag's twin is warned about, with the twin
// it most likely meant; the twins themselves, a flag without one and other
// variables are not.
func TestUnknownTwins(t *testing.T) {
	cl := New("test", "", "")
	cl.Env = true
	cl.NoEnv = map[string]bool{"version": true}
	cl.FS.String("redis-url", "", "")
	cl.FS.String("redis-cluster", "", "")
	cl.FS.Bool("version", false, "")
	got := cl.UnknownTwins([]string{"RLS_REDIS_URL=redis://a", "RLS_REDIS_ULR=redis://b", "RLS_VERSION=1", "RLS_WHATEVER=x", "REDIS_ULR=c", "PATH=/bin"})
	want := []string{
		"RLS_REDIS_ULR is set but is no flag's twin: ignored, did you mean RLS_REDIS_URL?",
		"RLS_VERSION is set but is no flag's twin: ignored",
		"RLS_WHATEVER is set but is no flag's twin: ignored",
	}
	if !slices.Equal(got, want) {
		t.Errorf("UnknownTwins:\n got  %q\n want %q", got, want)
	}
}

// TestUnknownFlag: a flag the command does not have is refused with the
// flag a typo most likely meant, as an unknown RLS_ variable is; one near
// no flag is refused alone.
func TestUnknownFlag(t *testing.T) {
	for _, tc := range []struct{ arg, want string }{
		{"-redis-ulr", "flag provided but not defined: -redis-ulr, did you mean -redis-url?"},
		{"--redis-clutser=a", "flag provided but not defined: -redis-clutser, did you mean -redis-cluster?"},
		{"-Config", "flag provided but not defined: -Config, did you mean -config?"},
		{"-nope", "flag provided but not defined: -nope"},
	} {
		cl := New("test", "", "")
		cl.FS.String("redis-url", "", "")
		cl.FS.String("redis-cluster", "", "")
		cl.FS.String("config", "", "")
		if _, err := cl.ParseArgs([]string{"a", tc.arg}); err == nil || err.Error() != tc.want {
			t.Errorf("%s: %v, want %q", tc.arg, err, tc.want)
		}
	}
}
