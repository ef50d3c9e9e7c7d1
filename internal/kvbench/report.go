package kvbench

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"

	"github.com/kvorum/kvorum/internal/diskfloor"
)

// Report is the result of Run.
type Report struct {
	Date         string       `json:"date"`
	Distribution string       `json:"distribution"`
	Records      int          `json:"records"`
	ValueSize    int          `json:"value_size"`
	Pipeline     int          `json:"pipeline"`
	DurationS    float64      `json:"duration_s"`
	WarmupS      float64      `json:"warmup_s"`
	OpsCap       int64        `json:"ops_cap,omitempty"`
	Seed         uint64       `json:"seed"`
	Baseline     string       `json:"baseline,omitempty"`
	CPUs         int          `json:"cpus"`
	GOMAXPROCS   int          `json:"gomaxprocs"`
	Targets      []TargetInfo `json:"targets"`
	Cells        []Cell       `json:"cells"`
	Notes        []string     `json:"notes,omitempty"`
	// Disk is the fsync floor of the data directory, measured at the
	// start of the run (nil if it could not be measured).
	Disk      *diskfloor.Result `json:"disk,omitempty"`
	workloads []Workload
}

// TargetInfo describes a target.
type TargetInfo struct {
	Name    string   `json:"name"`
	URL     string   `json:"url,omitempty"`
	Scheme  string   `json:"scheme"`
	Addrs   []string `json:"addrs,omitempty"`
	PIDs    []int    `json:"pids,omitempty"`
	Started bool     `json:"started_locally"`
	Note    string   `json:"note,omitempty"`
	Skipped string   `json:"skipped,omitempty"`
}

// Cell is one (workload, clients, target) measurement.
type Cell struct {
	Workload  string  `json:"workload"`
	Clients   int     `json:"clients"`
	Target    string  `json:"target"`
	DurationS float64 `json:"duration_s"` // the measured window
	Ops       uint64  `json:"ops"`        // successful measured operations
	OpsPerSec float64 `json:"ops_per_sec"`
	// Ratio is OpsPerSec / the baseline's in the same (workload, clients)
	// (0: no baseline); P99Ratio the same for the p99 latency of all ops.
	Ratio    float64 `json:"ratio_to_baseline,omitempty"`
	P99Ratio float64 `json:"p99_ratio_to_baseline,omitempty"`
	// Errors are failed measured operations (error replies, broken
	// connections); OtherErrors failures outside the window (warmup,
	// after its end, reconnection attempts).
	Errors      uint64      `json:"errors"`
	OtherErrors uint64      `json:"other_errors"`
	ErrorSample string      `json:"error_sample,omitempty"`
	Misses      uint64      `json:"read_misses"` // reads that found no value (not errors)
	P50Ms       float64     `json:"p50_ms"`      // over every operation kind
	P99Ms       float64     `json:"p99_ms"`
	Kinds       []KindStats `json:"kinds"`
	ServerCPUS  float64     `json:"server_cpu_s"` // utime+stime of the target's processes in the window
	CPUUsPerOp  float64     `json:"server_cpu_us_per_op"`
	BenchCPUS   float64     `json:"bench_cpu_s"` // this benchmark process's CPU in the window
	RSS         []ProcRSS   `json:"rss,omitempty"`
	RSSMiB      float64     `json:"rss_mib"`  // sum over the target's processes, at the end of the cell
	AnonMiB     float64     `json:"anon_mib"` // the anonymous part of RSSMiB (RssAnon: not the binary's file pages)
	Failed      bool        `json:"failed"`
	Error       string      `json:"error,omitempty"`
}

// KindStats is the latency of one operation kind in a cell.
type KindStats struct {
	Kind   string  `json:"kind"` // read, update, insert
	Ops    uint64  `json:"ops"`
	Errors uint64  `json:"errors"`
	Misses uint64  `json:"misses,omitempty"`
	MeanMs float64 `json:"mean_ms"`
	P50Ms  float64 `json:"p50_ms"`
	P95Ms  float64 `json:"p95_ms"`
	P99Ms  float64 `json:"p99_ms"`
	P999Ms float64 `json:"p999_ms"`
	MaxMs  float64 `json:"max_ms"`
}

