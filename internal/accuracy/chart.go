package accuracy

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/envoy-rls/envoy-rls/internal/trace"
)

// Chart sizes: wide enough for a legend beside six periods of the edge
// trace.
const (
	chartWidth  = 8 * vg.Inch
	chartHeight = 4 * vg.Inch
)

// edgePeriods is how many periods of the edge trace its chart shows: three
// bursts.
const edgePeriods = 6

// edgeSteps is how many instants per period the edge chart samples: as
// fine as the bursts, which last a hundredth of a period each side of an
// edge.
const edgeSteps = 200

// EdgeChart draws, for the timeline's source, the requests admitted in the
// trailing period as a multiple of the threshold, over the first periods of
// the edge trace: one line per algorithm, with the offered load and the
// threshold for reference. It writes SVG.
func (r *Report) EdgeChart(w io.Writer) error {
	tl := r.Timeline
	if tl == nil {
		return errors.New("accuracy: the run has no edge trace to chart")
	}
	c := r.Config
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Admitted in the trailing period, one source of the %s trace (%d per %s)", tl.Shape, c.Requests, c.Period)
	p.X.Label.Text = "time (periods)"
	p.Y.Label.Text = "admitted in the trailing period ÷ threshold"
	// The legend over the first period, where no burst has come yet.
	p.Legend.Top, p.Legend.Left = true, true
	p.Y.Min, p.Y.Max = 0, 2.5
	p.Y.Tick.Marker = halves{}
	// Wide, under the others: where an algorithm admits all, its line lies
	// on this one.
	if err := addLine(p, "offered", trailing(tl.Arrivals, c), color.Gray{Y: 200}, nil, vg.Points(5)); err != nil {
		return err
	}
	for a, alg := range c.Algorithms {
		dashes := []vg.Length(nil)
		if a%2 == 1 {
			dashes = []vg.Length{vg.Points(4), vg.Points(2)}
		}
		if err := addLine(p, alg.String(), trailing(tl.Admitted[a], c), plotutil.Color(a), dashes, lineWidth); err != nil {
			return err
		}
	}
	threshold := plotter.XYs{{X: 0, Y: 1}, {X: edgePeriods, Y: 1}}
	if err := addLine(p, "threshold", threshold, color.Black, []vg.Length{vg.Points(1), vg.Points(3)}, lineWidth); err != nil {
		return err
	}
	return save(p, w)
}

// trailing samples, edgeSteps times a period, how many of the instants
// (microseconds, ascending) lie in the trailing period, over the threshold.
func trailing(at []int64, c Config) plotter.XYs {
	t := c.Period.Microseconds()
	xys := make(plotter.XYs, 0, edgePeriods*edgeSteps+1)
	lo, hi := 0, 0
	for k := range edgePeriods*edgeSteps + 1 {
		now := int64(k) * t / edgeSteps
		for hi < len(at) && at[hi] <= now {
			hi++
		}
		for lo < hi && at[lo] <= now-t {
			lo++
		}
		xy := plotter.XY{X: float64(k) / edgeSteps, Y: float64(hi-lo) / float64(c.Requests)}
		// Of a run of equal samples only its ends are drawn.
		if n := len(xys); n >= 2 && xys[n-1].Y == xy.Y && xys[n-2].Y == xy.Y {
			xys[n-1] = xy
			continue
		}
		xys = append(xys, xy)
	}
	return xys
}

// LoadChart draws one figure of the Poisson shapes against their load, one
// line per algorithm: what (a percentage of a Figures) and its axis label.
func (r *Report) LoadChart(w io.Writer, title, label string, what func(Figures) float64) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "load (mean rate ÷ threshold), Poisson"
	p.Y.Label.Text = label
	p.Legend.Top, p.Legend.Left = true, true
	for a, alg := range r.Config.Algorithms {
		var xys plotter.XYs
		for i, s := range r.Config.Shapes {
			if s.Kind == trace.Poisson {
				xys = append(xys, plotter.XY{X: s.Load, Y: 100 * what(r.Figures[i][a])})
			}
		}
		if len(xys) == 0 {
			return errors.New("accuracy: the run has no Poisson shape to chart")
		}
		if err := addLine(p, alg.String(), xys, plotutil.Color(a), nil, lineWidth); err != nil {
			return err
		}
	}
	return save(p, w)
}

// lineWidth is the width of a chart's lines.
var lineWidth = vg.Points(1.2)

func addLine(p *plot.Plot, name string, xys plotter.XYs, c color.Color, dashes []vg.Length, width vg.Length) error {
	l, err := plotter.NewLine(xys)
	if err != nil {
		return fmt.Errorf("accuracy: %s: %w", name, err)
	}
	l.Color, l.Dashes, l.Width = c, dashes, width
	p.Add(l)
	p.Legend.Add(name, l)
	return nil
}

// save writes p as SVG: without embedded fonts, so that the same figures
// give the same bytes.
func save(p *plot.Plot, w io.Writer) error {
	p.Add(plotter.NewGrid())
	wt, err := p.WriterTo(chartWidth, chartHeight, "svg")
	if err != nil {
		return err
	}
	_, err = wt.WriteTo(w)
	return err
}

// halves ticks an axis at every half, labelled: the edge chart's scale, in
// multiples of the threshold.
type halves struct{}

func (halves) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for v := math.Ceil(2*lo) / 2; v <= hi; v += 0.5 {
		ts = append(ts, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', -1, 64)})
	}
	return ts
}
