package resp

import (
	"bytes"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kvorum/kvorum/internal/reply"
)

// Statistics for INFO commandstats, errorstats and cpu, kept per node as
// Redis keeps them per server, and zeroed by CONFIG RESETSTAT.

// cmdStats is one command's (or subcommand's) counters, as Redis's
// commandstats reports them: calls executed (a failed one included),
// their time, calls rejected before execution (wrong arity, unknown
// subcommand) and calls that answered an error.
type cmdStats struct {
	calls, usec, rejected, failed atomic.Uint64
}

func (st *cmdStats) reset() {
	st.calls.Store(0)
	st.usec.Store(0)
	st.rejected.Store(0)
	st.failed.Store(0)
}

// rejectedReply reports whether r is an error Redis gives before it runs
// a command (counted in rejected_calls, not calls).
func rejectedReply(r *reply.Reply) bool {
	return r.Kind == reply.KindError &&
		(bytes.HasPrefix(r.Str, []byte("ERR wrong number of arguments")) || bytes.HasPrefix(r.Str, []byte("ERR unknown subcommand")))
}

// record counts one call of st that answered r after d (st nil: none).
func (st *cmdStats) record(r *reply.Reply, d time.Duration) {
	if st == nil {
		return
	}
	if rejectedReply(r) {
		st.rejected.Add(1)
		return
	}
	st.calls.Add(1)
	st.usec.Add(uint64(d / time.Microsecond))
	if r.Kind == reply.KindError {
		st.failed.Add(1)
	}
}

// statsOf is the counters a call of cmd with args goes to: a container's
// subcommand has its own, as in Redis ("config|get"); an unknown
// subcommand has none (nil: Redis counts it in errorstats only).
func statsOf(cmd *command, args [][]byte) *cmdStats {
	if len(cmd.subs) == 0 || len(args) < 2 {
		return &cmd.stats
	}
	var buf [32]byte
	if name, ok := lower(&buf, args[1]); ok {
		for _, sc := range cmd.subs {
			if sc.spec.Name[len(cmd.spec.Name)+1:] == string(name) {
				return &sc.stats
			}
		}
	}
	return nil
}

// maxErrorCodes bounds the distinct error codes errorstats keeps, as
// Redis does (ERRORSTATS_LIMIT): past it, new codes are not tracked.
const maxErrorCodes = 128

// errorStats counts error replies by their code (the first word).
type errorStats struct {
	total atomic.Uint64
	mu    sync.Mutex
	codes map[string]*atomic.Uint64
}

func (e *errorStats) note(r *reply.Reply) {
	if r.Kind != reply.KindError {
		return
	}
	e.total.Add(1)
	code := r.Str
	if i := bytes.IndexByte(code, ' '); i >= 0 {
		code = code[:i]
	}
	e.mu.Lock()
	n, ok := e.codes[string(code)]
	if !ok && len(e.codes) < maxErrorCodes {
		if e.codes == nil {
			e.codes = map[string]*atomic.Uint64{}
		}
		n = new(atomic.Uint64)
		e.codes[string(code)] = n
	}
	e.mu.Unlock()
	if n != nil {
		n.Add(1)
	}
}

func (e *errorStats) reset() {
	e.total.Store(0)
	e.mu.Lock()
	e.codes = nil
	e.mu.Unlock()
}

// fields is the Errorstats section, by code.
func (e *errorStats) fields() [][2]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var f [][2]string
	for code, n := range e.codes {
		f = append(f, [2]string{"errorstat_" + code, "count=" + strconv.FormatUint(n.Load(), 10)})
	}
	slices.SortFunc(f, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	return f
}

// commandStatsFields is the Commandstats section: every command and
// subcommand called or rejected since the start or CONFIG RESETSTAT, by
// name.
func (s *Server) commandStatsFields() [][2]string {
	var f [][2]string
	add := func(name string, st *cmdStats) {
		calls, rejected := st.calls.Load(), st.rejected.Load()
		if calls == 0 && rejected == 0 {
			return
		}
		usec := st.usec.Load()
		per := 0.0
		if calls > 0 {
			per = float64(usec) / float64(calls)
		}
		f = append(f, [2]string{"cmdstat_" + name, "calls=" + strconv.FormatUint(calls, 10) +
			",usec=" + strconv.FormatUint(usec, 10) +
			",usec_per_call=" + strconv.FormatFloat(per, 'f', 2, 64) +
			",rejected_calls=" + strconv.FormatUint(rejected, 10) +
			",failed_calls=" + strconv.FormatUint(st.failed.Load(), 10)})
	}
	for name, c := range s.cmds {
		add(name, &c.stats)
		for _, sc := range c.subs {
			add(sc.spec.Name, &sc.stats)
		}
	}
	slices.SortFunc(f, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	return f
}

// resetCommandStats zeroes every command's counters and the error counts.
func (s *Server) resetCommandStats() {
	for _, c := range s.cmds {
		c.stats.reset()
		for _, sc := range c.subs {
			sc.stats.reset()
		}
	}
	s.errs.reset()
}

// cpuFields is the CPU section: the process's CPU time (Go runs commands
// on many threads, so there is no main thread's share to report apart).
func cpuFields() [][2]string {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	tv := func(t syscall.Timeval) string {
		return strconv.FormatFloat(float64(t.Sec)+float64(t.Usec)/1e6, 'f', 6, 64)
	}
	return [][2]string{
		{"used_cpu_sys", tv(ru.Stime)},
		{"used_cpu_user", tv(ru.Utime)},
		{"used_cpu_sys_children", "0.000000"},
		{"used_cpu_user_children", "0.000000"},
	}
}

// residentBytes is the process's resident memory from the OS
// (/proc/self/statm), ok=false where that is not available.
func residentBytes() (uint64, bool) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, false
	}
	pages, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return 0, false
	}
	return pages * uint64(os.Getpagesize()), true
}
