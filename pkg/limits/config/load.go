package config

import (
	"errors"
	"os"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// DefaultMaxDelay is the default of the -max-delay flag: the longest wait a
// leaky_bucket may impose.
const DefaultMaxDelay = time.Second

// Options are the service settings that a limits file is checked against.
// The zero value is DefaultOptions.
type Options struct {
	// MaxDelay is the longest a leaky_bucket may delay a request (the
	// -max-delay flag): a leaky_bucket whose worst wait, burst ×
	// period / requests_per_unit, is longer is refused. Zero (or less)
	// means DefaultMaxDelay.
	MaxDelay time.Duration
	// DefaultAlgorithm is the algorithm of a limit that names none:
	// sliding_window (the zero value) for envoy-rls's own files,
	// fixed_window for envoyproxy/ratelimit's meaning (-default-algorithm).
	// A limit that comes over xDS never names one. A limit whose modifier
	// has an algorithm of its own (limits.DefaultAlgorithm) takes that one
	// whatever this says.
	DefaultAlgorithm limits.Algorithm
	// CountRefused is the count_refused of a limit that does not set it
	// (-count-refused): off, only allowed hits consume, envoy-rls's rule;
	// on, every hit counts, refused or not, as envoyproxy/ratelimit counts.
	CountRefused bool
	// MergeDomains lets Load join a domain that several files define
	// (envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG) instead of refusing it:
	// the domain's top-level descriptors are those of its files, in the
	// order Load reads them, and a top-level descriptor that two files
	// both define (the same key and value) is an error naming both places,
	// as envoyproxy/ratelimit refuses it; descriptors below the top level
	// are never merged. The Domain's File is then its first file.
	MergeDomains bool
	// EmptyDir lets Load read a directory without limits files as a
	// config with no domains, where every request is allowed, instead of
	// refusing it: envoyproxy/ratelimit's runtime directory (a ConfigMap
	// with no keys yet) means that, and a drop-in must not stop its start
	// on it. Off, an empty directory is an error, since a -config that
	// names the wrong directory would otherwise lift every limit silently.
	EmptyDir bool
}

// DefaultOptions are the options of Load and Parse, the flags' defaults.
func DefaultOptions() Options {
	return Options{MaxDelay: DefaultMaxDelay}
}

// maxDelay is o.MaxDelay with its default applied.
func (o Options) maxDelay() time.Duration {
	if o.MaxDelay <= 0 {
		return DefaultMaxDelay
	}
	return o.MaxDelay
}

// Load reads the limits files at path into a Config. path is one file, or a
// directory whose *.yaml and *.yml files are all read, in name order. The
// directory is not searched recursively, and names starting with a dot are
// skipped: a Kubernetes ConfigMap volume holds every file twice, once
// through the top-level symlink and once inside the ..data directory it
// points into, and ..data and its timestamped targets start with dots.
// Symlinks to files are followed.
//
// Each file holds one domain; a domain defined in two files is an error
// naming both (unless Options.MergeDomains), and so is a directory without
// limits files (unless Options.EmptyDir). Every error is an *Error. Load checks the files against
// DefaultOptions.
func Load(path string) (*Config, error) {
	return DefaultOptions().Load(path)
}

// Load is the package's Load, checking the files against o.
func (o Options) Load(path string) (*Config, error) {
	files, err := limitsFiles(path, o.EmptyDir)
	if err != nil {
		return nil, err
	}
	j := o.joiner(len(files))
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, fileError(file, err)
		}
		d, line, err := o.parse(file, data)
		if err != nil {
			return nil, err
		}
		if err := j.add(d, line); err != nil {
			return nil, err
		}
	}
	if len(files) != 1 || files[0] != path {
		j.c.NotLoaded = NotLoaded(path)
	}
	return j.c, nil
}

// topLevel records where each top-level descriptor of each domain was
// defined, so that merging domains can name both places of a duplicate.
type topLevel map[string]map[[2]string]string

// add records d's top-level descriptors, or returns the error for the
// first one that an earlier file of the domain already defines.
func (t topLevel) add(d *Domain) error {
	seen := t[d.Name]
	if seen == nil {
		seen = make(map[[2]string]string)
		t[d.Name] = seen
	}
	for _, desc := range d.Descriptors {
		id := [2]string{desc.Key, desc.Value}
		if at, dup := seen[id]; dup {
			return &Error{File: d.File, Line: desc.Line, Word: compositeKey(d.Name, desc.Key, desc.Value),
				Msg: "duplicate descriptor of a merged domain, first in " + at}
		}
		seen[id] = place(d.File, desc.Line)
	}
	return nil
}

// limitsFiles lists the files Load reads for path: path itself, or the
// directory's DirFiles, of which there must be at least one unless
// emptyDir.
func limitsFiles(path string, emptyDir bool) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fileError(path, err)
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	files, err := DirFiles(path)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 && !emptyDir {
		return nil, &Error{File: path, Msg: "no limits files (*.yaml or *.yml) in the directory"}
	}
	return files, nil
}

// Parse reads the contents of one limits file; file names it in errors and
// in Domain.File. Every error is an *Error.
//
// The file is one YAML document holding one domain; empty (or null)
// documents around it, such as after a trailing ---, are ignored. The
// model is checked in full: unknown fields, duplicates, values of the wrong
// kind and limits this build cannot enforce yet are errors, never silently
// dropped limits.
//
// In the model, a rule that is not unlimited has a Limit that passes
// limits.Limit.Validate, with Period = unit × unit_multiplier (1 unless
// given), Burst = requests_per_unit for a token bucket without a burst (0
// for a leaky bucket without one), and CountRefused as the rule's; a leaky
// bucket's MaxWait is at most the options' MaxDelay. An unlimited rule has a
// zero Limit, Unit and UnitMultiplier. A descriptor's Rules are its
// rate_limit, or its rate_limits list in order: a list holds no unlimited
// rule and no two rules with the same algorithm, requests, period and burst.
// Descriptors keep file order, since wildcards are tried in that order.
//
// Parse checks the file against DefaultOptions.
func Parse(file string, data []byte) (*Domain, error) {
	return DefaultOptions().Parse(file, data)
}

// Parse is the package's Parse, checking the file against o.
func (o Options) Parse(file string, data []byte) (*Domain, error) {
	d, _, err := o.parse(file, data)
	if err != nil {
		return nil, err
	}
	return d, nil
}

// parse is Parse, also returning the line of the domain field.
func (o Options) parse(file string, data []byte) (*Domain, int, error) {
	raw, err := decodeYAML(data)
	if err != nil {
		return nil, 0, inFile(file, err)
	}
	d, err := o.validator().domain(file, raw)
	if err != nil {
		return nil, 0, inFile(file, err)
	}
	return d, raw.name.at.key, nil
}

func (o Options) validator() validator {
	return validator{maxDelay: o.maxDelay(), algorithm: o.DefaultAlgorithm, countRefused: o.CountRefused}
}

// inFile completes an error of a source's decoding or of the validator,
// which do not know the file's name, with file.
func inFile(file string, err error) *Error {
	e, ok := errors.AsType[*Error](err)
	if !ok {
		e = &Error{Msg: err.Error(), err: err}
	}
	e.File = file
	return e
}
