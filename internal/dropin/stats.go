package dropin

import (
	"encoding/json"
	"net"
	"strings"

	"github.com/envoy-rls/envoy-rls/internal/statsd"
)

// statsSinks is USE_STATSD and USE_DOG_STATSD: envoyproxy/ratelimit's
// stats pushed to STATSD_HOST:STATSD_PORT, as plain statsd (over TCP) or
// DogStatsD (over UDP, with the mogrifiers of USE_DOG_STATSD_MOGRIFIERS).
// There USE_STATSD's default, true, stops the start beside USE_DOG_STATSD
// or USE_PROMETHEUS unless USE_STATSD=false is set; here an unset
// USE_STATSD gives way to them, and USE_STATSD=true beside
// USE_PROMETHEUS=true feeds both. DISABLE_STATS turns every sink off
// (-disable-stats).
func (e *upstreamEnv) statsSinks() {
	_, statsdSet := e.raw["USE_STATSD"]
	dog := e.on("USE_DOG_STATSD")
	plain := e.on("USE_STATSD") && (statsdSet || !dog && !e.on("USE_PROMETHEUS"))
	switch {
	case plain && dog:
		e.fail("USE_DOG_STATSD", e.rawOr("USE_DOG_STATSD"), "and USE_STATSD=true both push to STATSD_HOST:STATSD_PORT: set USE_STATSD=false for DogStatsD")
		return
	case !plain && !dog:
		return
	}
	e.set("statsd-addr", net.JoinHostPort(e.val("STATSD_HOST"), e.val("STATSD_PORT")), "USE_STATSD", "USE_DOG_STATSD", "STATSD_HOST", "STATSD_PORT")
	if dog {
		e.set("dogstatsd", "true", "USE_DOG_STATSD")
		e.mogrifiers()
	}
}

// mogrifierPrefix starts the variables of each mogrifier that
// USE_DOG_STATSD_MOGRIFIERS names: DOG_STATSD_MOGRIFIER_NAME_PATTERN,
// _NAME and _TAGS, the name upper-cased, as envoyproxy/ratelimit reads
// them (its README's DOG_STATSD_MOGRIFIERS_ is not what its code reads).
const mogrifierPrefix = "DOG_STATSD_MOGRIFIER_"

// mogrifiers reads the mogrifiers USE_DOG_STATSD_MOGRIFIERS names, in its
// order, into -dogstatsd-mogrifiers; a malformed one stops the start,
// naming its variable.
func (e *upstreamEnv) mogrifiers() {
	var ms []statsd.Mogrifier
	for _, name := range strings.Split(e.val("USE_DOG_STATSD_MOGRIFIERS"), ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		prefix := mogrifierPrefix + strings.ToUpper(name) + "_"
		m, ok := e.mogrifier(prefix)
		if !ok {
			return
		}
		ms = append(ms, m)
	}
	if len(ms) == 0 {
		return
	}
	b, err := json.Marshal(ms)
	if err != nil { // strings and maps of strings always marshal
		e.fail("USE_DOG_STATSD_MOGRIFIERS", e.val("USE_DOG_STATSD_MOGRIFIERS"), err.Error())
		return
	}
	e.set("dogstatsd-mogrifiers", string(b), "USE_DOG_STATSD_MOGRIFIERS")
}

// mogrifier reads one mogrifier's PATTERN, NAME and TAGS under prefix.
func (e *upstreamEnv) mogrifier(prefix string) (statsd.Mogrifier, bool) {
	get := func(v string) string { s, _ := e.lookup(prefix + v); return s }
	m := statsd.Mogrifier{Pattern: get("PATTERN"), Name: get("NAME")}
	if tags := get("TAGS"); tags != "" {
		m.Tags = map[string]string{}
		for _, pair := range strings.Split(tags, ",") {
			k, v, ok := strings.Cut(pair, ":")
			if !ok || k == "" || v == "" || strings.Contains(v, ":") {
				e.fail(prefix+"TAGS", tags, "want key:value pairs separated by commas, one colon each, neither empty ($1… the pattern's groups)")
				return m, false
			}
			m.Tags[k] = v
		}
	}
	switch err := m.Compile(); {
	case m.Pattern == "":
		e.fail(prefix+"PATTERN", "", "want the regular expression of the stat names to mogrify, for USE_DOG_STATSD_MOGRIFIERS")
	case m.Name == "":
		e.fail(prefix+"NAME", "", "want the name of the stats the pattern matches ($1… its groups), for USE_DOG_STATSD_MOGRIFIERS")
	case err != nil:
		e.fail(prefix+"PATTERN", m.Pattern, "want a regular expression (Go's syntax, as there): "+err.Error())
	default:
		return m, true
	}
	return m, false
}
