package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

// The drop-in: run under the name envoyproxy/ratelimit's image gives its
// binary (/bin/ratelimit), envoy-rls takes its whole configuration from
// envoyproxy/ratelimit's environment, so that Envoy Gateway, Istio's
// sample and Contour's guide run it unchanged. The variables are not a
// second configuration: each is translated into the server's own flags,
// as if given by their RLS_ twins, and every RLS_ variable that is really
// set still wins. A variable envoy-rls cannot honour, set to other than its
// default, stops the start with one line naming it; so does a malformed
// value. Nothing that would change a decision is passed over.

// dropInName is the base name of argv[0] that selects the drop-in.
const dropInName = "ratelimit"

// isDropIn reports whether the binary runs as envoyproxy/ratelimit.
func isDropIn(argv0 string) bool { return filepath.Base(argv0) == dropInName }

// dropIn is run for the drop-in: the subcommands as envoy-rls runs them,
// the server with its flags from envoyproxy/ratelimit's environment.
// Flags on the command line (there are none in the deployments it stands
// in for) still win over both.
func dropIn(args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int {
	if len(args) > 0 {
		for _, c := range commands() {
			if args[0] == c.name {
				return c.run(args[1:], lookupEnv, stdout, stderr)
			}
		}
	}
	env, err := translateDropIn(lookupEnv)
	if err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintf(stderr, "%s: %s\n", dropInName, line)
		}
		return 2
	}
	return run(args, env, stdout, stderr)
}

// grpcNetwork splits -grpc-addr into the network and address net.Listen
// takes: unix:PATH is a unix socket (envoyproxy/ratelimit's GRPC_UDS),
// anything else a TCP address.
func grpcNetwork(addr string) (network, address string) {
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		return "unix", path
	}
	return "tcp", addr
}

// Defaults of envoyproxy/ratelimit that the translation needs by value.
const (
	upstreamRuntimeRoot = "/srv/runtime_data/current"
	upstreamRedisSocket = "/var/run/nutcracker/ratelimit.sock"
)

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

// dropInDirect are the variables that stand for one server flag each, with
// envoyproxy/ratelimit's default: the one table of names to keep in step
// with the flags.
var dropInDirect = []struct {
	env, flag string
	kind      valueType
	def       string
}{
	{"GRPC_MAX_CONNECTION_AGE", "grpc-max-connection-age", durationValue, "24h"},
	{"SHADOW_MODE", "shadow-mode", boolValue, "false"},
	{"QUOTA_MODE", "quota-mode", boolValue, "false"},
	{"RESPONSE_DYNAMIC_METADATA", "dynamic-metadata", boolValue, "false"},
	{"LIMIT_RESPONSE_HEADERS_ENABLED", "ratelimit-headers", boolValue, "false"},
	{"LIMIT_LIMIT_HEADER", "ratelimit-header-limit", stringValue, "RateLimit-Limit"},
	{"LIMIT_REMAINING_HEADER", "ratelimit-header-remaining", stringValue, "RateLimit-Remaining"},
	{"LIMIT_RESET_HEADER", "ratelimit-header-reset", stringValue, "RateLimit-Reset"},
	{"MERGE_DOMAIN_CONFIG", "merge-domains", boolValue, "false"},
	{"DISABLE_STATS", "disable-stats", boolValue, "false"},
	{"NEAR_LIMIT_RATIO", "near-limit-ratio", ratioValue, "0.8"},
	// Unset, go-redis's pool size (a few per CPU) rather than 10: a
	// performance setting, which changes no decision.
	{"REDIS_POOL_SIZE", "redis-pool-size", sizeValue, ""},
}

// dropInXDS are the variables of the xDS client, which stand for a flag
// each when CONFIG_TYPE is GRPC_XDS_SOTW.
var dropInXDS = []struct {
	env, flag string
	kind      valueType
	def       string
}{
	{"CONFIG_GRPC_XDS_SERVER_URL", "xds-server", stringValue, "localhost:18000"},
	{"CONFIG_GRPC_XDS_NODE_ID", "xds-node-id", stringValue, "default"},
	{"CONFIG_GRPC_XDS_NODE_METADATA", "xds-node-metadata", stringValue, ""},
	{"CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", "xds-headers", mapValue, ""},
	{"XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", "xds-retry-initial", durationValue, "10s"},
	{"XDS_CLIENT_BACKOFF_MAX_INTERVAL", "xds-retry-max", durationValue, "60s"},
	// The factor each wait is multiplied by: 0.5 there, so every wait is
	// the initial one, as -xds-retry-factor of 1 or less has it.
	{"XDS_CLIENT_BACKOFF_RANDOM_FACTOR", "xds-retry-factor", numberValue, "0.5"},
	{"XDS_CLIENT_BACKOFF_JITTER", "xds-retry-jitter", boolValue, "true"},
	{"XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", "xds-max-message-bytes", sizeValue, ""},
	{"FORCE_START_WITHOUT_INITIAL_CONFIG", "xds-force-start", boolValue, "false"},
	{"HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", "xds-healthy-needs-config", boolValue, "false"},
}

