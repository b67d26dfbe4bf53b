package accuracy

import (
	"fmt"
	"io"
	"strings"

	"github.com/envoy-rls/envoy-rls/internal/trace"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// HotKeyRow is the place in every table kept for the hot-key mode
// (sync_interval): it needs Redis and a hot key (1,000 a second), so its
// figures are measured by a run of their own (RunHotKey,
// accuracy-hotkey.md) and the row points there rather than give a figure.
const HotKeyRow = "| hot-key mode (`sync_interval`) | *measured on Redis at 1,000 a second: see [accuracy-hotkey.md](accuracy-hotkey.md)* | | | | | |\n"

// shapeTitles say in words what each kind of trace is.
var shapeTitles = map[trace.Kind]string{
	trace.Poisson: "Poisson arrivals at %g× the threshold",
	trace.OnOff:   "on/off bursts, %g× the threshold on average",
	trace.Edge:    "an adversary bursting at window edges, %g× the threshold on average",
}

// WriteMarkdown writes the report's tables: one per trace, one row per
// algorithm, then the decided-differently share against load.
func (r *Report) WriteMarkdown(w io.Writer) error {
	c := r.Config
	var b strings.Builder
	fmt.Fprintf(&b, "Seed %d, %d sources, %s of traffic each, threshold %d per %s (buckets' burst %d).\n\n",
		c.Seed, c.Sources, c.Duration, c.Requests, c.Period, c.Requests)
	for i, s := range c.Shapes {
		fmt.Fprintf(&b, "#### `%s`: %s\n\n", s, fmt.Sprintf(shapeTitles[s.Kind], s.Load))
		b.WriteString("| algorithm | requests | allowed | decided differently | mean rate error | false-negative sources (worst overshoot) | false-positive sources |\n")
		b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		for a, alg := range c.Algorithms {
			f := r.Figures[i][a]
			fmt.Fprintf(&b, "| %s | %s | %.2f %% | %.4f %% | %s | %s | %d of %d |\n", alg, thousands(f.Requests),
				100*f.AllowedShare(), 100*f.DiffShare(), rateError(alg, f), falseNegatives(f), f.FalsePositive, f.Sources)
		}
		b.WriteString(HotKeyRow + "\n")
	}
	r.writeLoadTable(&b)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeLoadTable writes the decided-differently share of each algorithm
// against the Poisson loads, the table beside the load chart.
func (r *Report) writeLoadTable(b *strings.Builder) {
	var cols []int
	for i, s := range r.Config.Shapes {
		if s.Kind == trace.Poisson {
			cols = append(cols, i)
		}
	}
	if len(cols) == 0 {
		return
	}
	b.WriteString("#### Decided differently against load (Poisson)\n\n| algorithm |")
	for _, i := range cols {
		fmt.Fprintf(b, " %g× |", r.Config.Shapes[i].Load)
	}
	b.WriteString("\n| --- |" + strings.Repeat(" ---: |", len(cols)) + "\n")
	for a, alg := range r.Config.Algorithms {
		fmt.Fprintf(b, "| %s |", alg)
		for _, i := range cols {
			fmt.Fprintf(b, " %.4f %% |", 100*r.Figures[i][a].DiffShare())
		}
		b.WriteString("\n")
	}
	b.WriteString("| hot-key mode (`sync_interval`) |" + strings.Repeat(" *see accuracy-hotkey.md* |", len(cols)) + "\n")
}

// rateError is the mean rate error of a window or log; a bucket's state is
// not a count over the period, so the figure would compare unlike things.
func rateError(a limits.Algorithm, f Figures) string {
	if a == limits.TokenBucket || a == limits.LeakyBucket {
		return "n/a"
	}
	return fmt.Sprintf("%.2f %%", 100*f.MeanRateError())
}

func falseNegatives(f Figures) string {
	if f.FalseNegative == 0 {
		return fmt.Sprintf("0 of %d", f.Sources)
	}
	return fmt.Sprintf("%d of %d (+%.0f %%)", f.FalseNegative, f.Sources, 100*f.WorstOvershoot())
}

// thousands renders n with thin separators: 1,234,567.
func thousands(n int64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
