package kvbench

import (
	"fmt"
	"os"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// WritePNG draws the report into a PNG file: throughput per workload as
// grouped bars (one bar per target), and below it the p99 latency over
// every operation kind, the same way. Failed cells are drawn too (their
// figures are what was measured) and marked in the group label.
func (r *Report) WritePNG(path string) error {
	type group struct {
		label            string
		workload         string
		clients          int
		failedCellsInGrp bool
	}
	var groups []group
	multiClients := false
	for _, c := range r.Cells {
		if c.Clients != r.Cells[0].Clients {
			multiClients = true
		}
	}
	var targets []string
	for _, c := range r.Cells {
		found := false
		for i := range groups {
			if groups[i].workload == c.Workload && groups[i].clients == c.Clients {
				found = true
				groups[i].failedCellsInGrp = groups[i].failedCellsInGrp || c.Failed
			}
		}
		if !found {
			groups = append(groups, group{workload: c.Workload, clients: c.Clients, failedCellsInGrp: c.Failed})
		}
		known := false
		for _, t := range targets {
			known = known || t == c.Target
		}
		if !known {
			targets = append(targets, c.Target)
		}
	}
	labels := make([]string, len(groups))
	for i, g := range groups {
		labels[i] = g.workload
		if multiClients {
			labels[i] += fmt.Sprintf("\n%d clients", g.clients)
		}
		if g.failedCellsInGrp {
			labels[i] += " (errors)"
		}
	}
	value := func(t string, g group, f func(Cell) float64) float64 {
		for _, c := range r.Cells {
			if c.Target == t && c.Workload == g.workload && c.Clients == g.clients {
				return f(c)
			}
		}
		return 0
	}
	clients := ""
	if !multiClients && len(r.Cells) > 0 {
		clients = fmt.Sprintf(", %d clients", r.Cells[0].Clients)
	}
	setup := fmt.Sprintf("%s keys, %d records, %d B values%s, pipeline %d", r.Distribution, r.Records, r.ValueSize, clients, r.Pipeline)
	panel := func(title, ylabel string, f func(Cell) float64) (*plot.Plot, error) {
		p := plot.New()
		p.Title.Text = title
		p.Y.Label.Text = ylabel
		p.Y.Min = 0
		p.NominalX(labels...)
		p.Legend.Top = true
		p.Add(plotter.NewGrid())
		w := vg.Points(min(60, 480/float64(max(1, len(targets)*len(groups)))))
		top := 0.0
		for i, t := range targets {
			vals := make(plotter.Values, len(groups))
			for j, g := range groups {
				vals[j] = value(t, g, f)
				top = max(top, vals[j])
			}
			b, err := plotter.NewBarChart(vals, w)
			if err != nil {
				return nil, err
			}
			b.LineStyle.Width = 0
			b.Color = plotutil.Color(i)
			b.Offset = w * vg.Length(float64(i)-float64(len(targets)-1)/2)
			p.Add(b)
			p.Legend.Add(t, b)
		}
		// Room for the legend above the bars, and for the outer bars.
		p.Y.Max = top * 1.25
		p.X.Min, p.X.Max = -0.5, float64(len(groups))-0.5
		p.Y.Tick.Marker = plainTicks{}
		return p, nil
	}
	p1, err := panel("kvorum bench kv: throughput ("+setup+")", "operations per second", func(c Cell) float64 { return c.OpsPerSec })
	if err != nil {
		return err
	}
	p2, err := panel("p99 latency, all operations", "ms", func(c Cell) float64 { return c.P99Ms })
	if err != nil {
		return err
	}
	width := vg.Points(max(640, float64(120*len(groups)+40*len(groups)*len(targets))))
	return writePanels(path, width, p1, p2)
}

// writePanels draws the plots one above the other into a PNG file.
func writePanels(path string, width vg.Length, ps ...*plot.Plot) error {
	img := vgimg.NewWith(vgimg.UseWH(width, 720), vgimg.UseDPI(96))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(ps), Cols: 1, PadTop: 6, PadBottom: 6, PadLeft: 6, PadRight: 12, PadY: 18}
	rows := make([][]*plot.Plot, len(ps))
	for i, p := range ps {
		rows[i] = []*plot.Plot{p}
	}
	cs := plot.Align(rows, tiles, dc)
	for i, p := range ps {
		p.Draw(cs[i][0])
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// plainTicks are plot's default ticks labelled without trailing zeros
// (50000, not 50000.00).
type plainTicks struct{}

func (plainTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'f', -1, 64)
		}
	}
	return ts
}
