package check

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// Result is the outcome of Check.
type Result struct {
	Linearizable bool
	TimedOut     bool // porcupine gave up (CheckOperationsVerbose timeout): neither proven nor refuted
	Ops          int  // operations in the history given to Check
	Checked      int  // operations in the histories that decided: Ops minus those left out because they constrain nothing (see Check)
	// Info is porcupine's linearization info of the histories that
	// decided, for porcupine.Visualize: every key, or only the refuted
	// keys if there are any.
	Info porcupine.LinearizationInfo
	// BadKeys are the keys whose history is not linearizable: refuted
	// (then Linearizable and TimedOut are false).
	BadKeys []string
	// Suspect are keys whose history is not linearizable if the unknown
	// writes whose value nobody read were not applied, and whose full
	// check timed out (then TimedOut is set unless some key is refuted).
	Suspect []string
}

// prune drops the operations that constrain nothing: reads (GET, LRANGE)
// whose outcome is unknown.
func prune(ops []porcupine.Operation) []porcupine.Operation {
	out := make([]porcupine.Operation, 0, len(ops))
	for _, op := range ops {
		if op.Output.(Output).Unknown && !op.Input.(Input).Kind.IsWrite() {
			continue
		}
		out = append(out, op)
	}
	return out
}

// observedValues returns, per key, the values that replies showed: by
// GET, SET GET, LRANGE and the GET of a CAS (its Expect, whatever the
// outcome of the CAS).
func observedValues(ops []porcupine.Operation) map[string]map[string]bool {
	seen := map[string]map[string]bool{}
	see := func(k, v string) {
		if seen[k] == nil {
			seen[k] = map[string]bool{}
		}
		seen[k][v] = true
	}
	for _, op := range ops {
		in, out := op.Input.(Input), op.Output.(Output)
		if in.Kind == OpCAS {
			see(in.Key, in.Expect)
		}
		if out.Unknown || out.Err != "" {
			continue
		}
		switch in.Kind {
		case OpGet, OpGetSet:
			if out.Exists {
				see(in.Key, out.Value)
			}
		case OpRead:
			for _, v := range out.List {
				see(in.Key, v)
			}
		}
	}
	return seen
}

// hasValue reports whether an unknown write carries a value of its own.
func hasValue(k OpKind) bool {
	switch k {
	case OpSet, OpSetNX, OpGetSet, OpCAS, OpAppend:
		return true
	}
	return false
}

// anonymize replaces the value of every unknown write that no reply ever
// showed by anonValue, so that such writes are interchangeable for the
// model (see pending.go). It is exact: a value nobody read (and that is
// not an integer INCR could act on) only matters through its existence.
// It does nothing if anonValue itself occurs in the history.
func anonymize(ops []porcupine.Operation) []porcupine.Operation {
	for _, op := range ops {
		in, out := op.Input.(Input), op.Output.(Output)
		if in.Value == anonValue || in.Expect == anonValue || out.Value == anonValue || slices.Contains(out.List, anonValue) {
			return ops
		}
	}
	seen := observedValues(ops)
	out := slices.Clone(ops)
	for i, op := range out {
		in := op.Input.(Input)
		if op.Output.(Output).Unknown && hasValue(in.Kind) && !seen[in.Key][in.Value] {
			if _, isInt := parseRedisInt(in.Value); !isInt {
				in.Value = anonValue
				out[i].Input = in
			}
		}
	}
	return out
}

// pinUnknown gives every unknown write the return time of its invocation.
// Under Model an unknown write only becomes pending where it is
// linearized, and may take effect at any later step (see pending.go), so
// linearizing it at its invocation allows every outcome a later point
// allows: pinning it there is exact, and spares the search from trying it
// at every later position. (Recorder.Operations keeps the conventional
// infinite return time, for other users of Model.)
func pinUnknown(ops []porcupine.Operation) []porcupine.Operation {
	out := slices.Clone(ops)
	for i, op := range out {
		if op.Output.(Output).Unknown && op.Input.(Input).Kind.IsWrite() {
			out[i].Return = op.Call
		}
	}
	return out
}

// dropAnonymous leaves out the unknown writes anonymize gave anonValue.
// Dropping an unknown operation is choosing "not applied", which is always
// allowed: if the result is linearizable, so is the history.
func dropAnonymous(ops []porcupine.Operation) []porcupine.Operation {
	out := make([]porcupine.Operation, 0, len(ops))
	for _, op := range ops {
		if op.Output.(Output).Unknown && op.Input.(Input).Value == anonValue {
			continue
		}
		out = append(out, op)
	}
	return out
}

// keyModel is Model for the history of one key (no partitioning).
var keyModel = func() porcupine.Model {
	m := Model
	m.Partition = nil
	return m
}()

// checkKeys checks each key's history on its own, in parallel, until
// deadline (zero: none), and returns the verdict per key.
func checkKeys(keys []string, parts [][]porcupine.Operation, deadline time.Time) []porcupine.CheckResult {
	verdicts := make([]porcupine.CheckResult, len(keys))
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < min(runtime.GOMAXPROCS(0), len(keys)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				var timeout time.Duration
				if !deadline.IsZero() {
					if timeout = time.Until(deadline); timeout <= 0 {
						verdicts[i] = porcupine.Unknown
						continue
					}
				}
				verdicts[i] = porcupine.CheckOperationsTimeout(keyModel, parts[i], timeout)
			}
		}()
	}
	for i := range keys {
		next <- i
	}
	close(next)
	wg.Wait()
	return verdicts
}

