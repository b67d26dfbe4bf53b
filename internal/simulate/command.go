package simulate

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/envoy-rls/envoy-rls/internal/cli"
	"github.com/envoy-rls/envoy-rls/internal/trace"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// CommandArgs is the usage of `envoy-rls simulate` after its name.
const CommandArgs = "-limits PATH [-compare PATH] -domain DOMAIN (-trace CSV | -shape KIND[:LOAD] -rate N [-period DUR] [-duration DUR] [-seed N]) [-bucket DUR] [-svg OUT.svg]"

const about = `Replays a trace of requests through the limits of DOMAIN and tells, per
rule, how many were admitted and refused in each time bucket: a Markdown
table on stdout and, with -svg, a chart. Each request is decided by the
service the server runs, on its embedded store, with a clock set to the
request's time: what the table shows is what those limits would have done
to that traffic. With -compare, a second limits file replays the same
trace and its counts stand beside the first's (sliding_window against
token_bucket, 100 against 150 a minute).

The trace is a CSV file (-trace), one request a line, in time order:
  timestamp,key=value;key2=value2
the timestamp RFC 3339 or Unix seconds; blank lines and lines starting
with # are skipped. Or it is a seeded shape (-shape), the same requests for
the same seed: poisson (independent arrivals), onoff (bursts and
silences) or edge (an adversary bursting at window edges), at LOAD times
-rate requests per -period (poisson:1.1 is 10 % over), from -sources
sources whose descriptors are -key=0, -key=1, ...

The flags that change how the server loads limits (-default-algorithm,
-count-refused, -merge-domains, -max-delay) take its values, and its RLS_
environment variables, so that run beside the server the replay decides
as it does.

Exit 0 when replayed, 1 when the chart cannot be written, 2 on a usage
error, a limits file that does not load, a domain it does not hold, or a
trace line that is malformed or out of order (the error names the line).
`

// flags are the command's settings.
type flags struct {
	limits, compare, domain, trace, shape, svg, key string
	// load is what loading a limits file depends on, as the server's
	// flags of the same names set it.
	load                     config.Options
	algorithm                string
	rate                     int64
	sources                  int
	period, duration, bucket time.Duration
	seed                     uint64
}