// ProcRSS is a server process's resident memory.
type ProcRSS struct {
	PID     int     `json:"pid"`
	MiB     float64 `json:"mib"`
	AnonMiB float64 `json:"anon_mib"` // RssAnon: resident memory that is not file pages
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func (k *KindStats) fill(h *Histogram) {
	k.MeanMs, k.MaxMs = ms(h.Mean()), ms(h.Max())
	k.P50Ms, k.P95Ms = ms(h.Quantile(0.5)), ms(h.Quantile(0.95))
	k.P99Ms, k.P999Ms = ms(h.Quantile(0.99)), ms(h.Quantile(0.999))
}

func newReport(cfg *Config) *Report {
	return &Report{
		Date: time.Now().Format(time.RFC3339), Distribution: cfg.Distribution, Records: cfg.Records,
		ValueSize: cfg.ValueSize, Pipeline: cfg.Pipeline, DurationS: cfg.Duration.Seconds(),
		WarmupS: cfg.Warmup.Seconds(), OpsCap: cfg.Ops, Seed: cfg.Seed, Baseline: cfg.Baseline,
		CPUs: runtime.NumCPU(), GOMAXPROCS: gomaxprocs(), workloads: cfg.Workloads,
	}
}

func (r *Report) hasTarget(name string) bool {
	for _, t := range r.Targets {
		if t.Name == name && t.Skipped == "" {
			return true
		}
	}
	return false
}

// finish computes the ratios to the baseline.
func (r *Report) finish() {
	if r.Baseline == "" {
		return
	}
	for i := range r.Cells {
		c := &r.Cells[i]
		for _, b := range r.Cells {
			if b.Target == r.Baseline && b.Workload == c.Workload && b.Clients == c.Clients {
				if b.OpsPerSec > 0 {
					c.Ratio = c.OpsPerSec / b.OpsPerSec
				}
				if b.P99Ms > 0 {
					c.P99Ratio = c.P99Ms / b.P99Ms
				}
			}
		}
	}
}

// Failed reports whether any cell failed.
func (r *Report) Failed() bool {
	for _, c := range r.Cells {
		if c.Failed {
			return true
		}
	}
	return false
}

// FailedCells counts the failed cells.
func (r *Report) FailedCells() int {
	n := 0
	for _, c := range r.Cells {
		if c.Failed {
			n++
		}
	}
	return n
}

func (c *Cell) summary() string {
	s := fmt.Sprintf("%.0f ops/s, p50 %.3f ms, p99 %.3f ms, %d errors", c.OpsPerSec, c.P50Ms, c.P99Ms, c.Errors+c.OtherErrors)
	if c.Error != "" {
		s += "; " + c.Error
	}
	if c.Failed {
		s = "FAILED: " + s
	}
	return s
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(r)
}

func fmtMs(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v < 1:
		return fmt.Sprintf("%.3f", v)
	case v < 100:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.0f", v)
	}
}

func fmtRatio(v float64) string {
	if v == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", v)
}

