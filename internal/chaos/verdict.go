package chaos

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Results of a run.
const (
	ResultPass = "PASS"
	ResultFail = "FAIL"
	// ResultInconclusive: nothing was found wrong, but the
	// linearizability checker gave up, so the run proves nothing.
	ResultInconclusive = "INCONCLUSIVE"
)

// Verdict is the outcome of a chaos run.
type Verdict struct {
	Result     string   `json:"result"` // PASS, FAIL or INCONCLUSIVE
	Violations []string `json:"violations"`
	Notes      []string `json:"notes,omitempty"`

	Mode       string `json:"mode"`        // netns or proxy
	ModeReason string `json:"mode_reason"` // why this mode
	Network    string `json:"network"`     // how nodes are placed and cut
	Nodes      int    `json:"nodes"`
	Seed       int64  `json:"seed"`

	Duration      Seconds `json:"duration_s"`       // fault phase, as asked
	TotalDuration Seconds `json:"total_duration_s"` // whole run, setup to teardown

	Ops OpCounts `json:"operations"`

	Faults      map[Kind]int `json:"faults"` // injected, by kind
	FaultsTotal int          `json:"faults_total"`
	FaultLog    []FaultEvent `json:"fault_log"`

	// Linearizable is "yes", "no" or "unknown: checker timed out".
	Linearizable string   `json:"linearizable"`
	CheckedOps   int      `json:"checked_operations"`
	CheckTime    Seconds  `json:"check_time_s"`
	BadKeys      []string `json:"non_linearizable_keys,omitempty"`

	// Acknowledged writes read back through every node after the run.
	AckedDurable int      `json:"acked_durable_keys"`
	AckedAppends int      `json:"acked_list_appends"`
	Lost         int      `json:"lost_writes"`
	LostSample   []string `json:"lost_sample,omitempty"`

	// Bank transfers (check.Bank): acknowledged transfers and audits
	// that read every account at once; an audit that saw a transfer
	// half-applied is a violation.
	BankTransfers int `json:"bank_transfers"`
	BankAudits    int `json:"bank_audits"`

	LongestGap   Seconds `json:"longest_unavailability_s"`
	LongestGapAt Seconds `json:"longest_unavailability_at_s"`

	// AppliedIndex per node (INFO raft_applied_index) once the cluster
	// settled; Converged if all equal.
	AppliedIndex map[string]uint64 `json:"applied_index"`
	Converged    bool              `json:"replicas_converged"`

	DataDir     string `json:"data_dir"`
	DataKept    bool   `json:"data_kept"`
	ReportHTML  string `json:"report_html,omitempty"`
	HistoryFile string `json:"history_file,omitempty"`
	VerdictFile string `json:"verdict_file,omitempty"`
}

// OpCounts are the workload's operations.
type OpCounts struct {
	Invoked  int `json:"invoked"`
	Ok       int `json:"ok"`
	Failed   int `json:"failed"`
	Unknown  int `json:"unknown"`
	Writes   int `json:"writes"`
	OkWrites int `json:"ok_writes"`
}

// FaultEvent is one injected fault.
type FaultEvent struct {
	N        int     `json:"n"`
	Kind     Kind    `json:"kind"`
	What     string  `json:"what"`
	Heal     string  `json:"heal"`
	At       Seconds `json:"at_s"`
	HealedAt Seconds `json:"healed_at_s"`
	// Unavailable is the longest time without a successful write from
	// injection until writes resumed after the heal.
	Unavailable Seconds `json:"unavailable_s"`
	// Recovery is the time from the heal to the next successful write;
	// negative if none came within the recovery timeout.
	Recovery Seconds `json:"recovery_s"`
	// FirstWrite is the time from injection to the first write that
	// completed after it (a new leader's first commit, for a leader
	// fault).
	FirstWrite Seconds `json:"first_write_after_inject_s"`

	at, healedAt time.Duration // on the recorder's clock
}

// Seconds is a duration that marshals as seconds.
type Seconds float64

func secs(d time.Duration) Seconds { return Seconds(d.Seconds()) }

func (s Seconds) String() string { return fmt.Sprintf("%.2fs", float64(s)) }

// MarshalJSON rounds to milliseconds.
func (s Seconds) MarshalJSON() ([]byte, error) {
	return []byte(fmt.Sprintf("%.3f", float64(s))), nil
}

