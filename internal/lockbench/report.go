package lockbench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kvorum/kvorum/internal/diskfloor"
)

// Report is the outcome of a benchmark invocation.
type Report struct {
	HoldMs            float64      `json:"hold_ms"`
	DurationS         float64      `json:"duration_s"`
	TTLMs             float64      `json:"ttl_ms"`
	RedlockRetryDelay float64      `json:"redlock_retry_delay_ms"`
	Targets           []TargetInfo `json:"targets"`
	Runs              []RunResult  `json:"runs"`
	// Disk is the fsync floor of the data directory, measured at the
	// start of the run: the hand-off target is one fsync p50 + 0.3 ms.
	Disk *diskfloor.Result `json:"disk,omitempty"`
}

// TargetInfo says what a target ran against, or why it was skipped.
type TargetInfo struct {
	Name    string   `json:"name"`
	Addrs   []string `json:"addrs,omitempty"`
	Started bool     `json:"started_locally"` // started by the benchmark
	Skipped string   `json:"skipped,omitempty"`
	Note    string   `json:"note,omitempty"` // what ran (ZooKeeper: servers, fsync, recipe)
}

// RunResult is one (target, mode, procs) run.
type RunResult struct {
	Target string `json:"target"`
	Mode   string `json:"mode"`
	Procs  int    `json:"procs"`
	Stats
	// PerProcess is the acquisitions of each process; Spread is
	// (max - min) / mean of them, in percent.
	PerProcess []int   `json:"per_process"`
	SpreadPct  float64 `json:"fairness_spread_pct"`
	OpsPerSec  float64 `json:"ops_per_s"`
	// Handoff (shared mode) summarizes the hand-offs: from one holder's
	// release (sent) to the acquire of the process waiting next (returned),
	// over the grants whose process was already waiting at that release.
	// It is the h of the 4 x (hold + h); HeldMs is the average time
	// a process actually held the lock (its hold plus the sleep's overshoot).
	Handoff *Stats  `json:"handoff,omitempty"`
	HeldMs  float64 `json:"held_avg_ms,omitempty"`
	// Attempts counts Redlock rounds (failed ones are retried).
	Attempts int64 `json:"attempts,omitempty"`
	// Violations: overlapping holds in shared mode, fencing tokens out of
	// order; Errors: failed acquires/releases. Either fails the run.
	Violations []string `json:"violations,omitempty"`
	Errors     int      `json:"errors"`
	Error      string   `json:"error,omitempty"` // why the run failed
}

// Failed reports whether the run failed.
func (r *RunResult) Failed() bool { return r.Error != "" }

// Stats summarizes acquire times, in milliseconds.
type Stats struct {
	Ops      int     `json:"operations"`
	AvgMs    float64 `json:"avg_ms"`
	MedianMs float64 `json:"median_ms"`
	MinMs    float64 `json:"min_ms"`
	MaxMs    float64 `json:"max_ms"`
	P90Ms    float64 `json:"p90_ms"`
	P99Ms    float64 `json:"p99_ms"`
}

// computeStats summarizes latencies (nanoseconds). Percentiles interpolate
// linearly between the closest ranks (numpy's default, as a Python
// benchmark like the paper's would compute them); the median is the 50th.
func computeStats(lat []int64) Stats {
	if len(lat) == 0 {
		return Stats{}
	}
	s := append([]int64(nil), lat...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	var sum float64
	for _, v := range s {
		sum += float64(v)
	}
	ms := func(ns float64) float64 { return ns / float64(time.Millisecond) }
	return Stats{
		Ops:      len(s),
		AvgMs:    ms(sum / float64(len(s))),
		MedianMs: ms(percentile(s, 50)),
		MinMs:    ms(float64(s[0])),
		MaxMs:    ms(float64(s[len(s)-1])),
		P90Ms:    ms(percentile(s, 90)),
		P99Ms:    ms(percentile(s, 99)),
	}
}

// percentile of sorted values, linear interpolation.
func percentile(sorted []int64, p float64) float64 {
	if len(sorted) == 1 {
		return float64(sorted[0])
	}
	pos := p / 100 * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(sorted)-1)
	frac := pos - float64(lo)
	return float64(sorted[lo]) + frac*float64(sorted[hi]-sorted[lo])
}

// spread is (max - min) / mean of counts, in percent (0 for one process).
func spread(counts []int) float64 {
	if len(counts) < 2 {
		return 0
	}
	lo, hi, sum := counts[0], counts[0], 0
	for _, c := range counts {
		lo, hi, sum = min(lo, c), max(hi, c), sum+c
	}
	if sum == 0 {
		return 0
	}
	mean := float64(sum) / float64(len(counts))
	return float64(hi-lo) / mean * 100
}

// hold is one acquisition as recorded by a worker: when its acquire was
// sent (start) and returned (acq), when its release was sent (rel).
type hold struct {
	proc            int
	start, acq, rel int64
	token           int64
}

// handoffs returns, for the holds of one lock sorted by acquisition, the
// gaps from a release to the next grant whose acquire was waiting at that
// release (a gap after which the next process only then asked for the
// lock measures that process, not the hand-off), and the durations of the
// holds.
func handoffs(holds []hold) (gaps, held []int64) {
	for i, h := range holds {
		held = append(held, h.rel-h.acq)
		if i > 0 && h.start < holds[i-1].rel && h.acq >= holds[i-1].rel {
			gaps = append(gaps, h.acq-holds[i-1].rel)
		}
	}
	return gaps, held
}

