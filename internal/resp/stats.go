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
	hist                          latencyHist // LATENCY HISTOGRAM, INFO latencystats (latency.go)
}

func (st *cmdStats) reset() {
	st.calls.Store(0)
	st.usec.Store(0)
	st.rejected.Store(0)
	st.failed.Store(0)
	st.hist.reset()
}

// rejectedReply reports whether r is an error Redis gives before it runs
// a command (counted in rejected_calls, not calls).
func rejectedReply(r *reply.Reply) bool {
	return r.Kind == reply.KindError &&
		(bytes.HasPrefix(r.Str, []byte("ERR wrong number of arguments")) || bytes.HasPrefix(r.Str, []byte("ERR unknown subcommand")))
}

// record counts one call of st that answered r after d (st nil: none),
// and reports whether it counted as executed (not rejected): the call
// that SLOWLOG, LATENCY and the latency histogram then see.
func (st *cmdStats) record(r *reply.Reply, d time.Duration) bool {
	if st == nil {
		return false
	}
	if rejectedReply(r) {
		st.rejected.Add(1)
		return false
	}
	st.calls.Add(1)
	st.usec.Add(uint64(d / time.Microsecond))
	if r.Kind == reply.KindError {
		st.failed.Add(1)
	}
	return true
}

// callOf is the command whose counters a call of cmd with args goes to: a
// container's subcommand has its own, as in Redis ("config|get"); an
// unknown subcommand has none (nil: Redis counts it in errorstats only).
func callOf(cmd *command, args [][]byte) *command {
	if len(cmd.subs) == 0 || len(args) < 2 {
		return cmd
	}
	var buf [32]byte
	if name, ok := lower(&buf, args[1]); ok {
		for _, sc := range cmd.subs {
			if sc.spec.Name[len(cmd.spec.Name)+1:] == string(name) {
				return sc
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

// resetCommandStats zeroes every command's counters and the error counts,
// and the other counters of INFO stats that CONFIG RESETSTAT zeroes: the
// socket reads and writes, and the backend's.
func (s *Server) resetCommandStats() {
	s.netReads.Store(0)
	s.netWrites.Store(0)
	if r, ok := s.b.(statResetter); ok {
		r.ResetStat()
	}
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

// statsFields is the Stats section: Redis 7.0's fields in its order, 0
// for what kvorum has no equivalent of (replication by sync, forks,
// eviction, defragmentation, client tracking, I/O threads), and 0 where
// the backend's count replaces it (mergeFields: keyspace_hits and
// keyspace_misses, expired_keys), then kvorum's own.
func (s *Server) statsFields() [][2]string {
	u64 := func(v uint64) string { return strconv.FormatUint(v, 10) }
	s.hub.mu.RLock()
	channels, patterns, shards := len(s.hub.channels), len(s.hub.patterns), len(s.hub.shards)
	s.hub.mu.RUnlock()
	return [][2]string{
		{"total_connections_received", u64(s.totalConns.Load())},
		{"total_commands_processed", u64(s.totalCmds.Load())},
		{"instantaneous_ops_per_sec", "0"},
		{"total_net_input_bytes", u64(s.netIn.Load())},
		{"total_net_output_bytes", u64(s.netOut.Load())},
		{"total_net_repl_input_bytes", "0"},
		{"total_net_repl_output_bytes", "0"},
		{"instantaneous_input_kbps", "0.00"},
		{"instantaneous_output_kbps", "0.00"},
		{"instantaneous_input_repl_kbps", "0.00"},
		{"instantaneous_output_repl_kbps", "0.00"},
		{"rejected_connections", u64(s.rejected.Load())},
		{"sync_full", "0"},
		{"sync_partial_ok", "0"},
		{"sync_partial_err", "0"},
		{"expired_keys", "0"},
		{"expired_stale_perc", "0.00"},
		{"expired_time_cap_reached_count", "0"},
		{"expire_cycle_cpu_milliseconds", "0"},
		{"evicted_keys", "0"},
		{"evicted_clients", "0"},
		{"total_eviction_exceeded_time", "0"},
		{"current_eviction_exceeded_time", "0"},
		{"keyspace_hits", "0"},
		{"keyspace_misses", "0"},
		{"pubsub_channels", strconv.Itoa(channels)},
		{"pubsub_patterns", strconv.Itoa(patterns)},
		{"pubsubshard_channels", strconv.Itoa(shards)},
		{"latest_fork_usec", "0"},
		{"total_forks", "0"},
		{"migrate_cached_sockets", "0"},
		{"slave_expires_tracked_keys", "0"},
		{"active_defrag_hits", "0"},
		{"active_defrag_misses", "0"},
		{"active_defrag_key_hits", "0"},
		{"active_defrag_key_misses", "0"},
		{"total_active_defrag_time", "0"},
		{"current_active_defrag_time", "0"},
		{"tracking_total_keys", "0"},
		{"tracking_total_items", "0"},
		{"tracking_total_prefixes", "0"},
		{"unexpected_error_replies", "0"},
		{"total_error_replies", u64(s.errs.total.Load())},
		{"dump_payload_sanitizations", "0"},
		{"total_reads_processed", u64(s.netReads.Load())},
		{"total_writes_processed", u64(s.netWrites.Load())},
		{"io_threaded_reads_processed", "0"},
		{"io_threaded_writes_processed", "0"},
		{"reply_buffer_shrinks", "0"},
		{"reply_buffer_expands", "0"},
		{"protocol_errors", u64(s.protoErrs.Load())},
	}
}

// mergeFields adds the backend's fields of a section to the server's:
// one the server lists already (a placeholder) takes its place, the
// others follow.
func mergeFields(own, backend [][2]string) [][2]string {
	for _, f := range backend {
		if i := slices.IndexFunc(own, func(g [2]string) bool { return g[0] == f[0] }); i >= 0 {
			own[i][1] = f[1]
		} else {
			own = append(own, f)
		}
	}
	return own
}

// statResetter is a backend with INFO counters of its own for CONFIG
// RESETSTAT to zero.
type statResetter interface{ ResetStat() }
