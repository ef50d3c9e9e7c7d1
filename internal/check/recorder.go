package check

import (
	"math"
	"sort"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// Recorder collects the history of concurrent clients. Safe for concurrent
// use. Times are monotonic durations since NewRecorder.
type Recorder struct {
	start time.Time

	mu   sync.Mutex
	recs []*record
}

type outcome uint8

const (
	pending outcome = iota
	done            // Ok
	failed          // Fail: certainly not applied, dropped
	unknown         // Unknown: may or may not have been applied
)

type record struct {
	client    int
	in        Input
	out       Output
	call, ret time.Duration
	state     outcome
	note      string // why the outcome is unknown, or the error; shown in reports
}

// Pending is an operation begun with Recorder.Begin and not yet completed.
// Exactly one of Ok, Fail or Unknown should be called; only the first call
// counts.
type Pending struct {
	r   *Recorder
	rec *record
}

// NewRecorder returns an empty recorder whose clock starts now.
func NewRecorder() *Recorder {
	return &Recorder{start: time.Now()}
}

// Now returns the recorder's clock: the monotonic time since NewRecorder.
func (r *Recorder) Now() time.Duration { return time.Since(r.start) }

// Begin records the invocation of in by client now (before the command is
// sent).
func (r *Recorder) Begin(client int, in Input) *Pending {
	return r.BeginAt(client, in, r.Now())
}

// BeginAt is Begin with an invocation time taken earlier with Now: for an
// operation whose kind is known only once it has started (CAS: WATCH and
// GET first, then either EXEC or just a GET).
func (r *Recorder) BeginAt(client int, in Input, at time.Duration) *Pending {
	rec := &record{client: client, in: in, call: at}
	r.mu.Lock()
	r.recs = append(r.recs, rec)
	r.mu.Unlock()
	return &Pending{r: r, rec: rec}
}

func (p *Pending) finish(state outcome, out Output, note string) {
	now := p.r.Now()
	p.r.mu.Lock()
	defer p.r.mu.Unlock()
	if p.rec.state != pending {
		return
	}
	if now < p.rec.call {
		now = p.rec.call
	}
	p.rec.state, p.rec.out, p.rec.ret, p.rec.note = state, out, now, note
}

// Ok completes the operation with this output (out.Unknown makes it Unknown).
func (p *Pending) Ok(out Output) {
	if out.Unknown {
		p.Unknown()
		return
	}
	p.finish(done, out, "")
}

// Fail completes an operation that was certainly NOT applied (e.g.
// CLUSTERDOWN, dial refused before sending, aborted EXEC): it is dropped
// from the history.
func (p *Pending) Fail() { p.finish(failed, Output{}, "") }

// Unknown completes an operation that may or may not have been applied
// (timeout, UNCERTAIN, connection lost after sending): it is kept with
// return time +infinity and any output is accepted.
func (p *Pending) Unknown() { p.UnknownBecause("") }

// UnknownBecause is Unknown with the reason (an error text), shown in
// reports.
func (p *Pending) UnknownBecause(reason string) {
	p.finish(unknown, Output{Unknown: true}, reason)
}

// FailBecause is Fail with the reason; it is kept only for Stats and
// reports, not in the history.
func (p *Pending) FailBecause(reason string) { p.finish(failed, Output{}, reason) }

// Operations returns the history: every operation completed Ok or Unknown,
// in invocation order. Failed operations are left out. Unknown operations
// and those still pending have Output{Unknown: true} and Return
// math.MaxInt64. Metadata holds the reason of an unknown outcome, if any.
func (r *Recorder) Operations() []porcupine.Operation {
	r.mu.Lock()
	defer r.mu.Unlock()
	ops := make([]porcupine.Operation, 0, len(r.recs))
	for _, rec := range r.recs {
		op := porcupine.Operation{ClientId: rec.client, Input: rec.in, Call: int64(rec.call)}
		switch rec.state {
		case failed:
			continue
		case done:
			op.Output, op.Return = rec.out, int64(rec.ret)
		default:
			op.Output, op.Return = Output{Unknown: true}, math.MaxInt64
			if rec.note != "" {
				op.Metadata = rec.note
			} else if rec.state == pending {
				op.Metadata = "still pending"
			}
		}
		ops = append(ops, op)
	}
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].Call < ops[j].Call })
	return ops
}

// Stats counts recorded operations.
type Stats struct {
	Invoked, Ok, Failed, Unknown int // Invoked includes those still pending
	Writes, OkWrites             int // operations whose kind IsWrite; OkWrites: completed Ok without Output.Err
	// Kinds and OkKinds count invoked and Ok-completed operations per
	// OpKind.
	Kinds, OkKinds [NumOpKinds]int
}

// Stats returns the counts so far.
func (r *Recorder) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	var s Stats
	for _, rec := range r.recs {
		s.Invoked++
		k := int(rec.in.Kind)
		if k < NumOpKinds {
			s.Kinds[k]++
		}
		write := rec.in.Kind.IsWrite()
		if write {
			s.Writes++
		}
		switch rec.state {
		case done:
			s.Ok++
			if k < NumOpKinds {
				s.OkKinds[k]++
			}
			if write && rec.out.Err == "" {
				s.OkWrites++
			}
		case failed:
			s.Failed++
		case unknown:
			s.Unknown++
		}
	}
	return s
}

// WriteSuccesses returns the completion times (since NewRecorder) of writes
// that completed Ok (without Output.Err), sorted; used for unavailability
// windows.
func (r *Recorder) WriteSuccesses() []time.Duration {
	r.mu.Lock()
	var ts []time.Duration
	for _, rec := range r.recs {
		if rec.state == done && rec.in.Kind.IsWrite() && rec.out.Err == "" {
			ts = append(ts, rec.ret)
		}
	}
	r.mu.Unlock()
	sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
	return ts
}

// LongestGap returns the longest interval within [from, to] with no
// successful write completion (see WriteSuccesses), and where it starts.
// With no success in [from, to] it is the whole interval.
func (r *Recorder) LongestGap(from, to time.Duration) (gap, start time.Duration) {
	return longestGap(r.WriteSuccesses(), from, to)
}

func longestGap(ts []time.Duration, from, to time.Duration) (gap, start time.Duration) {
	if to < from {
		return 0, from
	}
	prev := from
	start = from
	for _, t := range ts {
		if t < from {
			continue
		}
		if t > to {
			break
		}
		if t-prev > gap {
			gap, start = t-prev, prev
		}
		prev = t
	}
	if to-prev > gap {
		gap, start = to-prev, prev
	}
	return gap, start
}
