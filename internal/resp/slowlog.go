package resp

import (
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvorum/kvorum/internal/redisnum"
	"github.com/kvorum/kvorum/internal/reply"
)

// SLOWLOG, as Redis 7.0's (slowlog.c), kept per node: a command whose
// time reached slowlog-log-slower-than microseconds is logged, newest
// first, at most slowlog-max-len entries. The time is the one INFO
// commandstats counts: from the command's arrival to its reply, the Raft
// commit included (a pipelined run's time split among its commands).

// Redis's limits on what an entry keeps of the command
// (SLOWLOG_ENTRY_MAX_ARGC, SLOWLOG_ENTRY_MAX_STRING).
const (
	slowlogMaxArgc   = 32
	slowlogMaxString = 128
)

// Defaults of slowlog-log-slower-than and slowlog-max-len, Redis's.
const (
	defaultSlowlogSlowerThan = 10000
	defaultSlowlogMaxLen     = 128
)

type slowEntry struct {
	id, unix, usec int64
	args           []reply.Reply
	addr, name     string
}

// slowLog is the node's slow log. threshold and maxLen are read on every
// command without the lock.
type slowLog struct {
	threshold atomic.Int64 // µs; negative: nothing is logged
	maxLen    atomic.Int64
	mu        sync.Mutex
	nextID    int64
	entries   []slowEntry // oldest first
}

func (l *slowLog) init() {
	l.threshold.Store(defaultSlowlogSlowerThan)
	l.maxLen.Store(defaultSlowlogMaxLen)
}

// slow reports whether a command that took d is to be logged.
func (l *slowLog) slow(d time.Duration) bool {
	t := l.threshold.Load()
	return t >= 0 && int64(d/time.Microsecond) >= t
}

// observe is what every executed command (not a rejected one) goes
// through once its reply is known: the latency histogram, SLOWLOG and
// LATENCY's events. call is the command or subcommand counted.
func (c *conn) observe(call *command, args [][]byte, d time.Duration) {
	s := c.s
	if s.lat.tracking.Load() {
		call.stats.hist.add(d)
	}
	if !call.skipSlowlog && s.slow.slow(d) {
		c.slowlogPush(args, d)
	}
	if call.fast {
		s.lat.note("fast-command", d)
	} else {
		s.lat.note("command", d)
	}
}

// slowlogTx logs the commands EXEC ran, each with its share of the
// transaction's time d (they are one Raft entry; Redis logs each of them
// and not EXEC).
func (c *conn) slowlogTx(queued [][][]byte, d time.Duration) {
	if len(queued) == 0 {
		return
	}
	share := d / time.Duration(len(queued))
	if !c.s.slow.slow(share) {
		return
	}
	for _, q := range queued {
		if cmd := c.s.lookup(q[0]); cmd != nil {
			if call := callOf(cmd, q); call != nil && call.skipSlowlog {
				continue
			}
		}
		c.slowlogPush(q, share)
	}
}

// slowlogPush logs args as Redis's slowlogCreateEntry keeps them: at most
// 32 arguments, the last one then saying how many more there were, each
// at most 128 bytes, then how many more bytes it had.
func (c *conn) slowlogPush(args [][]byte, d time.Duration) {
	argc := min(len(args), slowlogMaxArgc)
	e := slowEntry{unix: time.Now().Unix(), usec: int64(d / time.Microsecond), args: make([]reply.Reply, argc), addr: c.addr}
	for i := range argc {
		var b []byte
		switch a := args[i]; {
		case i == argc-1 && argc != len(args):
			b = []byte("... (" + strconv.Itoa(len(args)-argc+1) + " more arguments)")
		case len(a) > slowlogMaxString:
			b = append(append(make([]byte, 0, slowlogMaxString+32), a[:slowlogMaxString]...),
				"... ("+strconv.Itoa(len(a)-slowlogMaxString)+" more bytes)"...)
		default:
			b = append(make([]byte, 0, len(a)), a...)
		}
		e.args[i] = reply.Bulk(b)
	}
	c.info.Lock()
	e.name = c.info.name
	c.info.Unlock()
	l := &c.s.slow
	l.mu.Lock()
	e.id = l.nextID
	l.nextID++
	l.entries = append(l.entries, e)
	if over := len(l.entries) - int(min(l.maxLen.Load(), int64(len(l.entries)))); over > 0 {
		l.entries = slices.Delete(l.entries, 0, over)
	}
	l.mu.Unlock()
}

