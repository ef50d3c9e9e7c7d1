package streamargs

import (
	"math"
	"strings"

	"github.com/kvorum/kvorum/internal/redisnum"
	"github.com/kvorum/kvorum/internal/reply"
	"github.com/kvorum/kvorum/internal/streamid"
	"github.com/kvorum/kvorum/internal/streamrec"
)

// The arguments of the consumer group commands and of XINFO.

// SubSyntaxErr is Redis's error for a subcommand of a container given
// the wrong arguments.
func SubSyntaxErr(args [][]byte, cmd string) reply.Reply {
	return subcommandErr("ERR unknown subcommand or wrong number of arguments for '", args, cmd)
}

// subcommandErr is Redis's error for a container's bad subcommand: text,
// the subcommand as a C string, cut at 128 bytes, and ". Try CMD HELP.".
func subcommandErr(text string, args [][]byte, cmd string) reply.Reply {
	b := reply.AppendCString([]byte(text), args[1], 128)
	return reply.ErrorText(append(b, "'. Try "+cmd+" HELP."...))
}

// parseSub checks a container's subcommand and its arity (arities, by
// lower-case name); sub is its name in lower case.
func parseSub(args [][]byte, cmd string, arities map[string]int) (sub string, r reply.Reply, ok bool) {
	sub = strings.ToLower(string(args[1]))
	arity, known := arities[sub]
	if !known {
		return sub, subcommandErr("ERR unknown subcommand '", args, strings.ToUpper(cmd)), false
	}
	if (arity > 0 && len(args) != arity) || (arity < 0 && len(args) < -arity) {
		return sub, wrongArity(cmd + "|" + sub), false
	}
	return sub, reply.Reply{}, true
}

// --- XGROUP ---

var xgroupSubArity = map[string]int{"create": -5, "setid": -5, "destroy": 4, "createconsumer": 5, "delconsumer": 5, "help": 2}

// XGroup is XGROUP's arguments.
type XGroup struct {
	Sub      string // the subcommand, in lower case
	MkStream bool
	Read     int64
}

// ParseXGroup parses XGROUP's subcommand and options.
func ParseXGroup(args [][]byte) (a XGroup, r reply.Reply, ok bool) {
	a.Read = streamrec.ReadUnknown
	if a.Sub, r, ok = parseSub(args, "xgroup", xgroupSubArity); !ok {
		return a, r, false
	}
	if len(args) >= 4 {
		create, setid := a.Sub == "create", a.Sub == "setid"
		for i := 5; i < len(args); {
			switch {
			case create && eq(args[i], "mkstream"):
				a.MkStream = true
				i++
			case (create || setid) && eq(args[i], "entriesread") && i+1 < len(args):
				n, good := redisnum.ParseInt(args[i+1])
				if !good {
					return a, reply.ErrNotInt, false
				}
				if n < 0 && n != streamrec.ReadUnknown {
					return a, reply.Error("ERR value for ENTRIESREAD must be positive or -1"), false
				}
				a.Read = n
				i += 2
			default:
				return a, SubSyntaxErr(args, "XGROUP"), false
			}
		}
	}
	return a, reply.Reply{}, true
}

// --- XINFO ---

var xinfoSubArity = map[string]int{"help": 2, "stream": -3, "groups": 3, "consumers": 4}

// ParseXInfo checks XINFO's subcommand and its arity; sub is its name in
// lower case.
func ParseXInfo(args [][]byte) (sub string, r reply.Reply, ok bool) {
	return parseSub(args, "xinfo", xinfoSubArity)
}

// XInfoStream parses XINFO STREAM's options, [FULL [COUNT count]] (Redis
// parses them after looking the key up): count is 10 by default or when
// negative.
func XInfoStream(args [][]byte) (full bool, count int64, r reply.Reply, ok bool) {
	count = 10
	opts := args[3:]
	if len(opts) == 0 {
		return false, count, reply.Reply{}, true
	}
	if (len(opts) != 1 && len(opts) != 3) || !eq(opts[0], "full") || (len(opts) == 3 && !eq(opts[1], "count")) {
		return false, count, SubSyntaxErr(args, "XINFO"), false
	}
	if len(opts) == 3 {
		n, good := redisnum.ParseInt(opts[2])
		if !good {
			return false, count, reply.ErrNotInt, false
		}
		if n >= 0 {
			count = n
		}
	}
	return true, count, reply.Reply{}, true
}

// --- XPENDING ---

// XPending is XPENDING's arguments.
type XPending struct {
	Summary    bool
	MinIdle    int64
	Start, End streamid.ID
	Count      int64
	Consumer   []byte
}

