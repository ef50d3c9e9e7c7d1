package kvbench

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// WriteFailoverMarkdown writes the results as the tables of
// docs/benchmarks.md: one row per environment and outage, then the
// overall figures with the ratio of each environment to the first.
func WriteFailoverMarkdown(w io.Writer, cfg FailoverConfig, rs []*FailoverResult) {
	fmt.Fprintf(w, "Constant-rate SET load, %d connections (one write in flight each, latency counted from each write's slot), %d-byte values, %v phases: before, leader killed (SIGKILL), leader restarted, a follower killed, restarted.\n\n", cfg.Workers, cfg.ValueSize, cfg.Phase)
	fmt.Fprintln(w, "| environment | node killed | longest gap between acknowledged writes | errors seen by clients | p95 before | p95 while down | p95 after restart |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, r := range rs {
		for _, o := range r.Outages {
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", r.Env, o.What, o.Gap.Round(time.Millisecond),
				errorList(o.Errors), msStr(o.P95Before), msStr(o.P95During), msStr(o.P95After))
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| environment | closed-loop capacity, writes/s | ratio | offered rate, writes/s | acknowledged, writes/s | acknowledged writes | lost (not read back) | errors |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, r := range rs {
		ratio := "1.00"
		if r != rs[0] && rs[0].Capacity > 0 {
			ratio = fmt.Sprintf("%.2f", r.Capacity/rs[0].Capacity)
		}
		fmt.Fprintf(w, "| %s | %.0f | %s | %d | %.0f | %d | %d | %s |\n", r.Env, r.Capacity, ratio, r.Rate, r.Achieved, r.Acked, r.Lost, errorList(r.Errors))
	}
}

func msStr(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}

func errorList(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var b strings.Builder
	for i, k := range ks {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d %s", m[k], k)
	}
	return b.String()
}

// WriteFailoverPNG draws the per-second timeline: acknowledged writes per
// second and p99 latency, one line per environment, the kills and
// restarts as vertical lines.
func WriteFailoverPNG(path string, rs []*FailoverResult) error {
	panel := func(title, ylabel string, f func(FailoverSecond) float64) (*plot.Plot, error) {
		p := plot.New()
		p.Title.Text = title
		p.X.Label.Text = "seconds"
		p.Y.Label.Text = ylabel
		p.Y.Min = 0
		p.Legend.Top = true
		p.Add(plotter.NewGrid())
		top := 0.0
		for i, r := range rs {
			pts := make(plotter.XYs, len(r.Seconds))
			for j, s := range r.Seconds {
				pts[j] = plotter.XY{X: float64(s.T) + 0.5, Y: f(s)}
				top = max(top, pts[j].Y)
			}
			l, err := plotter.NewLine(pts)
			if err != nil {
				return nil, err
			}
			l.Color = plotutil.Color(i)
			l.Width = vg.Points(1.5)
			p.Add(l)
			p.Legend.Add(r.Env, l)
		}
		for i, r := range rs {
			for _, e := range r.Events {
				v, err := plotter.NewLine(plotter.XYs{{X: e.At, Y: 0}, {X: e.At, Y: top * 1.2}})
				if err != nil {
					return nil, err
				}
				v.Color = plotutil.Color(i)
				v.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
				v.Width = vg.Points(0.8)
				p.Add(v)
			}
		}
		p.Y.Max = top * 1.25
		p.Y.Tick.Marker = plainTicks{}
		return p, nil
	}
	p1, err := panel("kvorum bench failover: acknowledged writes per second (dashed: kill leader, restart, kill follower, restart)", "writes/s", func(s FailoverSecond) float64 { return float64(s.OK) })
	if err != nil {
		return err
	}
	p2, err := panel("p99 write latency per second (from each write's slot)", "ms", func(s FailoverSecond) float64 { return s.P99 })
	if err != nil {
		return err
	}
	return writePanels(path, vg.Points(900), p1, p2)
}
