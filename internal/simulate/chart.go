package simulate

import (
	"fmt"
	"io"
	"slices"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Chart size: two panels, admitted above refused.
const (
	chartWidth  = 10 * vg.Inch
	chartHeight = 7 * vg.Inch
)

// WriteChart draws the runs' counts as an SVG chart of two panels, the
// admitted per bucket above the refused, a line per rule and run, each
// its own colour in both panels. The same runs give the same bytes: the
// chart reads no clock and draws in the runs' and rules' order.
func WriteChart(w io.Writer, runs []Labelled, title string) error {
	if len(runs) == 0 {
		return nil
	}
	c := vgsvg.New(chartWidth, chartHeight)
	if err := drawChart(draw.New(c), runs, title); err != nil {
		return err
	}
	_, err := c.WriteTo(w)
	return err
}

// drawChart draws WriteChart's panels on dc.
func drawChart(dc draw.Canvas, runs []Labelled, title string) error {
	admitted, err := panel(runs, title, "admitted", func(s Series) []int64 { return s.Admitted })
	if err != nil {
		return err
	}
	refused, err := panel(runs, "", "refused", func(s Series) []int64 { return s.Refused })
	if err != nil {
		return err
	}
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadY: vg.Points(12), PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(8)}
	plots := [][]*plot.Plot{{admitted}, {refused}}
	canvases := plot.Align(plots, tiles, dc)
	for i, row := range plots {
		row[0].Draw(canvases[i][0])
	}
	return nil
}

// panel plots, per rule of each run, the counts of one kind.
func panel(runs []Labelled, title, what string, counts func(Series) []int64) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "seconds from the trace's start"
	p.Y.Label.Text = fmt.Sprintf("%s per %s", what, runs[0].Bucket)
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	colour, top := 0, int64(1)
	for _, r := range runs {
		for _, s := range r.Rules {
			ys := counts(s)
			l, err := plotter.NewLine(points(r.Result, ys))
			if err != nil {
				return nil, err
			}
			l.StepStyle = plotter.PostStep
			l.Color = plotutil.Color(colour)
			l.Width = vg.Points(1.5)
			colour++
			name := s.Rule
			if len(runs) > 1 {
				name = r.Label + " " + name
			}
			p.Add(l)
			p.Legend.Add(name, l)
			top = max(top, slices.Max(ys))
		}
	}
	// Room above the highest count for the legend, a line per entry, so
	// that it hides no line.
	p.Y.Min = 0
	p.Y.Max = float64(top) / (1 - min(0.6, 0.08+0.07*float64(colour)))
	return p, nil
}

// points are ys as steps, each bucket's count held from its start to its
// end, in seconds from the start.
func points(r *Result, ys []int64) plotter.XYs {
	xy := make(plotter.XYs, len(ys)+1)
	for i, y := range ys {
		xy[i].X = (r.Bucket * time.Duration(i)).Seconds()
		xy[i].Y = float64(y)
	}
	xy[len(ys)].X = (r.Bucket * time.Duration(len(ys))).Seconds()
	xy[len(ys)].Y = xy[len(ys)-1].Y
	return xy
}