// Passed reports whether the run passed.
func (v *Verdict) Passed() bool { return v.Result == ResultPass }

// WriteJSON writes v as indented JSON.
func (v *Verdict) WriteJSON(w io.Writer) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// WriteText writes v as a table.
func (v *Verdict) WriteText(w io.Writer) {
	fmt.Fprintf(w, "\nkvorum chaos verdict: %s\n", v.Result)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, format string, a ...any) { fmt.Fprintf(tw, "  %s\t%s\n", k, fmt.Sprintf(format, a...)) }
	row("result", "%s", v.Result)
	row("network mode", "%s (%s)", v.Mode, v.ModeReason)
	row("network", "%s", v.Network)
	row("nodes", "%d", v.Nodes)
	row("seed", "%d (repeat with --seed %d)", v.Seed, v.Seed)
	row("duration", "%.1fs of faults, %.1fs in all", float64(v.Duration), float64(v.TotalDuration))
	o := v.Ops
	row("operations", "invoked %d: ok %d, failed %d, unknown %d (writes %d, ok %d)", o.Invoked, o.Ok, o.Failed, o.Unknown, o.Writes, o.OkWrites)
	row("faults", "%d injected%s", v.FaultsTotal, faultKinds(v.Faults))
	lin := v.Linearizable
	if v.CheckedOps > 0 {
		lin += fmt.Sprintf(" (%d operations checked in %.1fs)", v.CheckedOps, float64(v.CheckTime))
	}
	if len(v.BadKeys) > 0 {
		lin += "; keys: " + strings.Join(v.BadKeys, ", ")
	}
	row("linearizable", "%s", lin)
	row("acknowledged writes lost", "%d (of %d durability keys and %d list appends, read back through every node)", v.Lost, v.AckedDurable, v.AckedAppends)
	row("bank transfers", "%d acknowledged, %d audits of every account (each must sum to 0)", v.BankTransfers, v.BankAudits)
	row("longest unavailability", "%s with no successful write, from t=%.1fs", v.LongestGap, float64(v.LongestGapAt))
	row("replicas", "%s", appliedText(v))
	dataState := "removed"
	if v.DataKept {
		dataState = "kept"
	}
	row("data", "%s (%s)", v.DataDir, dataState)
	if v.ReportHTML != "" {
		row("report", "%s", v.ReportHTML)
	}
	if v.HistoryFile != "" {
		row("history", "%s", v.HistoryFile)
	}
	if v.VerdictFile != "" {
		row("verdict file", "%s", v.VerdictFile)
	}
	tw.Flush()
	if len(v.FaultLog) > 0 {
		fmt.Fprintf(w, "\n  recovery per fault (unavailable: longest time without a successful write from injection until writes resumed):\n")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "    #\tat\tfault\thealed at\tfirst write after fault\tunavailable\twrite after heal\n")
		for _, f := range v.FaultLog {
			rec := "+" + f.Recovery.String()
			if f.Recovery < 0 {
				rec = "none"
			}
			fmt.Fprintf(tw, "    %d\t%.1fs\t%s\t%.1fs\t+%s\t%s\t%s\n", f.N, float64(f.At), f.What, float64(f.HealedAt), f.FirstWrite, f.Unavailable, rec)
		}
		tw.Flush()
	}
	for _, n := range v.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
	if len(v.Violations) > 0 {
		fmt.Fprintf(w, "\n  violations:\n")
		for _, s := range v.Violations {
			fmt.Fprintf(w, "    - %s\n", s)
		}
	}
	fmt.Fprintf(w, "\n%s\n", v.Result)
}

func faultKinds(m map[Kind]int) string {
	var parts []string
	for _, k := range AllKinds {
		if m[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return ": " + strings.Join(parts, ", ")
}

func appliedText(v *Verdict) string {
	if len(v.AppliedIndex) == 0 {
		return "applied index not read"
	}
	keys := make([]string, 0, len(v.AppliedIndex))
	for k := range v.AppliedIndex {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if v.Converged {
		return fmt.Sprintf("raft_applied_index %d on every node", v.AppliedIndex[keys[0]])
	}
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("node %s: %d", k, v.AppliedIndex[k])
	}
	return "raft_applied_index differs: " + strings.Join(parts, ", ")
}