// dropInRefused are envoyproxy/ratelimit's settings envoy-rls does not
// have, each with its default and why: set to anything else, the start
// stops. (BACKEND_TYPE, USE_STATSD, the Redis and Prometheus settings that
// count only beside another are refused where that is read.) The
// variables that serve only these (MEMCACHE_*, REDIS_PERSECOND_*, the
// tracer's) change nothing unless one of these is set, there as here.
var dropInRefused = []struct {
	env, def, why string
}{
	{"REDIS_PERSECOND", "false", "envoy-rls counts every limit in one Redis; point REDIS_URL at the Redis to use"},
	{"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "false", "envoy-rls has no such counting rule; RLS_COUNT_REFUSED=false counts only the hits it allows"},
	{"REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", "false", "envoy-rls stays healthy while Redis is down and answers by its failure mode (RLS_FAILURE_MODE)"},
	{"USE_DOG_STATSD", "false", "envoy-rls has no DogStatsD sink; use USE_PROMETHEUS=true"},
	{"TRACING_ENABLED", "false", "envoy-rls has no tracing yet"},
}

// dropInHarmless are the variables that change no decision of envoy-rls:
// they tune what envoy-rls does otherwise (Redis pipelining, reconnection
// backoff, startup retries, key expiry jitter), or belong to a sink or
// backend refused above. Their form is checked all the same, as
// envoyproxy/ratelimit checks it, so that a typo is not carried along.
var dropInHarmless = []struct {
	env  string
	kind valueType
}{
	{"GRPC_MAX_CONNECTION_AGE_GRACE", durationValue},
	{"CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", durationValue},
	{"USE_DOG_STATSD_MOGRIFIERS", stringValue},
	{"STATSD_HOST", stringValue},
	{"STATSD_PORT", portValue},
	{"EXTRA_TAGS", mapValue},
	{"STATS_FLUSH_INTERVAL", durationValue},
	{"EXPIRATION_JITTER_MAX_SECONDS", sizeValue},
	{"REDIS_PIPELINE_WINDOW", durationValue},
	{"REDIS_PIPELINE_LIMIT", sizeValue},
	{"REDIS_CLUSTER_PIPELINE_PARALLELISM", sizeValue},
	{"REDIS_PERSECOND_SOCKET_TYPE", stringValue},
	{"REDIS_PERSECOND_TYPE", stringValue},
	{"REDIS_PERSECOND_URL", stringValue},
	{"REDIS_PERSECOND_POOL_SIZE", sizeValue},
	{"REDIS_PERSECOND_AUTH", stringValue},
	{"REDIS_PERSECOND_TLS", boolValue},
	{"REDIS_PERSECOND_SENTINEL_AUTH", stringValue},
	{"REDIS_PERSECOND_PIPELINE_WINDOW", durationValue},
	{"REDIS_PERSECOND_PIPELINE_LIMIT", sizeValue},
	{"REDIS_PERSECOND_CLUSTER_PIPELINE_PARALLELISM", sizeValue},
	{"REDIS_PERSECOND_TIMEOUT", durationValue},
	{"REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR", stringValue},
	{"REDIS_STARTUP_INITIAL_INTERVAL", durationValue},
	{"REDIS_STARTUP_MAX_INTERVAL", durationValue},
	{"REDIS_STARTUP_MAX_ELAPSED_TIME", durationValue},
	{"MEMCACHE_HOST_PORT", stringValue},
	{"MEMCACHE_MAX_IDLE_CONNS", sizeValue},
	{"MEMCACHE_SRV", stringValue},
	{"MEMCACHE_SRV_REFRESH", durationValue},
	{"MEMCACHE_TLS", boolValue},
	{"MEMCACHE_TLS_CLIENT_CERT", stringValue},
	{"MEMCACHE_TLS_CLIENT_KEY", stringValue},
	{"MEMCACHE_TLS_CACERT", stringValue},
	{"MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION", boolValue},
	{"REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", boolValue},
	{"PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS", boolValue},
	{"TRACING_SERVICE_NAME", stringValue},
	{"TRACING_SERVICE_NAMESPACE", stringValue},
	{"TRACING_SERVICE_INSTANCE_ID", stringValue},
	{"TRACING_EXPORTER_PROTOCOL", stringValue},
	{"TRACING_SAMPLING_RATE", numberValue},
}

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

// translateDropIn reads envoyproxy/ratelimit's environment and returns the
// environment the server's flags are filled from: every RLS_ variable
// that is really set, and for the others the value the upstream
// variables translate to. Every refused or malformed variable is one line
// of the error.
func translateDropIn(lookupEnv func(string) (string, bool)) (func(string) (string, bool), error) {
	e := newUpstreamEnv(lookupEnv)
	e.translate()
	if len(e.errs) > 0 {
		return nil, errors.Join(e.errs...)
	}
	return e.environment()
}

// upstreamEnv reads envoyproxy/ratelimit's variables and collects the
// server flags they translate to.
type upstreamEnv struct {
	lookup func(string) (string, bool)
	// flags are the translated values by flag name; from names, for each,
	// the variables it came from (none for a default of the drop-in).
	flags map[string]string
	from  map[string][]string
	errs  []error
	// read holds every variable looked at, so that a test can check that
	// none of envoyproxy/ratelimit's is passed over.
	read map[string]bool
}

func newUpstreamEnv(lookupEnv func(string) (string, bool)) *upstreamEnv {
	return &upstreamEnv{lookup: lookupEnv, flags: map[string]string{}, from: map[string][]string{}, read: map[string]bool{}}
}

// translate reads every variable.
func (e *upstreamEnv) translate() {
	for f, v := range dropInDefaults {
		e.set(f, v)
	}
	e.listeners()
	e.logging()
	e.limitsSource()
	e.grpcTLS()
	e.redis()
	e.stats()
	e.localCache()
	for _, d := range dropInDirect {
		if v, ok := e.typed(d.env, d.kind, d.def); ok {
			e.set(d.flag, v, d.env)
		}
	}
	for _, r := range dropInRefused {
		if v, ok := e.value(r.env); ok && !sameSetting(v, r.def) {
			e.fail(r.env, v, r.why)
		}
	}
	for _, h := range dropInHarmless {
		e.typed(h.env, h.kind, "")
	}
}

// sameSetting reports whether a variable's value says the same as def:
// equal booleans, or equal words in any case.
func sameSetting(v, def string) bool {
	if b, err := strconv.ParseBool(v); err == nil {
		d, derr := strconv.ParseBool(def)
		return derr == nil && b == d
	}
	return strings.EqualFold(v, def)
}

// value returns a variable that is set and not empty: an empty variable is
// as good as unset, as for the RLS_ twins, since container templates
// often export them empty.
func (e *upstreamEnv) value(name string) (string, bool) {
	e.read[name] = true
	v, ok := e.lookup(name)
	if !ok || v == "" {
		return "", false
	}
	return v, true
}

// str is a variable's value, or def.
func (e *upstreamEnv) str(name, def string) string {
	if v, ok := e.value(name); ok {
		return v
	}
	return def
}

// isSet reports whether a variable is set and not empty.
func (e *upstreamEnv) isSet(name string) bool {
	_, ok := e.value(name)
	return ok
}

// fail records that name's value v stops the start, and why. Secrets are
// not shown back.
func (e *upstreamEnv) fail(name, v, why string) {
	e.errs = append(e.errs, upstreamError(name, v, why))
}

// upstreamError is the line that refuses a variable's value v, and says
// why. Secrets are not shown back.
func upstreamError(name, v, why string) error {
	switch {
	case isSecretName(name):
		v = redacted
	case strings.Contains(v, "://"):
		v = redactURLs(v)
	}
	return fmt.Errorf("%s=%q: %s", name, v, why)
}

// valueType is the form of a variable's value, as envoyproxy/ratelimit
// parses it (kelseyhightower/envconfig).
type valueType int

const (
	stringValue   valueType = iota
	boolValue               // strconv.ParseBool: true, false, 1, 0, t, f
	durationValue           // time.ParseDuration, not negative
	sizeValue               // a whole number, not negative
	portValue               // 0 to 65535
	numberValue             // a number
	ratioValue              // a number from 0 to 1
	mapValue                // key:value,key:value
)

// want says what a value of the type looks like, for the error.
func (t valueType) want() string {
	switch t {
	case boolValue:
		return "want true or false"
	case durationValue:
		return "want a duration such as 500ms, 10s or 1h, not negative"
	case sizeValue:
		return "want a whole number, 0 or more"
	case portValue:
		return "want a port number, 0 to 65535"
	case numberValue:
		return "want a number"
	case ratioValue:
		return "want a number from 0 to 1"
	case mapValue:
		return "want key:value pairs separated by commas"
	}
	return ""
}

// typed reads a variable of type t and returns it in the form of the
// server's flags (a duration as time.Duration.String, a boolean as true or
// false), or def when it is unset; ok is false when it is unset and def is
// empty, or malformed (recorded).
func (e *upstreamEnv) typed(name string, t valueType, def string) (string, bool) {
	v, set := e.value(name)
	if !set {
		if def == "" {
			return "", false
		}
		v = def
	}
	norm, err := t.normalize(v)
	if err != nil {
		e.fail(name, v, t.want())
		return "", false
	}
	return norm, true
}

// normalize checks v and writes it as the server's flags write their
// defaults, so that a value can be compared with a flag's default.
func (t valueType) normalize(v string) (string, error) {
	switch t {
	case boolValue:
		b, err := strconv.ParseBool(v)
		return strconv.FormatBool(b), err
	case durationValue:
		d, err := time.ParseDuration(v)
		if err == nil && d < 0 {
			err = errors.New("negative")
		}
		return d.String(), err
	case sizeValue, portValue:
		n, err := strconv.ParseInt(v, 0, 64)
		if err == nil && (n < 0 || n > math.MaxInt32 || t == portValue && n > 65535) {
			err = errors.New("out of range")
		}
		return strconv.FormatInt(n, 10), err
	case numberValue, ratioValue:
		f, err := strconv.ParseFloat(v, 64)
		if err == nil && (math.IsNaN(f) || math.IsInf(f, 0) || t == ratioValue && (f < 0 || f > 1)) {
			err = errors.New("out of range")
		}
		return strconv.FormatFloat(f, 'g', -1, 64), err
	case mapValue:
		for _, pair := range strings.Split(v, ",") {
			if k, _, ok := strings.Cut(pair, ":"); !ok || k == "" {
				return "", errors.New("not key:value")
			}
		}
	}
	return v, nil
}

// boolean reads a boolean variable.
func (e *upstreamEnv) boolean(name string, def bool) bool {
	v, ok := e.typed(name, boolValue, strconv.FormatBool(def))
	return ok && v == "true" || !ok && def
}

// port reads a port variable.
func (e *upstreamEnv) port(name string, def int) string {
	if v, ok := e.typed(name, portValue, strconv.Itoa(def)); ok {
		return v
	}
	return strconv.Itoa(def)
}

// set records that a flag takes a value, translated from the variables
// from.
func (e *upstreamEnv) set(flag, value string, from ...string) {
	e.flags[flag] = value
	e.from[flag] = from
}

// listeners are HOST and PORT (HTTP), GRPC_HOST and GRPC_PORT or
// GRPC_UDS, DEBUG_HOST and DEBUG_PORT (pprof), on all interfaces by
// default as envoyproxy/ratelimit listens.
func (e *upstreamEnv) listeners() {
	e.set("http-addr", net.JoinHostPort(e.str("HOST", "0.0.0.0"), e.port("PORT", 8080)), "HOST", "PORT")
	grpcAddr := net.JoinHostPort(e.str("GRPC_HOST", "0.0.0.0"), e.port("GRPC_PORT", 8081))
	if uds, ok := e.value("GRPC_UDS"); ok {
		grpcAddr = "unix:" + uds
	}
	e.set("grpc-addr", grpcAddr, "GRPC_HOST", "GRPC_PORT", "GRPC_UDS")
	e.set("debug-addr", net.JoinHostPort(e.str("DEBUG_HOST", "0.0.0.0"), e.port("DEBUG_PORT", 6070)), "DEBUG_HOST", "DEBUG_PORT")
}

// logging is LOG_LEVEL (logrus's levels, WARN by default) and LOG_FORMAT
// (json, or text for anything else, as envoyproxy/ratelimit reads it).
func (e *upstreamEnv) logging() {
	level := e.str("LOG_LEVEL", "WARN")
	zapLevel, ok := map[string]string{
		"trace": "debug", "debug": "debug", "info": "info", "warn": "warn", "warning": "warn",
		"error": "error", "fatal": "fatal", "panic": "panic",
	}[strings.ToLower(level)]
	if !ok {
		e.fail("LOG_LEVEL", level, "want trace, debug, info, warn, error, fatal or panic (any case)")
	}
	e.set("log-level", zapLevel, "LOG_LEVEL")
	format := "console"
	if strings.EqualFold(e.str("LOG_FORMAT", "text"), "json") {
		format = "json"
	}
	e.set("log-format", format, "LOG_FORMAT")
}

// limitsSource is CONFIG_TYPE: FILE reads the runtime directory,
// GRPC_XDS_SOTW an xDS server. The variables of both are read in either
// mode, so that a malformed one is reported whichever is in use.
func (e *upstreamEnv) limitsSource() {
	root := e.str("RUNTIME_ROOT", upstreamRuntimeRoot)
	sub := e.str("RUNTIME_SUBDIRECTORY", "")
	app := e.str("RUNTIME_APPDIRECTORY", "config")
	ignoreDot := e.boolean("RUNTIME_IGNOREDOTFILES", false)
	// Honoured whatever it says: envoy-rls watches the application
	// directory and, through the symlinks it resolves, a swap of the whole
	// root (package watch), both of which envoyproxy/ratelimit watches one
	// at a time.
	watchRoot := e.boolean("RUNTIME_WATCH_ROOT", true)
	xds := e.xdsFlags()

	switch configType := e.str("CONFIG_TYPE", "FILE"); strings.ToUpper(configType) {
	case "FILE":
		dir := filepath.Join(root, sub, app)
		e.set("config", dir, "RUNTIME_ROOT", "RUNTIME_SUBDIRECTORY", "RUNTIME_APPDIRECTORY")
		if twin, _ := e.lookup(envName("config")); twin == "" {
			if err := checkRuntimeDir(root, sub, app, ignoreDot, watchRoot); err != nil {
				e.errs = append(e.errs, err)
			}
		}
	case "GRPC_XDS_SOTW":
		for f, v := range xds {
			e.set(f, v.value, v.from...)
		}
		// -xds-server is what turns the client on: it must be there even
		// when CONFIG_GRPC_XDS_SERVER_URL keeps its default.
		e.from["xds-server"] = append(e.from["xds-server"], "CONFIG_TYPE")
	default:
		e.fail("CONFIG_TYPE", configType, "want FILE or GRPC_XDS_SOTW")
	}
}

// translated is a flag's value and the variables it came from.
type translated struct {
	value string
	from  []string
}

// xdsFlags reads the xDS client's variables into the flags they stand for.
func (e *upstreamEnv) xdsFlags() map[string]translated {
	out := map[string]translated{}
	for _, d := range dropInXDS {
		if v, ok := e.typed(d.env, d.kind, d.def); ok {
			out[d.flag] = translated{v, []string{d.env}}
		}
	}
	// The client certificate and CA count only with TLS on, as there.
	useTLS := e.boolean("CONFIG_GRPC_XDS_SERVER_USE_TLS", false)
	tlsFiles := []struct{ env, flag string }{
		{"CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "xds-tls-cert"},
		{"CONFIG_GRPC_XDS_CLIENT_TLS_KEY", "xds-tls-key"},
		{"CONFIG_GRPC_XDS_SERVER_TLS_CACERT", "xds-tls-ca"},
		{"CONFIG_GRPC_XDS_SERVER_TLS_SAN", "xds-tls-server-name"},
	}
	for _, f := range tlsFiles {
		if v, ok := e.value(f.env); ok && useTLS {
			out[f.flag] = translated{v, []string{f.env}}
		}
	}
	if useTLS {
		out["xds-tls"] = translated{"true", []string{"CONFIG_GRPC_XDS_SERVER_USE_TLS"}}
	}
	return out
}

// grpcTLS is GRPC_SERVER_USE_TLS with its certificate and key, and the
// client CA that makes it mutual: GRPC_CLIENT_TLS_CACERT, or Envoy
// Gateway's GRPC_SERVER_TLS_CA_CERT, which means the same. Without
// GRPC_SERVER_USE_TLS the files are ignored, as there.
func (e *upstreamEnv) grpcTLS() {
	on := e.boolean("GRPC_SERVER_USE_TLS", false)
	cert, key := e.str("GRPC_SERVER_TLS_CERT", ""), e.str("GRPC_SERVER_TLS_KEY", "")
	ca, egCA := e.str("GRPC_CLIENT_TLS_CACERT", ""), e.str("GRPC_SERVER_TLS_CA_CERT", "")
	san := e.str("GRPC_CLIENT_TLS_SAN", "")
	if !on {
		return
	}
	switch {
	case cert == "" || key == "":
		e.fail("GRPC_SERVER_USE_TLS", "true", "needs GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY, the server's certificate and key")
		return
	case ca != "" && egCA != "" && ca != egCA:
		e.fail("GRPC_SERVER_TLS_CA_CERT", egCA, "names another CA than GRPC_CLIENT_TLS_CACERT="+strconv.Quote(ca)+": set one")
		return
	}
	e.set("grpc-tls-cert", cert, "GRPC_SERVER_TLS_CERT")
	e.set("grpc-tls-key", key, "GRPC_SERVER_TLS_KEY")
	if ca == "" {
		ca = egCA
	}
	if ca != "" {
		e.set("grpc-tls-client-ca", ca, "GRPC_CLIENT_TLS_CACERT", "GRPC_SERVER_TLS_CA_CERT")
	}
	// As there, the SAN is checked only of a client certificate the CA
	// verified; without a client CA none is asked for, and the SAN does
	// nothing.
	if san != "" && ca != "" {
		e.set("grpc-tls-client-san", san, "GRPC_CLIENT_TLS_SAN")
	}
}

// redis is the Redis to count in: REDIS_SOCKET_TYPE, REDIS_TYPE and
// REDIS_URL in their forms, REDIS_AUTH and REDIS_SENTINEL_AUTH, REDIS_TLS
// with its CA, REDIS_TIMEOUT and CACHE_KEY_PREFIX.
func (e *upstreamEnv) redis() {
	socket := e.str("REDIS_SOCKET_TYPE", "unix")
	typ := e.str("REDIS_TYPE", "SINGLE")
	rawURL := e.str("REDIS_URL", upstreamRedisSocket)
	auth := e.str("REDIS_AUTH", "")
	sentinelAuth := e.str("REDIS_SENTINEL_AUTH", "")
	useTLS := e.boolean("REDIS_TLS", false)
	ca := e.str("REDIS_TLS_CACERT", "")
	// As there, the client certificate is used only with TLS on.
	if cert := e.str("REDIS_TLS_CLIENT_CERT", ""); cert != "" && useTLS {
		e.set("redis-tls-cert", cert, "REDIS_TLS_CLIENT_CERT")
	}
	if key := e.str("REDIS_TLS_CLIENT_KEY", ""); key != "" && useTLS {
		e.set("redis-tls-key", key, "REDIS_TLS_CLIENT_KEY")
	}
	e.poolBehavior()
	switch v := e.str("BACKEND_TYPE", "redis"); strings.ToLower(v) {
	case "redis":
	case "memcache":
		e.fail("BACKEND_TYPE", v, "envoy-rls counts in Redis (or its embedded store), not in memcache")
	default:
		e.fail("BACKEND_TYPE", v, "want redis")
	}
	if skip := e.boolean("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", false); skip && useTLS {
		e.set("redis-tls-skip-hostname", "true", "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION")
	}
	// REDIS_TIMEOUT bounds each Redis call there, as -store-timeout does
	// here: past it the decision is the failure mode's (there an error,
	// which Envoy's failure_mode_deny decides; here RLS_FAILURE_MODE,
	// allow by default, as Envoy's default allows). Unset, envoy-rls's
	// 50 ms stands instead of a 10 s wait on a Redis that does not answer.
	if v, ok := e.typed("REDIS_TIMEOUT", durationValue, ""); ok {
		if v == "0s" {
			e.fail("REDIS_TIMEOUT", v, "want a duration above zero: envoy-rls bounds every Redis call")
		} else {
			e.set("store-timeout", v, "REDIS_TIMEOUT")
		}
	}
	if prefix, ok := e.value("CACHE_KEY_PREFIX"); ok {
		if err := descriptors.CheckKeyPrefix(prefix); err != nil {
			e.fail("CACHE_KEY_PREFIX", prefix, err.Error())
		} else {
			e.set("redis-key-prefix", prefix, "CACHE_KEY_PREFIX")
		}
	}

	if user, pass, hasUser := strings.Cut(auth, ":"); auth != "" {
		if !hasUser {
			user, pass = "", auth
		}
		if user != "" {
			e.set("redis-username", user, "REDIS_AUTH")
		}
		e.set("redis-password", pass, "REDIS_AUTH")
	}

	unix := false
	switch strings.ToLower(socket) {
	case "tcp":
	case "unix":
		unix = true
	default:
		e.fail("REDIS_SOCKET_TYPE", socket, "want tcp or unix")
		return
	}
	switch strings.ToLower(typ) {
	case "single":
		e.singleRedis(rawURL, unix, useTLS, auth != "")
	case "sentinel", "cluster":
		if unix {
			e.fail("REDIS_SOCKET_TYPE", socket, "REDIS_TYPE="+typ+" reaches its nodes over tcp: want REDIS_SOCKET_TYPE=tcp")
			return
		}
		nodes := strings.Split(rawURL, ",")
		if strings.EqualFold(typ, "sentinel") {
			if len(nodes) < 2 || nodes[0] == "" {
				e.fail("REDIS_URL", rawURL, "want MASTER,HOST:PORT[,HOST:PORT...] for REDIS_TYPE=sentinel: the master's name, then the Sentinels")
				return
			}
			e.set("redis-sentinel-master", nodes[0], "REDIS_URL")
			nodes = nodes[1:]
			e.sentinelAuth(sentinelAuth)
		}
		addrs, ok := e.nodeAddrs(rawURL, nodes, typ)
		if !ok {
			return
		}
		flagName := "redis-cluster"
		if strings.EqualFold(typ, "sentinel") {
			flagName = "redis-sentinel"
		}
		e.set(flagName, strings.Join(addrs, ","), "REDIS_URL")
		if useTLS {
			e.set("redis-tls", "true", "REDIS_TLS")
		}
	default:
		e.fail("REDIS_TYPE", typ, "want single, sentinel or cluster (any case)")
		return
	}
	if useTLS && ca != "" {
		e.set("redis-tls-ca", ca, "REDIS_TLS_CACERT")
	}
}

// poolBehavior is REDIS_POOL_ON_EMPTY_BEHAVIOR: envoyproxy/ratelimit
// itself refuses CREATE and ERROR, and waits for a connection otherwise,
// as go-redis does.
func (e *upstreamEnv) poolBehavior() {
	if v, ok := e.value("REDIS_POOL_ON_EMPTY_BEHAVIOR"); ok {
		switch strings.ToUpper(v) {
		case "CREATE", "ERROR":
			e.fail("REDIS_POOL_ON_EMPTY_BEHAVIOR", v, "envoyproxy/ratelimit refuses it too: a full pool waits; want WAIT")
		}
	}
}

// singleRedis is REDIS_TYPE=single: a unix socket's path, or host:port
// (or a redis:// URL, which envoyproxy/ratelimit's client also takes).
func (e *upstreamEnv) singleRedis(rawURL string, unix, useTLS, hasAuth bool) {
	if unix {
		if useTLS {
			e.fail("REDIS_TLS", "true", "TLS needs REDIS_SOCKET_TYPE=tcp")
			return
		}
		if !filepath.IsAbs(rawURL) {
			e.fail("REDIS_URL", rawURL, "want the absolute path of Redis's unix socket for REDIS_SOCKET_TYPE=unix")
			return
		}
		e.set("redis-url", (&url.URL{Scheme: "unix", Path: rawURL}).String(), "REDIS_URL", "REDIS_SOCKET_TYPE")
		return
	}
	u, ok := e.redisURL(rawURL)
	if !ok {
		return
	}
	if useTLS {
		u.Scheme = "rediss"
	}
	if hasAuth {
		u.User = nil // REDIS_AUTH wins over the URL's, as there
	}
	e.set("redis-url", u.String(), "REDIS_URL", "REDIS_TLS")
}

// redisURL parses host:port or redis://[user:pass@]host:port[/db] (the
// query's username, password and db too, as envoyproxy/ratelimit's client
// reads them) into a redis:// URL.
func (e *upstreamEnv) redisURL(raw string) (*url.URL, bool) {
	const want = "want HOST:PORT or redis://[USER:PASSWORD@]HOST:PORT[/DB] (REDIS_TLS=true for TLS)"
	if !strings.Contains(raw, "://") {
		if !validHostPort(raw) {
			e.fail("REDIS_URL", raw, want)
			return nil, false
		}
		return &url.URL{Scheme: "redis", Host: raw}, true
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "redis" || !validHostPort(u.Host) {
		e.fail("REDIS_URL", raw, want)
		return nil, false
	}
	q := u.Query()
	db := strings.TrimPrefix(u.Path, "/")
	if db == "" {
		db = q.Get("db")
	}
	if db != "" {
		if _, err := strconv.Atoi(db); err != nil {
			e.fail("REDIS_URL", raw, want+"; the database is a number")
			return nil, false
		}
	}
	user := u.User
	if user == nil && (q.Get("username") != "" || q.Get("password") != "") {
		user = url.UserPassword(q.Get("username"), q.Get("password"))
	}
	out := &url.URL{Scheme: "redis", Host: u.Host, User: user}
	if db != "" {
		out.Path = "/" + db
	}
	return out, true
}

// nodeAddrs checks the host:port (or redis://host:port) of a cluster's
// nodes or of the Sentinels.
func (e *upstreamEnv) nodeAddrs(raw string, nodes []string, typ string) ([]string, bool) {
	var addrs []string
	for _, n := range nodes {
		n = strings.TrimPrefix(strings.TrimSpace(n), "redis://")
		if !validHostPort(n) {
			form := "HOST:PORT,HOST:PORT..."
			if strings.EqualFold(typ, "sentinel") {
				form = "MASTER,HOST:PORT[,HOST:PORT...]"
			}
			e.fail("REDIS_URL", raw, "want "+form+" for REDIS_TYPE="+typ+" (credentials in REDIS_AUTH)")
			return nil, false
		}
		addrs = append(addrs, n)
	}
	return addrs, true
}

// sentinelAuth is REDIS_SENTINEL_AUTH, the Sentinels' own credentials:
// PASSWORD or USER:PASSWORD.
func (e *upstreamEnv) sentinelAuth(auth string) {
	if auth == "" {
		return
	}
	if user, pass, ok := strings.Cut(auth, ":"); ok {
		if user != "" {
			e.set("redis-sentinel-username", user, "REDIS_SENTINEL_AUTH")
		}
		auth = pass
	}
	e.set("redis-sentinel-password", auth, "REDIS_SENTINEL_AUTH")
}

// validHostPort reports whether s is host:port with a numeric port.
func validHostPort(s string) bool {
	host, port, err := net.SplitHostPort(s)
	if err != nil || host == "" {
		return false
	}
	n, err := strconv.Atoi(port)
	return err == nil && n > 0 && n <= 65535
}

// stats is USE_STATSD, which envoy-rls cannot honour when asked for
// (unset, its default true pushes to a statsd that envoy-rls does not
// feed; that changes no decision), and USE_PROMETHEUS with its address,
// path and statsd mapper, served as envoyproxy/ratelimit serves them.
func (e *upstreamEnv) stats() {
	if v, ok := e.value("USE_STATSD"); ok {
		if b, err := strconv.ParseBool(v); err != nil {
			e.fail("USE_STATSD", v, boolValue.want())
		} else if b {
			e.fail("USE_STATSD", v, "envoy-rls has no statsd sink; set USE_STATSD=false and USE_PROMETHEUS=true")
		}
	}
	prom := e.boolean("USE_PROMETHEUS", false)
	addr := e.str("PROMETHEUS_ADDR", ":9090")
	path := e.str("PROMETHEUS_PATH", "/metrics")
	mapper := e.str("PROMETHEUS_MAPPER_YAML", "")
	if !prom {
		return
	}
	if v, ok := e.value("PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS"); ok && !sameSetting(v, "false") {
		e.fail("PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS", v, "envoy-rls reports the response time in seconds only")
	}
	e.set("prometheus-addr", addr, "USE_PROMETHEUS", "PROMETHEUS_ADDR")
	e.set("prometheus-path", path, "PROMETHEUS_PATH")
	if mapper != "" {
		e.set("prometheus-mapper-yaml", mapper, "PROMETHEUS_MAPPER_YAML")
	}
}

// localCache is LOCAL_CACHE_SIZE_IN_BYTES, envoyproxy/ratelimit's cache of
// the keys found over their limit, which answers them without Redis until
// their window ends. envoy-rls's over-limit cache plays that part; it holds
// refused keys until the reset Redis gave, with no size in bytes, so the
// size only turns it on (0, the default there, turns it off).
func (e *upstreamEnv) localCache() {
	if v, ok := e.typed("LOCAL_CACHE_SIZE_IN_BYTES", sizeValue, "0"); ok {
		e.set("over-limit-cache", strconv.FormatBool(v != "0"), "LOCAL_CACHE_SIZE_IN_BYTES")
	}
}

// checkRuntimeDir refuses a runtime directory that holds a file
// envoyproxy/ratelimit would load and envoy-rls would not, so that no
// limit is silently left out. goruntime loads every file under
// RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY, recursively,
// skipping names that start with a dot when RUNTIME_IGNOREDOTFILES is
// true; with RUNTIME_WATCH_ROOT true, also the files of
// RUNTIME_ROOT/RUNTIME_SUBDIRECTORY whose names start with the application
// directory's and a dot. envoy-rls loads the *.yaml and *.yml files of the
// application directory (config.DirFiles), not its subdirectories, and
// never a name that starts with a dot; the kubelet's own entries (..data
// and its timestamped targets), which goruntime would load a second time
// without RUNTIME_IGNOREDOTFILES, are not reported. A directory that does
// not exist is left to the loader to report.
func checkRuntimeDir(root, sub, app string, ignoreDot, watchRoot bool) error {
	dir := filepath.Join(root, sub, app)
	files, err := config.DirFiles(dir)
	if err != nil {
		return nil // the loader reports it, with the same words as ever
	}
	loaded := map[string]bool{}
	for _, f := range files {
		loaded[f] = true
	}
	stray := func(path string) error {
		return fmt.Errorf("%s: envoyproxy/ratelimit would load this file, but envoy-rls loads only the *.yaml and *.yml files directly in %s (RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY), skipping names that start with a dot: rename it or move it out", path, dir)
	}
	skip := func(name string) bool {
		return strings.HasPrefix(name, "..") || ignoreDot && strings.HasPrefix(name, ".")
	}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return nil // unreadable there too: goruntime warns and goes on
		case path == dir:
			return nil
		case skip(d.Name()) && d.IsDir():
			return filepath.SkipDir
		case skip(d.Name()) || d.IsDir() || loaded[path]:
			return nil
		}
		if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
			return nil // a symlink to a directory or to nothing: unreadable there too
		}
		return stray(path)
	})
	if err != nil || !watchRoot {
		return err
	}
	entries, _ := os.ReadDir(filepath.Join(root, sub))
	for _, en := range entries {
		if path := filepath.Join(root, sub, en.Name()); strings.HasPrefix(en.Name(), app+".") && !skip(en.Name()) {
			if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() {
				return stray(path)
			}
		}
	}
	return nil
}

