package simulate

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Labelled is one limits file's replay, labelled for the table and the chart
// (the file's name).
type Labelled struct {
	Label string
	*Result
}

// WriteTable writes the runs' counts as one Markdown table (plain text
// that reads as well unrendered): a row per bucket and rule, the
// admitted and refused of each run side by side, then a total per rule.
// The runs replayed the same trace, so they share their buckets.
func WriteTable(w io.Writer, runs []Labelled) error {
	if len(runs) == 0 {
		return nil
	}
	head := []string{"time", "rule"}
	for _, r := range runs {
		head = append(head, label(r.Label, len(runs), "admitted"), label(r.Label, len(runs), "refused"))
	}
	var b strings.Builder
	row(&b, head)
	align := []string{"---:", "---"}
	for range runs {
		align = append(align, "---:", "---:")
	}
	row(&b, align)
	rules := ruleNames(runs)
	for i := range runs[0].Buckets {
		at := time.Duration(i) * runs[0].Bucket
		for _, rule := range rules {
			row(&b, counts([]string{at.String(), rule}, runs, rule, i))
		}
	}
	for _, rule := range rules {
		row(&b, counts([]string{"total", rule}, runs, rule, -1))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// label heads a column: "admitted", or "a.yaml admitted" beside others.
func label(run string, runs int, what string) string {
	if runs == 1 {
		return what
	}
	return run + " " + what
}

// counts is a row: cells, then each run's admitted and refused by rule in
// bucket i (-1: over the whole trace); a run without the rule shows "-".
func counts(cells []string, runs []Labelled, rule string, i int) []string {
	for _, r := range runs {
		j := slices.IndexFunc(r.Rules, func(s Series) bool { return s.Rule == rule })
		switch {
		case j < 0:
			cells = append(cells, "-", "-")
		case i < 0:
			a, f := r.Rules[j].Total()
			cells = append(cells, fmt.Sprint(a), fmt.Sprint(f))
		default:
			cells = append(cells, fmt.Sprint(r.Rules[j].Admitted[i]), fmt.Sprint(r.Rules[j].Refused[i]))
		}
	}
	return cells
}

func row(b *strings.Builder, cells []string) {
	b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
}

// ruleNames are the rules of every run, sorted, each once.
func ruleNames(runs []Labelled) []string {
	var names []string
	for _, r := range runs {
		for _, s := range r.Rules {
			names = append(names, s.Rule)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}
