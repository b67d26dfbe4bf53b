// Package dropin is envoyproxy/ratelimit's environment, read as envoy-rls's
// flags: run under the name envoyproxy/ratelimit's image gives its binary
// (/bin/ratelimit), envoy-rls takes its whole configuration from that
// environment, so that Envoy Gateway, Istio's sample and Contour's guide
// run it unchanged.
//
// The variables are not a second configuration: each is translated into
// the server's own flags, as if given by their RLS_ twins, and every RLS_
// variable that is really set still wins. The variables are one table
// (variables), each read and checked once by its kind. A variable
// envoy-rls cannot honour, set to other than its default, stops the start
// with one line naming it; so does a malformed value. Nothing that would
// change a decision is passed over.
package dropin

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/envoy-rls/envoy-rls/internal/cli"
	"github.com/envoy-rls/envoy-rls/internal/redact"
	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

// Name is the base name of argv[0] that selects the drop-in.
const Name = "ratelimit"

// Is reports whether the binary runs as envoyproxy/ratelimit.
func Is(argv0 string) bool { return filepath.Base(argv0) == Name }

// Environment reads envoyproxy/ratelimit's environment and returns the
// environment the server's flags are filled from: every RLS_ variable
// that is really set, and for the others the value the upstream
// variables translate to. flags is the server's command line, for the
// flags' names, defaults and twins. Every refused or malformed variable
// is one line of the error.
func Environment(lookupEnv func(string) (string, bool), flags *cli.CommandLine) (func(string) (string, bool), error) {
	e := newUpstreamEnv(lookupEnv)
	e.translate()
	if len(e.errs) > 0 {
		return nil, errors.Join(e.errs...)
	}
	return e.environment(flags)
}

// Settings names, for a flag of the server's command line (flags) that
// the environment sets, the variable of envoyproxy/ratelimit's that
// stands for it, as the operator would look for it: REDIS_AUTH for
// -redis-password, RUNTIME_ROOT for -config (with RUNTIME_SUBDIRECTORY and
// RUNTIME_APPDIRECTORY beside it). "" for a flag whose RLS_ twin is set,
// which names itself, or that no variable sets.
func Settings(lookupEnv func(string) (string, bool), flags *cli.CommandLine) func(flag string) string {
	e := newUpstreamEnv(lookupEnv)
	e.translate()
	return func(flag string) string {
		if from := e.from[flag]; len(from) > 0 && !flags.TwinSet(flag, lookupEnv) {
			return from[0]
		}
		return ""
	}
}

// dropInDefaults are the flags the drop-in sets whatever the environment
// says, so that decisions mean what they mean in envoyproxy/ratelimit: its
// profile (rls.RatelimitProfile) answers, and gives the limits' defaults (a
// limit that names no algorithm is a fixed window, every hit counts,
// refused or not); and a runtime directory without files (a ConfigMap with
// no keys yet) is no limits rather than a failed start. Their RLS_ twins
// (RLS_DEFAULT_ALGORITHM, RLS_COUNT_REFUSED, RLS_RATELIMIT_COMPAT,
// RLS_ALLOW_EMPTY_CONFIG) change them.
var dropInDefaults = map[string]string{
	"default-algorithm":  rls.RatelimitProfile.Limits.Algorithm.String(),
	"count-refused":      strconv.FormatBool(rls.RatelimitProfile.Limits.CountRefused),
	"ratelimit-compat":   "true",
	"allow-empty-config": "true",
}

// upstreamEnv reads envoyproxy/ratelimit's variables and collects the
// server flags they translate to.
type upstreamEnv struct {
	lookup func(string) (string, bool)
	// raw holds the variables that are set and not empty, as set; vals
	// every variable of the table in the flags' form: its value if it is
	// well formed, else its default ("" for none). bad names the
	// malformed ones.
	raw, vals map[string]string
	bad       map[string]bool
	// flags are the translated values by flag name; from names, for each,
	// the variables it came from (none for a default of the drop-in).
	flags map[string]string
	from  map[string][]string
	// asFlag maps the flags whose value a variable of kind asFlag gives
	// to that variable, whose name a refusal by the flag names.
	asFlag map[string]string
	errs   []error
}

func newUpstreamEnv(lookupEnv func(string) (string, bool)) *upstreamEnv {
	return &upstreamEnv{lookup: lookupEnv, raw: map[string]string{}, vals: map[string]string{}, bad: map[string]bool{},
		flags: map[string]string{}, from: map[string][]string{}, asFlag: map[string]string{}}
}