// checkExclusion checks the holds of one lock: sorted by acquisition, no
// hold may start before the previous one ended (both times are taken
// inside the hold: after the acquire returned, before the release was
// sent), and fencing tokens (when recorded) must increase.
func checkExclusion(holds []hold, tokens bool) []string {
	sort.Slice(holds, func(i, j int) bool { return holds[i].acq < holds[j].acq })
	var out []string
	overlaps, disorder := 0, 0
	var firstOverlap, firstDisorder string
	for i := 1; i < len(holds); i++ {
		p, h := holds[i-1], holds[i]
		if h.acq < p.rel && h.proc != p.proc {
			if overlaps == 0 {
				firstOverlap = fmt.Sprintf("process %d acquired %v before process %d released", h.proc,
					time.Duration(p.rel-h.acq), p.proc)
			}
			overlaps++
		}
		if tokens && h.token <= p.token {
			if disorder == 0 {
				firstDisorder = fmt.Sprintf("token %d (process %d) after token %d (process %d)", h.token, h.proc, p.token, p.proc)
			}
			disorder++
		}
	}
	if overlaps > 0 {
		out = append(out, fmt.Sprintf("mutual exclusion violated: %d overlapping holds (first: %s)", overlaps, firstOverlap))
	}
	if disorder > 0 {
		out = append(out, fmt.Sprintf("fencing tokens out of order in %d grants (first: %s)", disorder, firstDisorder))
	}
	return out
}

// Failed reports whether any run failed.
func (r *Report) Failed() bool {
	for i := range r.Runs {
		if r.Runs[i].Failed() {
			return true
		}
	}
	return false
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the report as an aligned table (acquire times in ms,
// like the paper's Tables 1 and 2).
func (r *Report) WriteText(w io.Writer) {
	fmt.Fprintf(w, "lock acquire time (ms); hold %s, %s per run, lease/key/session TTL %s, Redlock retry delay < %s\n",
		fmtMs(r.HoldMs), fmtDur(r.DurationS), fmtMs(r.TTLMs), fmtMs(r.RedlockRetryDelay))
	for _, t := range r.Targets {
		note := ""
		if t.Note != "" {
			note = " (" + t.Note + ")"
		}
		switch {
		case t.Skipped != "":
			fmt.Fprintf(w, "  %s: skipped: %s\n", t.Name, t.Skipped)
		case t.Started:
			fmt.Fprintf(w, "  %s: started locally at %s%s\n", t.Name, strings.Join(t.Addrs, ","), note)
		default:
			fmt.Fprintf(w, "  %s: %s%s\n", t.Name, strings.Join(t.Addrs, ","), note)
		}
	}
	if r.Disk != nil {
		fmt.Fprintf(w, "  %s\n", r.Disk)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target\tmode\tprocs\tops\tavg\tmedian\tmin\tmax\tp90\tp99\tops/s\tspread %\tper process\t")
	for _, x := range r.Runs {
		per := make([]string, len(x.PerProcess))
		for i, c := range x.PerProcess {
			per[i] = strconv.Itoa(c)
		}
		if x.Ops == 0 {
			fmt.Fprintf(tw, "%s\t%s\t%d\t0\t-\t-\t-\t-\t-\t-\t-\t-\t%s\t\n", x.Target, x.Mode, x.Procs, strings.Join(per, "/"))
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.0f\t%.1f\t%s\t\n",
			x.Target, x.Mode, x.Procs, x.Ops, x.AvgMs, x.MedianMs, x.MinMs, x.MaxMs, x.P90Ms, x.P99Ms,
			x.OpsPerSec, x.SpreadPct, strings.Join(per, "/"))
	}
	tw.Flush()
	var notes []string
	for _, x := range r.Runs {
		if x.Handoff != nil && x.Handoff.Ops > 0 {
			floor := ""
			if r.Disk != nil {
				floor = fmt.Sprintf(" (median %.2f ms above the disk's fsync p50 of %.2f ms)", x.Handoff.MedianMs-r.Disk.P50Ms, r.Disk.P50Ms)
			}
			notes = append(notes, fmt.Sprintf("%s %s %d: hand-off (release sent -> next waiter's acquire returned) avg %.2f, median %.2f, p99 %.2f ms over %d%s; holds lasted %.2f ms on average",
				x.Target, x.Mode, x.Procs, x.Handoff.AvgMs, x.Handoff.MedianMs, x.Handoff.P99Ms, x.Handoff.Ops, floor, x.HeldMs))
		}
		if x.Attempts > int64(x.Ops) && x.Ops > 0 {
			notes = append(notes, fmt.Sprintf("%s %s %d: %d Redlock attempts for %d acquisitions (%.0f%% retried)",
				x.Target, x.Mode, x.Procs, x.Attempts, x.Ops, float64(x.Attempts-int64(x.Ops))/float64(x.Attempts)*100))
		}
		if x.Failed() {
			notes = append(notes, fmt.Sprintf("FAILED %s %s %d: %s", x.Target, x.Mode, x.Procs, x.Error))
		}
	}
	if len(notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range notes {
			fmt.Fprintln(w, n)
		}
	}
}

func fmtMs(ms float64) string { return time.Duration(ms * float64(time.Millisecond)).String() }
func fmtDur(s float64) string { return time.Duration(s * float64(time.Second)).String() }
