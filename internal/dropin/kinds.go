package dropin

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
)

// kind is how a variable's value is checked, as envoyproxy/ratelimit
// parses it (kelseyhightower/envconfig), and written in the form of the
// server's flags (a duration as time.Duration.String, a boolean as true or
// false), so that it can be compared with a flag's default.
type kind struct {
	// name says what the values are, in docs/environment.md.
	name string
	// check returns the value in the flags' form, or why it is refused
	// ("want a port number, 0 to 65535").
	check func(v string) (string, error)
}

// asFlag is the kind of a variable whose value is the flag's own, checked
// by the flag it becomes when the environment is checked against the
// server's flags, and refused there in the variable's name.
var asFlag = kind{name: "as its flag takes it", check: func(v string) (string, error) { return v, nil }}

var (
	text    = kind{"string", func(v string) (string, error) { return v, nil }}
	boolean = kind{"boolean", func(v string) (string, error) {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return "", errors.New("want true or false")
		}
		return strconv.FormatBool(b), nil
	}}
	duration = kind{"duration", func(v string) (string, error) {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return "", errors.New("want a duration such as 500ms, 10s or 1h, not negative")
		}
		return d.String(), nil
	}}
	size   = wholeNumber("whole number", math.MaxInt32, "want a whole number, 0 or more")
	port   = wholeNumber("port", 65535, "want a port number, 0 to 65535")
	number = decimal("number", math.Inf(-1), math.Inf(1), "want a number")
	ratio  = decimal("ratio", 0, 1, "want a number from 0 to 1")
	pairs  = kind{"key:value,…", func(v string) (string, error) {
		for _, pair := range strings.Split(v, ",") {
			if k, _, ok := strings.Cut(pair, ":"); !ok || k == "" {
				return "", errors.New("want key:value pairs separated by commas")
			}
		}
		return v, nil
	}}
	// tagPairs is EXTRA_TAGS' (a map there): each pair one colon, the key
	// not empty.
	tagPairs = kind{"key:value,…", func(v string) (string, error) {
		for _, pair := range strings.Split(v, ",") {
			if k, val, ok := strings.Cut(pair, ":"); !ok || k == "" || strings.Contains(val, ":") {
				return "", errors.New("want key:value pairs separated by commas, one colon each")
			}
		}
		return v, nil
	}}
	// interval is STATS_FLUSH_INTERVAL's: a duration above zero (there
	// zero stops the start too).
	interval = kind{"duration", func(v string) (string, error) {
		d, err := duration.check(v)
		if err == nil && d == "0s" {
			err = errors.New("want a duration above zero, such as 10s")
		}
		return d, err
	}}
	// storeTimeout is REDIS_TIMEOUT's: a duration, and one above zero,
	// since envoy-rls bounds every Redis call.
	storeTimeout = kind{"duration", func(v string) (string, error) {
		d, err := duration.check(v)
		if err == nil && d == "0s" {
			err = errors.New("want a duration above zero: envoy-rls bounds every Redis call")
		}
		return d, err
	}}
	// samplingRate is TRACING_SAMPLING_RATE: any number, as there, where
	// the sampler takes one above 1 as 1 and one below 0 as 0.
	samplingRate = kind{"number", func(v string) (string, error) {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return "", errors.New("want a number, from 0 (no trace started here is sampled) to 1 (all are)")
		}
		return strconv.FormatFloat(min(max(f, 0), 1), 'g', -1, 64), nil
	}}
	keyPrefix = kind{"key prefix", func(v string) (string, error) {
		return v, descriptors.CheckKeyPrefix(v)
	}}
	// logLevel is logrus's level names, any case, written as zap's.
	logLevel = kind{"logrus level", func(v string) (string, error) {
		level, ok := map[string]string{
			"trace": "debug", "debug": "debug", "info": "info", "warn": "warn", "warning": "warn",
			"error": "error", "fatal": "fatal", "panic": "panic",
		}[strings.ToLower(v)]
		if !ok {
			return "", errors.New("want trace, debug, info, warn, error, fatal or panic (any case)")
		}
		return level, nil
	}}
	// logFormat is json, any case, or text for anything else, as
	// envoyproxy/ratelimit reads it.
	logFormat = kind{"json or text", func(v string) (string, error) {
		if strings.EqualFold(v, "json") {
			return "json", nil
		}
		return "console", nil
	}}
	configType = word("want FILE or GRPC_XDS_SOTW", "FILE", "GRPC_XDS_SOTW")
	redisType  = word("want single, sentinel or cluster (any case)", "single", "sentinel", "cluster")
	socketType = word("want tcp or unix", "tcp", "unix")
	backend    = word("want redis", "redis", "memcache")
	// poolBehavior is REDIS_POOL_ON_EMPTY_BEHAVIOR: envoyproxy/ratelimit
	// itself refuses CREATE and ERROR, and waits for a connection
	// otherwise, as go-redis does.
	poolBehavior = kind{"word", func(v string) (string, error) {
		switch v = strings.ToUpper(v); v {
		case "CREATE", "ERROR":
			return "", errors.New("envoyproxy/ratelimit refuses it too: a full pool waits; want WAIT")
		}
		return v, nil
	}}
)

// wholeNumber is the kind of the whole numbers from 0 to most.
func wholeNumber(name string, most int64, want string) kind {
	return kind{name, func(v string) (string, error) {
		n, err := strconv.ParseInt(v, 0, 64)
		if err != nil || n < 0 || n > most {
			return "", errors.New(want)
		}
		return strconv.FormatInt(n, 10), nil
	}}
}

// decimal is the kind of the numbers from least to most.
func decimal(name string, least, most float64, want string) kind {
	return kind{name, func(v string) (string, error) {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < least || f > most {
			return "", errors.New(want)
		}
		return strconv.FormatFloat(f, 'g', -1, 64), nil
	}}
}

// word is the kind of one of words, in any case, written as the table
// writes it.
func word(want string, words ...string) kind {
	return kind{strings.Join(words, ", "), func(v string) (string, error) {
		for _, w := range words {
			if strings.EqualFold(v, w) {
				return w, nil
			}
		}
		return "", errors.New(want)
	}}
}

// sameSetting reports whether a value in the flags' form says the same as
// want, a value as the table writes it: equal booleans, or equal words in
// any case.
func sameSetting(v, want string) bool {
	if b, err := strconv.ParseBool(v); err == nil {
		w, werr := strconv.ParseBool(want)
		return werr == nil && b == w
	}
	return strings.EqualFold(v, want)
}