// translate reads every variable of the table once, then makes the flags:
// the drop-in's own, each variable's that stands for one, and the steps'
// that combine several.
func (e *upstreamEnv) translate() {
	for f, v := range dropInDefaults {
		e.set(f, v)
	}
	for _, v := range variables {
		e.read(v)
	}
	for _, v := range variables {
		e.apply(v)
	}
	e.listeners()
	e.limitsSource()
	e.grpcTLS()
	e.redis()
	e.localCache()
	e.statsSinks() // stats.go
}

// read looks the variable up and checks it by its kind. An empty
// variable is as good as unset, as for the RLS_ twins, since container
// templates often export them empty.
func (e *upstreamEnv) read(v variable) {
	raw, ok := e.lookup(v.name)
	if ok && raw != "" {
		e.raw[v.name] = raw
		norm, err := v.kind.check(raw)
		if err == nil {
			e.vals[v.name] = norm
			return
		}
		e.bad[v.name] = true
		e.fail(v.name, raw, err.Error())
	}
	if v.def == "" {
		return
	}
	norm, err := v.kind.check(v.def)
	if err != nil { // the table's own mistake, which a test meets
		e.errs = append(e.errs, fmt.Errorf("%s: its default %q: %v", v.name, v.def, err))
	}
	e.vals[v.name] = norm
}

// apply refuses the variable, or makes the flag it stands for, when what
// it needs holds.
func (e *upstreamEnv) apply(v variable) {
	if !e.holds(v.needs) || e.bad[v.name] {
		return
	}
	raw, set := e.raw[v.name]
	if v.refused != "" {
		allow := v.allow
		if allow == "" {
			allow = v.def
		}
		if set && !sameSetting(e.vals[v.name], allow) {
			e.fail(v.name, raw, v.refused)
		}
		return
	}
	if v.flag == "" || !set && (v.ours || v.def == "") {
		return
	}
	e.set(v.flag, e.vals[v.name], append([]string{v.name}, needed(v.needs)...)...)
	if v.kind.name == asFlag.name {
		e.asFlag[v.flag] = v.name
	}
}

// holds reports whether every condition of needs holds: "NAME" a boolean
// that is true, "NAME=VALUE" a word equal in any case.
func (e *upstreamEnv) holds(needs []string) bool {
	for _, n := range needs {
		name, want, isWord := strings.Cut(n, "=")
		if !isWord {
			want = "true"
		}
		if !strings.EqualFold(e.val(name), want) {
			return false
		}
	}
	return true
}

// needed is the variables that needs names.
func needed(needs []string) []string {
	var names []string
	for _, n := range needs {
		name, _, _ := strings.Cut(n, "=")
		names = append(names, name)
	}
	return names
}

// val is a variable's value in the flags' form, or its default. A name
// the table lacks is the steps' own mistake, which a test meets.
func (e *upstreamEnv) val(name string) string {
	v, ok := e.vals[name]
	if !ok && !inTable(name) {
		e.errs = append(e.errs, fmt.Errorf("%s is not in the table of variables", name))
	}
	return v
}

// on reports whether a boolean variable is true.
func (e *upstreamEnv) on(name string) bool { return e.val(name) == "true" }

// rawOr is a variable as set, or its default as the table writes it, for
// the messages that show a value back.
func (e *upstreamEnv) rawOr(name string) string {
	if v, ok := e.raw[name]; ok {
		return v
	}
	return byName[name].def
}

// byName is the table by variable name.
var byName = func() map[string]variable {
	m := make(map[string]variable, len(variables))
	for _, v := range variables {
		m[v.name] = v
	}
	return m
}()

// inTable reports whether the table has the variable name.
func inTable(name string) bool {
	_, ok := byName[name]
	return ok
}

// set records that a flag takes a value, translated from the variables
// from.
func (e *upstreamEnv) set(flag, value string, from ...string) {
	e.flags[flag] = value
	e.from[flag] = from
}

// fail records that name's value v stops the start, and why.
func (e *upstreamEnv) fail(name, v, why string) {
	e.errs = append(e.errs, upstreamError(name, v, why))
}

// upstreamError is the line that refuses a variable's value v, and says
// why. Secrets are not shown back.
func upstreamError(name, v, why string) error {
	switch {
	case redact.IsSecretName(name):
		v = redact.Placeholder
	case strings.Contains(v, "://"):
		v = redact.URLs(v)
	}
	return fmt.Errorf("%s=%q: %s", name, v, why)
}
