package simulate

import (
	"fmt"
	"io"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// WriteChart draws the runs' counts as an SVG chart: per bucket, a line
// of admitted (solid) and one of refused (dashed) per rule and run, the
// run's rules in one colour each. The same runs give the same bytes:
// the chart reads no clock and no map in its drawing order.
func WriteChart(w io.Writer, runs []Labelled, title string) error {
	if len(runs) == 0 {
		return nil
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "seconds from the trace's start"
	p.Y.Label.Text = fmt.Sprintf("requests per %s", runs[0].Bucket)
	p.Y.Min = 0
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	colour := 0
	for _, r := range runs {
		for _, s := range r.Rules {
			name := s.Rule
			if len(runs) > 1 {
				name = r.Label + " " + name
			}
			for k, ys := range [][]int64{s.Admitted, s.Refused} {
				l, err := plotter.NewLine(points(r.Result, ys))
				if err != nil {
					return err
				}
				l.Color = plotutil.Color(colour)
				l.Width = vg.Points(1.5)
				what := " admitted"
				if k == 1 {
					l.Dashes = plotutil.Dashes(1)
					what = " refused"
				}
				p.Add(l)
				p.Legend.Add(name+what, l)
			}
			colour++
		}
	}
	wt, err := p.WriterTo(10*vg.Inch, 5*vg.Inch, "svg")
	if err != nil {
		return err
	}
	_, err = wt.WriteTo(w)
	return err
}

// points are ys over the buckets' start times, in seconds from the start.
func points(r *Result, ys []int64) plotter.XYs {
	xy := make(plotter.XYs, len(ys))
	for i, y := range ys {
		xy[i].X = (r.Bucket * time.Duration(i)).Seconds()
		xy[i].Y = float64(y)
	}
	return xy
}