// WriteText writes the report as Markdown: the setup, the targets, a
// throughput table and a latency table.
func (r *Report) WriteText(w io.Writer) {
	run := fmt.Sprintf("%gs after %gs warmup", r.DurationS, r.WarmupS)
	if r.OpsCap > 0 {
		run = fmt.Sprintf("at most %d operations or %s", r.OpsCap, run)
	}
	fmt.Fprintf(w, "### kvorum bench kv: %s keys over %d records, %d-byte values, pipeline %d, %s per cell, seed %d (%s, %d CPUs)\n\n",
		r.Distribution, r.Records, r.ValueSize, r.Pipeline, run, r.Seed, r.Date[:10], r.CPUs)
	fmt.Fprintln(w, "Targets:")
	for _, t := range r.Targets {
		switch {
		case t.Skipped != "":
			fmt.Fprintf(w, "- **%s**: skipped: %s\n", t.Name, t.Skipped)
		default:
			how := "given"
			if t.Started {
				how = "started locally"
			}
			note := ""
			if t.Note != "" {
				note = "; " + t.Note
			}
			fmt.Fprintf(w, "- **%s** (%s, %s%s)\n", t.Name, t.URL, how, note)
		}
	}
	if r.Disk != nil {
		fmt.Fprintf(w, "\n%s: the floor of every fsynced write on this machine.\n", r.Disk)
	}
	base := ""
	if r.Baseline != "" {
		base = " | vs " + r.Baseline
	}
	fmt.Fprintf(w, "\nThroughput and cost (server CPU: utime+stime of the target's processes in the window; bench CPU: this process, client side):\n\n")
	fmt.Fprintf(w, "| workload | clients | target | ops/s%s | p50 ms | p99 ms%s | errors | server CPU s | CPU µs/op | bench CPU s | RSS MiB | RSS MiB per process (anonymous) |\n", base, base)
	rc := strings.Repeat("--:|", boolInt(base != "")) // a ratio column
	fmt.Fprintf(w, "|---|--:|---|--:|%s--:|--:|%s--:|--:|--:|--:|--:|--:|\n", rc, rc)
	for _, c := range r.Cells {
		mark := ""
		if c.Failed {
			mark = " **FAILED**"
		}
		ratio, p99ratio := "", ""
		if base != "" {
			ratio, p99ratio = " | "+fmtRatio(c.Ratio), " | "+fmtRatio(c.P99Ratio)
		}
		errs := fmt.Sprint(c.Errors)
		if c.OtherErrors > 0 {
			errs += fmt.Sprintf(" (+%d outside the window)", c.OtherErrors)
		}
		cpu, perOp, rss, perProc := "–", "–", "–", "–"
		if len(c.RSS) > 0 {
			cpu, perOp, rss = fmt.Sprintf("%.2f", c.ServerCPUS), fmt.Sprintf("%.1f", c.CPUUsPerOp), fmt.Sprintf("%.0f", c.RSSMiB)
			per := make([]string, len(c.RSS))
			for i, p := range c.RSS {
				per[i] = fmt.Sprintf("%.0f (%.0f)", p.MiB, p.AnonMiB)
			}
			perProc = strings.Join(per, "/")
		}
		fmt.Fprintf(w, "| %s | %d | %s%s | %.0f%s | %s | %s%s | %s | %s | %s | %.2f | %s | %s |\n",
			c.Workload, c.Clients, c.Target, mark, c.OpsPerSec, ratio, fmtMs(c.P50Ms), fmtMs(c.P99Ms), p99ratio, errs, cpu, perOp, c.BenchCPUS, rss, perProc)
	}
	fmt.Fprintf(w, "\nLatency per operation (ms, from the pipeline's send to the reply):\n\n")
	fmt.Fprintln(w, "| workload | clients | target | op | count | mean | p50 | p95 | p99 | p99.9 | max |")
	fmt.Fprintln(w, "|---|--:|---|---|--:|--:|--:|--:|--:|--:|--:|")
	for _, c := range r.Cells {
		for _, k := range c.Kinds {
			fmt.Fprintf(w, "| %s | %d | %s | %s | %d | %s | %s | %s | %s | %s | %s |\n", c.Workload, c.Clients, c.Target, k.Kind, k.Ops,
				fmtMs(k.MeanMs), fmtMs(k.P50Ms), fmtMs(k.P95Ms), fmtMs(k.P99Ms), fmtMs(k.P999Ms), fmtMs(k.MaxMs))
		}
	}
	var notes []string
	for _, c := range r.Cells {
		if c.Failed {
			why := c.Error
			if c.ErrorSample != "" {
				if why != "" {
					why += "; "
				}
				why += "first error: " + c.ErrorSample
			}
			if why == "" && c.Ops == 0 {
				why = "no operation completed"
			}
			notes = append(notes, fmt.Sprintf("%s, %d clients, %s FAILED: %d errors (+%d outside the window); %s", c.Workload, c.Clients, c.Target, c.Errors, c.OtherErrors, why))
		}
		if c.Misses > 0 {
			notes = append(notes, fmt.Sprintf("%s, %d clients, %s: %d reads found no value (run the load workload first)", c.Workload, c.Clients, c.Target, c.Misses))
		}
	}
	notes = append(notes, r.Notes...)
	if len(notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range notes {
			fmt.Fprintf(w, "- %s\n", n)
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