// Check checks ops (from Recorder.Operations) against Model: each key on
// its own, in parallel, giving up after timeout (0: no limit).
//
// Unknown reads are left out (they constrain nothing) and unknown writes
// are pinned at their invocation (see pinUnknown). A first pass also
// leaves out the unknown writes whose value no reply showed (see
// anonymize); a key refuted by that pass is checked again with all its
// operations, and only that second verdict refutes it. Finally Info is
// computed for the report by porcupine.CheckOperationsVerbose, on every
// key, or only on the refuted keys if there are any, within what remains
// of timeout but at least timeout/10: Check returns within about 1.1 ×
// timeout.
func Check(ops []porcupine.Operation, timeout time.Duration) Result {
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	all := pinUnknown(anonymize(prune(ops)))
	keys, fullParts := partition(all)
	parts := make([][]porcupine.Operation, len(keys))
	for i, p := range fullParts {
		parts[i] = dropAnonymous(p)
	}
	verdicts := checkKeys(keys, parts, deadline)

	// Second pass: the refuted keys that lost operations.
	var again []int
	for i, v := range verdicts {
		if v == porcupine.Illegal && len(fullParts[i]) > len(parts[i]) {
			again = append(again, i)
		}
	}
	var suspect []string
	if len(again) > 0 {
		aKeys := make([]string, len(again))
		aParts := make([][]porcupine.Operation, len(again))
		for j, i := range again {
			aKeys[j], aParts[j] = keys[i], fullParts[i]
			parts[i] = fullParts[i]
		}
		for j, v := range checkKeys(aKeys, aParts, deadline) {
			verdicts[again[j]] = v
			if v == porcupine.Unknown {
				suspect = append(suspect, aKeys[j])
			}
		}
	}

	r := Result{Linearizable: true, Ops: len(ops), Suspect: suspect}
	var final, refuted []porcupine.Operation
	for i, v := range verdicts {
		final = append(final, parts[i]...)
		switch v {
		case porcupine.Illegal:
			r.BadKeys = append(r.BadKeys, keys[i])
			refuted = append(refuted, parts[i]...)
			r.Linearizable = false
		case porcupine.Unknown:
			r.TimedOut = true
			r.Linearizable = false
		}
	}
	r.Checked = len(final)
	if r.BadKeys != nil {
		r.TimedOut = false // refuted, whatever else timed out
		final = refuted    // the report shows the refuted keys
	}
	infoTimeout := time.Duration(0)
	if timeout > 0 {
		infoTimeout = max(time.Until(deadline), timeout/10)
	}
	_, r.Info = porcupine.CheckOperationsVerbose(Model, final, infoTimeout)
	return r
}

// historyEntry is one operation of <name>.history.json.
type historyEntry struct {
	Client   int     `json:"client"`
	Input    Input   `json:"input"`
	Output   *Output `json:"output"`    // null when unknown
	InvokeNs int64   `json:"invoke_ns"` // since NewRecorder
	ReturnNs *int64  `json:"return_ns"` // null when unknown
	Unknown  bool    `json:"unknown"`
	Note     string  `json:"note,omitempty"`
}

// WriteReport writes <dir>/<name>.html (porcupine.Visualize output of
// res.Info, readable in a browser: per key (only the refuted keys of a
// refuted history), the history and the longest linearizations found,
// with the model state after each step) and
// <dir>/<name>.history.json (the full history ops, one operation per
// element with client, input, output, invoke and return ns, unknown flag)
// and returns both paths. ops should be the history given to Check; the
// HTML shows what was checked (without unknown reads).
func (res Result) WriteReport(dir, name string, ops []porcupine.Operation) (htmlPath, historyPath string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	htmlPath = filepath.Join(dir, name+".html")
	historyPath = filepath.Join(dir, name+".history.json")
	if err := porcupine.VisualizePath(Model, res.Info, htmlPath); err != nil {
		return "", "", fmt.Errorf("check: writing %s: %w", htmlPath, err)
	}
	entries := make([]historyEntry, len(ops))
	for i, op := range ops {
		out := op.Output.(Output)
		e := historyEntry{Client: op.ClientId, Input: op.Input.(Input), InvokeNs: op.Call, Unknown: out.Unknown}
		if !out.Unknown && op.Return != math.MaxInt64 {
			ret := op.Return
			e.Output, e.ReturnNs = &out, &ret
		}
		if op.Metadata != nil {
			e.Note = fmt.Sprint(op.Metadata)
		}
		entries[i] = e
	}
	data, err := json.MarshalIndent(entries, "", " ")
	if err != nil {
		return "", "", err
	}
	if err := os.WriteFile(historyPath, append(data, '\n'), 0o644); err != nil {
		return "", "", err
	}
	return htmlPath, historyPath, nil
}