// environment checks the translated flags against the server's and
// returns the lookup that fills them: an RLS_ variable that is really set
// wins, and drops the translated flags of its group (dropInRivals); a
// translated value equal to the flag's default is left out. A flag that
// this build lacks is an error naming the variables that need it, unless
// none of them is set.
func (e *upstreamEnv) environment() (func(string) (string, bool), error) {
	// A scratch command line, whose values check a translated value as
	// the flag would, so that a refusal names the variable it came from.
	cl := serverFlags(&options{})
	cl.check()
	fs := cl.fs
	real := func(flagName string) bool {
		v, ok := e.lookup(envName(flagName))
		return ok && (v != "" || emptyMeansSomething[flagName])
	}
	values := map[string]string{}
	var errs []error
	for name, v := range e.flags {
		f := fs.Lookup(name)
		if f == nil {
			var set []string
			for _, from := range e.from[name] {
				if e.isSet(from) {
					set = append(set, from)
				}
			}
			if len(set) > 0 {
				errs = append(errs, fmt.Errorf("%s: this build of envoy-rls cannot honour it yet (it has no -%s)", strings.Join(set, ", "), name))
			}
			continue
		}
		if v == f.DefValue || rivalSet(name, real) {
			continue
		}
		if err := f.Value.(*checkedValue).set(v); err != nil {
			from := e.from[name]
			for _, src := range from {
				if e.isSet(src) {
					from = []string{src}
					break
				}
			}
			errs = append(errs, upstreamError(strings.Join(from, ", "), v, err.Error()))
			continue
		}
		values[envName(name)] = v
	}
	if len(errs) > 0 {
		// From a map: sorted, so that the lines come out the same each run.
		slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
		return nil, errors.Join(errs...)
	}
	twins := map[string]string{}
	fs.VisitAll(func(f *flag.Flag) { twins[envName(f.Name)] = f.Name })
	return func(name string) (string, bool) {
		if flagName, twin := twins[name]; twin && real(flagName) {
			return e.lookup(name)
		}
		v, ok := values[name]
		return v, ok
	}, nil
}

// rivalSet reports whether an RLS_ variable of flagName's group, itself
// included, is really set.
func rivalSet(flagName string, real func(string) bool) bool {
	if real(flagName) {
		return true
	}
	for _, group := range dropInRivals {
		in := false
		for _, f := range group {
			in = in || f == flagName
		}
		if !in {
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
