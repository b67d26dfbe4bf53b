package dropin

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"

	"github.com/envoy-rls/envoy-rls/internal/cli"
)

// dropInRivals are flags that select one thing together: a translated
// flag is dropped when an RLS_ variable of its group is really set, so
// that RLS_REDIS_CLUSTER replaces REDIS_URL's single Redis rather than
// clashing with it, and RLS_REDIS_PASSWORD_FILE replaces REDIS_AUTH's
// password.
var dropInRivals = [][]string{
	{"redis-url", "redis-cluster", "redis-sentinel", "redis-sentinel-master"},
	{"redis-password", "redis-password-file"},
	{"redis-sentinel-password", "redis-sentinel-password-file"},
	{"grpc-tls-cert", "grpc-tls-key"},
	{"xds-tls-cert", "xds-tls-key"},
}

// environment returns the lookup that fills the server's flags (cl) from
// the translated ones: an RLS_ variable that is really set wins, and
// drops the translated flags of its group (dropInRivals); a translated
// value equal to the flag's default is left out. A flag that this build
// lacks is an error naming the variables that need it, unless none of
// them is set. The values were checked by their kinds; those of kind
// asFlag are checked here, by their flags, and refused in the variable's
// name.
func (e *upstreamEnv) environment(cl *cli.CommandLine) (func(string) (string, bool), error) {
	real := func(flagName string) bool { return cl.TwinSet(flagName, e.lookup) }
	values := map[string]string{}
	var errs []error
	for name, v := range e.flags {
		f := cl.FS.Lookup(name)
		switch {
		case f == nil:
			if err := e.missingFlag(name); err != nil {
				errs = append(errs, err)
			}
			continue
		case v == f.DefValue || rivalSet(name, real):
			continue
		}
		if from, ok := e.asFlag[name]; ok {
			if err := cl.Check(name, v); err != nil {
				errs = append(errs, upstreamError(from, v, err.Error()))
				continue
			}
		}
		values[cli.EnvName(name)] = v
	}
	if len(errs) > 0 {
		// From a map: sorted, so that the lines come out the same each run.
		slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
		return nil, errors.Join(errs...)
	}
	twins := map[string]string{}
	cl.FS.VisitAll(func(f *flag.Flag) { twins[cli.EnvName(f.Name)] = f.Name })
	return func(name string) (string, bool) {
		if flagName, twin := twins[name]; twin && real(flagName) {
			return e.lookup(name)
		}
		v, ok := values[name]
		return v, ok
	}, nil
}

// missingFlag is the error for a translated flag the server lacks, naming
// the variables it came from that are set; nil when none is.
func (e *upstreamEnv) missingFlag(name string) error {
	var set []string
	for _, from := range e.from[name] {
		if _, ok := e.raw[from]; ok {
			set = append(set, from)
		}
	}
	if len(set) == 0 {
		return nil
	}
	return fmt.Errorf("%s: this build of envoy-rls cannot honour it yet (it has no -%s)", strings.Join(set, ", "), name)
}

// rivalSet reports whether an RLS_ variable of flagName's group, itself
// included, is really set.
func rivalSet(flagName string, real func(string) bool) bool {
	if real(flagName) {
		return true
	}
	for _, group := range dropInRivals {
		if !slices.Contains(group, flagName) {
			continue
		}
		for _, f := range group {
			if real(f) {
				return true
			}
		}
	}
	return false
}