// ParseXPending parses XPENDING's arguments.
func ParseXPending(args [][]byte) (a XPending, r reply.Reply, ok bool) {
	if len(args) == 3 {
		a.Summary = true
		return a, reply.Reply{}, true
	}
	if len(args) < 6 || len(args) > 9 {
		return a, reply.ErrSyntax, false
	}
	i := 3
	if eq(args[3], "idle") {
		n, good := redisnum.ParseInt(args[4])
		if !good {
			return a, reply.ErrNotInt, false
		}
		if len(args) < 8 {
			return a, reply.ErrSyntax, false
		}
		a.MinIdle = n
		i += 2
	}
	n, good := redisnum.ParseInt(args[i+2])
	if !good {
		return a, reply.ErrNotInt, false
	}
	a.Count = max(n, 0)
	if a.Start, r, ok = RangeStart(args[i]); !ok {
		return a, r, false
	}
	if a.End, r, ok = RangeEnd(args[i+1]); !ok {
		return a, r, false
	}
	if i+3 < len(args) {
		a.Consumer = args[i+3]
	}
	return a, reply.Reply{}, true
}

// --- XCLAIM ---

// XClaim is XCLAIM's arguments.
type XClaim struct {
	MinIdle       int64
	IDs           []streamid.ID
	Force, JustID bool
	LastID        streamid.ID
	Time          int64 // the claimed entries' delivery time
	Retry         int64 // their delivery count; -1: not given
}

// ParseXClaim parses XCLAIM's arguments at time now (IDLE is relative
// to it; a time before 0 or after it is now). Redis parses them after
// looking the group up.
func ParseXClaim(args [][]byte, now int64) (a XClaim, r reply.Reply, ok bool) {
	minIdle, good := redisnum.ParseInt(args[4])
	if !good {
		return a, reply.Error("ERR Invalid min-idle-time argument for XCLAIM"), false
	}
	a.MinIdle = max(minIdle, 0)
	j := 5
	for ; j < len(args); j++ {
		id, ok := streamid.ParseStrict(args[j])
		if !ok {
			break
		}
		a.IDs = append(a.IDs, id)
	}
	a.Time, a.Retry = -1, -1
	for ; j < len(args); j++ {
		more := len(args) - 1 - j
		o := args[j]
		var n int64
		switch {
		case eq(o, "force"):
			a.Force = true
			continue
		case eq(o, "justid"):
			a.JustID = true
			continue
		case eq(o, "lastid") && more > 0:
			j++
			if a.LastID, ok = streamid.ParseStrict(args[j]); !ok {
				return a, ErrID, false
			}
			continue
		case (eq(o, "idle") || eq(o, "time") || eq(o, "retrycount")) && more > 0:
			j++
			if n, ok = redisnum.ParseInt(args[j]); !ok {
				return a, reply.ErrorText([]byte("ERR Invalid " + strings.ToUpper(string(o)) + " option argument for XCLAIM")), false
			}
		default:
			b := reply.AppendCString([]byte("ERR Unrecognized XCLAIM option '"), o, len(o))
			return a, reply.ErrorText(append(b, '\'')), false
		}
		switch {
		case eq(o, "idle"):
			a.Time = now - n
		case eq(o, "time"):
			a.Time = n
		default:
			a.Retry = n
		}
	}
	if a.Time < 0 || a.Time > now {
		a.Time = now
	}
	return a, reply.Reply{}, true
}

// --- XAUTOCLAIM ---

// XAutoClaim is XAUTOCLAIM's arguments.
type XAutoClaim struct {
	MinIdle int64
	Start   streamid.ID
	Count   int64
	JustID  bool
}

// ParseXAutoClaim parses XAUTOCLAIM's arguments.
func ParseXAutoClaim(args [][]byte) (a XAutoClaim, r reply.Reply, ok bool) {
	n, good := redisnum.ParseInt(args[4])
	if !good {
		return a, reply.Error("ERR Invalid min-idle-time argument for XAUTOCLAIM"), false
	}
	a.MinIdle = max(n, 0)
	if a.Start, r, ok = RangeStart(args[5]); !ok {
		return a, r, false
	}
	a.Count = 100
	for j := 6; j < len(args); j++ {
		more := len(args) - 1 - j
		switch {
		case eq(args[j], "count") && more > 0:
			n, good := redisnum.ParseInt(args[j+1])
			if !good || n < 1 || n > math.MaxInt64/16 {
				return a, reply.Error("ERR COUNT must be > 0"), false
			}
			a.Count = n
			j++
		case eq(args[j], "justid"):
			a.JustID = true
		default:
			return a, reply.ErrSyntax, false
		}
	}
	return a, reply.Reply{}, true
}
