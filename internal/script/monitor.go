package script

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvorum/kvorum/internal/reply"
)

// A node's record of the scripts running on it: what Redis's busy state,
// SCRIPT KILL, FUNCTION KILL and FUNCTION STATS's running_script need.
//
// Redis runs one script at a time, and while it runs past
// busy-reply-threshold the server answers BUSY. On a kvorum node several
// runs can be in progress at once: the one the apply loop runs (EVAL,
// EVALSHA, FCALL, applied on every replica) and any number of read-only
// runs on the read path (EVAL_RO, EVALSHA_RO, FCALL_RO, one per client
// connection that sent one). The Monitor keeps them all; Redis's "the
// running script" is the oldest of them.
//
// Cost: a run takes the Monitor's mutex twice (Begin, End) and reads the
// clock once; a command that arrives while nothing runs reads one atomic
// counter (Busy). The kill flag is an atomic the VM reads once per
// instruction, next to the budget count (budgetCtx.Done).

// Running is one script run as the Monitor records it. The caller fills
// the exported fields before Begin and must not change them until End.
type Running struct {
	Name     string   // the script's sha1, or the function's name
	Command  [][]byte // the command that runs it (FUNCTION STATS); valid until End
	Function bool     // FCALL or FCALL_RO (else EVAL and its variants)
	// Killable: a read-only run on the read path, which changes nothing,
	// so SCRIPT KILL or FUNCTION KILL may stop it. A run at apply time
	// runs on every replica: stopping it on one would make them diverge.
	Killable bool

	start time.Time
	kill  atomic.Bool
}

// killFlag is the flag the VM checks, nil for no record.
func (r *Running) killFlag() *atomic.Bool {
	if r == nil {
		return nil
	}
	return &r.kill
}

// Monitor records the runs in progress on one node. The zero value is
// ready; a nil *Monitor records nothing.
type Monitor struct {
	active atomic.Int32
	mu     sync.Mutex
	runs   []*Running // in start order: runs[0] is the oldest
}

// Begin records r as running from now; End must follow.
func (m *Monitor) Begin(r *Running) {
	if m == nil {
		return
	}
	r.start = time.Now()
	m.mu.Lock()
	m.runs = append(m.runs, r)
	m.active.Add(1)
	m.mu.Unlock()
}

// End removes r.
func (m *Monitor) End(r *Running) {
	if m == nil {
		return
	}
	m.mu.Lock()
	for i, x := range m.runs {
		if x == r {
			m.runs = append(m.runs[:i], m.runs[i+1:]...)
			m.runs[len(m.runs):cap(m.runs)][0] = nil // drop the reference (cap > len after a removal)
			break
		}
	}
	m.active.Add(-1)
	m.mu.Unlock()
}

// Active reports whether any run is in progress.
func (m *Monitor) Active() bool { return m != nil && m.active.Load() > 0 }

// Busy reports whether the oldest run has been running for at least
// threshold (Redis's busy state, busy-reply-threshold), and whether it is
// a function's.
func (m *Monitor) Busy(threshold time.Duration) (busy, function bool) {
	if !m.Active() {
		return false, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.runs) == 0 {
		return false, false
	}
	r := m.runs[0]
	return time.Since(r.start) >= threshold, r.Function
}

// Redis 7.0's replies (script.c's scriptKill, server.c's shared objects).
var (
	ErrBusyEval     = reply.Error("BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.")
	ErrBusyFunction = reply.Error("BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.")
	errNotBusy      = reply.Error("NOTBUSY No scripts in execution right now.")
	errUnkillable   = reply.Error("UNKILLABLE The busy script runs at apply time, on every replica of the cluster: stopping it on one node would make the replicas diverge. It ends within its budget of " +
		strconv.Itoa(Budget) + " Lua instructions.")
)

// BusyError is the BUSY reply while a script (function: a function) runs.
func BusyError(function bool) reply.Reply {
	if function {
		return ErrBusyFunction
	}
	return ErrBusyEval
}

// Kill is SCRIPT KILL (function false) or FUNCTION KILL, with Redis's
// checks against the oldest run, in Redis's order: none runs (NOTBUSY),
// it cannot be killed (UNKILLABLE: it runs at apply time), it is of the
// other kind (BUSY, naming the command that would kill it). Otherwise
// every killable run of that kind stops at its next instruction, its
// client answered Redis's "Script killed by user" error, and Kill
// answers OK.
func (m *Monitor) Kill(function bool) reply.Reply {
	if !m.Active() {
		return errNotBusy
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.runs) == 0 {
		return errNotBusy
	}
	r := m.runs[0]
	switch {
	case !r.Killable:
		return errUnkillable
	case r.Function != function:
		return BusyError(r.Function)
	}
	for _, x := range m.runs {
		if x.Killable && x.Function == function {
			x.kill.Store(true)
		}
	}
	return reply.OK
}

// RunningFunction describes the oldest function run in progress, for
// FUNCTION STATS's running_script (ok false: none): its name, its
// command (copied) and how long it has run.
func (m *Monitor) RunningFunction() (name string, command [][]byte, d time.Duration, ok bool) {
	if !m.Active() {
		return "", nil, 0, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.runs {
		if r.Function {
			cmd := make([][]byte, len(r.Command))
			for i, a := range r.Command {
				cmd[i] = append([]byte{}, a...)
			}
			return r.Name, cmd, time.Since(r.start), true
		}
	}
	return "", nil, 0, false
}

// RunningEval reports whether the oldest run in progress is a script's
// (EVAL and its variants), not a function's.
func (m *Monitor) RunningEval() bool {
	if !m.Active() {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.runs) > 0 && !m.runs[0].Function
}