func slowlogCommand() *command {
	flags := []string{"admin", "loading", "stale"}
	acl := []string{"@admin", "@slow", "@dangerous"}
	sub := func(name string, arity int, flags, acl []string, summary string, h func(c *conn, args [][]byte) reply.Reply) *command {
		return connCmd("slowlog|"+name, arity, flags, acl, "2.2.12", summary, h)
	}
	sl := connCmd("slowlog", -2, nil, []string{"@slow"}, "2.2.12", "A container for slow log commands", nil)
	sl.subs = []*command{
		sub("get", -2, flags, acl, "Returns the slow log's entries", slowlogGet),
		sub("len", 2, flags, acl, "Returns the number of entries in the slow log", slowlogLen),
		sub("reset", 2, flags, acl, "Clears all entries from the slow log", slowlogReset),
		sub("help", 2, []string{"loading", "stale"}, []string{"@slow"}, "Show helpful text about the different subcommands", slowlogHelp),
	}
	sl.subs[0].tips = []string{"request_policy:all_nodes", "nondeterministic_output"}
	sl.subs[1].tips = []string{"request_policy:all_nodes", "response_policy:agg_sum", "nondeterministic_output"}
	sl.subs[2].tips = []string{"request_policy:all_nodes", "response_policy:all_succeeded"}
	sl.handler = containerHandler(sl)
	sl.spec.Group = "server"
	for _, sc := range sl.subs {
		sc.spec.Group = "server"
	}
	return sl
}

// slowlogGet is SLOWLOG GET [count]: the newest count entries (default
// 10, -1 all).
func slowlogGet(c *conn, args [][]byte) reply.Reply {
	if len(args) > 3 {
		return reply.Error("ERR unknown subcommand or wrong number of arguments for '" + string(args[1][:min(len(args[1]), 128)]) + "'. Try SLOWLOG HELP.")
	}
	count := int64(10)
	if len(args) == 3 {
		n, ok := redisnum.ParseInt(args[2])
		if !ok || n < -1 {
			return reply.Error("ERR count should be greater than or equal to -1")
		}
		count = n
	}
	l := &c.s.slow
	l.mu.Lock()
	defer l.mu.Unlock()
	if count == -1 || count > int64(len(l.entries)) {
		count = int64(len(l.entries))
	}
	out := make([]reply.Reply, 0, count)
	for i := len(l.entries) - 1; i >= 0 && int64(len(out)) < count; i-- {
		e := &l.entries[i]
		out = append(out, reply.Array(reply.Int(e.id), reply.Int(e.unix), reply.Int(e.usec),
			reply.Array(e.args...), reply.BulkString(e.addr), reply.BulkString(e.name)))
	}
	return reply.Array(out...)
}

func slowlogLen(c *conn, args [][]byte) reply.Reply {
	l := &c.s.slow
	l.mu.Lock()
	defer l.mu.Unlock()
	return reply.Int(int64(len(l.entries)))
}

// slowlogReset empties the log; ids go on from where they were, as in
// Redis.
func slowlogReset(c *conn, args [][]byte) reply.Reply {
	l := &c.s.slow
	l.mu.Lock()
	l.entries = nil
	l.mu.Unlock()
	return reply.OK
}

func slowlogHelp(c *conn, args [][]byte) reply.Reply {
	return helpReply("SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
		"GET [<count>]",
		"    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
		"    Entries are made of:",
		"    id, timestamp, time in microseconds, arguments array, client IP and port,",
		"    client name",
		"LEN",
		"    Return the length of the slowlog.",
		"RESET",
		"    Reset the slowlog.",
		"HELP",
		"    Prints this help.")
}

// setFlags caches the Redis flags the observers look at.
func (c *command) setFlags() {
	c.fast = slices.Contains(c.spec.Flags, "fast")
	c.skipSlowlog = slices.Contains(c.spec.Flags, "skip_slowlog")
}