// Command is `envoy-rls simulate`, reading the server's RLS_ twins of the
// flags that change how the limits load through lookupEnv.
func Command(args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int {
	cl := cli.New("envoy-rls simulate", CommandArgs, about)
	var f flags
	cl.FS.StringVar(&f.limits, "limits", "", "the limits file or directory to replay the trace through")
	cl.FS.StringVar(&f.compare, "compare", "", "a second limits file or directory, replayed beside -limits")
	cl.FS.StringVar(&f.domain, "domain", "", "the domain the trace's requests are for")
	cl.FS.StringVar(&f.trace, "trace", "", "the trace: a CSV file of timestamp,key=value;key=value lines")
	cl.FS.StringVar(&f.shape, "shape", "", "the trace: a seeded shape, KIND[:LOAD] with KIND poisson, onoff or edge and LOAD the mean rate over -rate per -period (default 1)")
	cl.FS.Int64Var(&f.rate, "rate", 0, "with -shape: the requests per -period that load 1 sends, from each source (the limit to measure against)")
	cl.FS.DurationVar(&f.period, "period", time.Minute, "with -shape: the period of -rate, whose edges the edge shape bursts at")
	cl.FS.DurationVar(&f.duration, "duration", 5*time.Minute, "with -shape: how long the trace lasts")
	cl.FS.IntVar(&f.sources, "sources", 1, "with -shape: how many sources send, each at the shape's rate")
	cl.FS.StringVar(&f.key, "key", trace.SourceKey, "with -shape: the descriptor key of the sources")
	cl.FS.Uint64Var(&f.seed, "seed", 1, "with -shape: the seed; the same seed gives the same trace")
	cl.FS.DurationVar(&f.bucket, "bucket", time.Second, "the time each row of the table and point of the chart counts")
	cl.FS.StringVar(&f.svg, "svg", "", "write the chart to this SVG file")
	cl.FS.StringVar(&f.algorithm, "default-algorithm", limits.Algorithm(0).String(), "the server's -default-algorithm: the algorithm of a limit that names none")
	cl.FS.BoolVar(&f.load.CountRefused, "count-refused", false, "the server's -count-refused")
	cl.FS.BoolVar(&f.load.MergeDomains, "merge-domains", false, "the server's -merge-domains")
	cl.FS.DurationVar(&f.load.MaxDelay, "max-delay", config.DefaultMaxDelay, "the server's -max-delay: the longest a leaky bucket queues a request")
	// The server's settings come from its RLS_ twins too: run beside it,
	// the replay loads the limits as it does.
	cl.Env = true
	cl.NoEnv = map[string]bool{}
	for _, own := range []string{"limits", "compare", "domain", "trace", "shape", "rate", "period", "duration", "sources", "key", "seed", "bucket", "svg"} {
		cl.NoEnv[own] = true
	}
	rest, err := cl.Parse(args, lookupEnv)
	if err == nil && len(rest) > 0 {
		err = fmt.Errorf("unexpected argument %q: the files are -limits and -trace", rest[0])
	}
	if err == nil {
		err = f.check()
	}
	if err != nil {
		return cl.Failed(err, stdout, stderr)
	}
	runs, err := f.replay()
	if err != nil {
		fmt.Fprintln(stderr, "envoy-rls simulate:", err)
		return 2
	}
	return write(f, runs, stdout, stderr)
}

// check refuses flags that name no run.
func (f *flags) check() error {
	switch {
	case f.limits == "":
		return errors.New("-limits is required")
	case f.domain == "":
		return errors.New("-domain is required: the domain the trace's requests are for")
	case (f.trace == "") == (f.shape == ""):
		return errors.New("give one trace: -trace CSV or -shape NAME")
	case f.bucket <= 0:
		return errors.New("-bucket must be positive")
	case f.shape != "" && f.rate <= 0:
		return errors.New("-shape needs -rate, the requests per -period of load 1, above 0")
	case f.shape != "" && f.key == "":
		return errors.New("-key must not be empty")
	}
	a, err := limits.ParseAlgorithm(f.algorithm)
	if err != nil {
		return fmt.Errorf("-default-algorithm: %w", err)
	}
	f.load.DefaultAlgorithm = a
	return nil
}

// events reads or generates the trace. A shape's error is the flags'
// (exit 2, as a usage error), as is a CSV file's.
func (f *flags) events() (trace.Trace, error) {
	if f.shape != "" {
		shape, err := trace.ParseShape(f.shape)
		if err != nil {
			return trace.Trace{}, err
		}
		c := trace.Config{Shape: shape, Requests: f.rate, Period: f.period, Sources: f.sources, Duration: f.duration, Seed: f.seed}
		t, err := c.Generate()
		if err != nil {
			return trace.Trace{}, err
		}
		for _, d := range t.Sources {
			d[0].Key = f.key
		}
		return t, nil
	}
	file, err := os.Open(f.trace)
	if err != nil {
		return trace.Trace{}, err
	}
	defer file.Close() //nolint:errcheck // read only
	t, err := trace.ReadCSV(file)
	if err != nil {
		return trace.Trace{}, fmt.Errorf("%s: %w", f.trace, err)
	}
	return t, nil
}

// replay runs the trace through -limits, and -compare when given.
func (f *flags) replay() ([]Labelled, error) {
	events, err := f.events()
	if err != nil {
		return nil, err
	}
	var runs []Labelled
	for _, path := range []string{f.limits, f.compare} {
		if path == "" {
			continue
		}
		cfg, err := f.load.Load(path)
		if err != nil {
			return nil, err
		}
		res, err := Run(cfg, f.domain, events, f.bucket)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if f.shape != "" {
			res.Extend(int((f.duration + f.bucket - 1) / f.bucket))
		}
		runs = append(runs, Labelled{Label: filepath.Base(path), Result: res})
	}
	if len(runs) == 2 && runs[0].Label == runs[1].Label { // a/limits.yaml and b/limits.yaml
		runs[0].Label, runs[1].Label = f.limits, f.compare
	}
	return runs, nil
}

// write prints the table, and draws the chart when -svg asks for it.
func write(f flags, runs []Labelled, stdout, stderr io.Writer) int {
	r := runs[0]
	fmt.Fprintf(stdout, "domain %s, buckets of %s from %s", f.domain, r.Bucket, r.Start.UTC().Format(time.RFC3339Nano))
	same := !slices.ContainsFunc(runs, func(o Labelled) bool { return o.Unmatched != r.Unmatched })
	for _, run := range runs {
		switch {
		case run.Unmatched == 0:
		case same:
			fmt.Fprintf(stdout, "; %d of the trace's requests matched no limit", run.Unmatched)
		default:
			fmt.Fprintf(stdout, "; %d matched no limit of %s", run.Unmatched, run.Label)
		}
		if same {
			break
		}
	}
	fmt.Fprint(stdout, "\n\n")
	WriteTable(stdout, runs) //nolint:errcheck // nothing to do about a closed stdout
	if f.svg == "" {
		return 0
	}
	var b bytes.Buffer
	title := fmt.Sprintf("domain %s: admitted and refused per %s", f.domain, r.Bucket)
	if err := WriteChart(&b, runs, title); err != nil {
		fmt.Fprintln(stderr, "envoy-rls simulate:", err)
		return 1
	}
	if err := os.WriteFile(f.svg, b.Bytes(), 0o644); err != nil {
		fmt.Fprintln(stderr, "envoy-rls simulate:", err)
		return 1
	}
	return 0
}
