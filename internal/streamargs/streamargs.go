// Package streamargs is the stream commands' arguments, parsed as Redis
// 7.0 parses them, with Redis's error replies. Package kv runs the
// commands over the keyspace; the parsers here read nothing but their
// arguments (XCLAIM's also the time, for IDLE).
package streamargs

import (
	"math"
	"strings"

	"github.com/kvorum/kvorum/internal/redisnum"
	"github.com/kvorum/kvorum/internal/reply"
	"github.com/kvorum/kvorum/internal/streamid"
)

// DefaultLimit is the LIMIT of an approximate trim that gives none, as
// Redis 7.0 sets it from stream-node-max-entries (at most 100 nodes'
// worth, capped to 10000 if that is 0 or wraps, and to 1000000).
func DefaultLimit(nodeMaxEntries uint64) int64 {
	l := int64(nodeMaxEntries * 100) //nolint:gosec // wraps as Redis's long long product does
	if l <= 0 {
		l = 10000
	}
	return min(l, 1000000)
}

// ErrID is Redis's error for an ID that does not parse.
var ErrID = reply.Error("ERR Invalid stream ID specified as stream command argument")

// Error texts of the stream commands' syntax (Redis 7.0).
var (
	errIDZero          = reply.Error("ERR The ID specified in XADD must be greater than 0-0")
	errBothTrims       = reply.Error("ERR syntax error, MAXLEN and MINID options at the same time are not compatible")
	errMaxLenNeg       = reply.Error("ERR The MAXLEN argument must be >= 0.")
	errLimitNeg        = reply.Error("ERR The LIMIT argument must be >= 0.")
	errLimitNoTrim     = reply.Error("ERR syntax error, LIMIT cannot be used without specifying a trimming strategy")
	errNoStrategy      = reply.Error("ERR syntax error, XTRIM must be called with a trimming strategy")
	errLimitExact      = reply.Error("ERR syntax error, LIMIT cannot be used without the special ~ option")
	errBadStart        = reply.Error("ERR invalid start ID for the interval")
	errBadEnd          = reply.Error("ERR invalid end ID for the interval")
	errXReadUnbalanced = reply.Error("ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.")
	errXReadGroup      = reply.Error("ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.")
	errXReadNoAck      = reply.Error("ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.")
	errXReadTimeoutInt = reply.Error("ERR timeout is not an integer or out of range")
	errXReadTimeoutNeg = reply.Error("ERR timeout is negative")
	errXSetIDEntries   = reply.Error("ERR entries_added must be positive")
	errXSetIDMaxDel    = reply.Error("ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id")
)

// eq compares an argument with a keyword, ignoring case.
func eq(b []byte, s string) bool { return strings.EqualFold(string(b), s) }

func wrongArity(name string) reply.Reply {
	return reply.Error("ERR wrong number of arguments for '" + name + "' command")
}

// --- XADD / XTRIM (streamParseAddOrTrimArgsOrReply) ---

// Trimming strategies.
const (
	TrimNone = iota
	TrimMaxLen
	TrimMinID
)

// AddTrim is XADD's or XTRIM's arguments.
type AddTrim struct {
	ID         streamid.ID
	IDGiven    bool
	SeqGiven   bool
	NoMkStream bool
	Strategy   int
	Approx     bool
	Limit      int64
	// DefaultLimit: an approximate trim without LIMIT, whose limit depends
	// on the cluster's stream-node-max-entries (DefaultLimit).
	DefaultLimit bool
	MaxLen       int64
	MinID        streamid.ID
	FieldsPos    int // XADD: index of the first field
}

// ParseAddTrim parses XADD's arguments (xadd) or XTRIM's.
func ParseAddTrim(args [][]byte, xadd bool) (a AddTrim, r reply.Reply, ok bool) {
	i := 2
	limitGiven := false
	for ; i < len(args); i++ {
		more := len(args) - 1 - i
		opt := args[i]
		switch {
		case xadd && len(opt) == 1 && opt[0] == '*':
			goto done
		case (eq(opt, "maxlen") || eq(opt, "minid")) && more > 0:
			if a.Strategy != TrimNone {
				return a, errBothTrims, false
			}
			a.Approx = false
			next := args[i+1]
			if more >= 2 && len(next) == 1 && (next[0] == '~' || next[0] == '=') {
				a.Approx = next[0] == '~'
				i++
			}
			if eq(opt, "maxlen") {
				n, good := redisnum.ParseInt(args[i+1])
				if !good {
					return a, reply.ErrNotInt, false
				}
				if n < 0 {
					return a, errMaxLenNeg, false
				}
				a.MaxLen, a.Strategy = n, TrimMaxLen
			} else {
				id, good := streamid.ParseStrict(args[i+1])
				if !good {
					return a, ErrID, false
				}
				a.MinID, a.Strategy = id, TrimMinID
			}
			i++
		case eq(opt, "limit") && more > 0:
			n, good := redisnum.ParseInt(args[i+1])
			if !good {
				return a, reply.ErrNotInt, false
			}
			if n < 0 {
				return a, errLimitNeg, false
			}
			a.Limit, limitGiven = n, true
			i++
		case xadd && eq(opt, "nomkstream"):
			a.NoMkStream = true
		case xadd:
			id, seqGiven, good := streamid.Parse(opt, 0, true, true)
			if !good {
				return a, ErrID, false
			}
			a.ID, a.SeqGiven, a.IDGiven = id, seqGiven, true
			goto done
		default:
			return a, reply.ErrSyntax, false
		}
	}
done:
	if a.Limit != 0 && a.Strategy == TrimNone {
		return a, errLimitNoTrim, false
	}
	if !xadd && a.Strategy == TrimNone {
		return a, errNoStrategy, false
	}
	if limitGiven {
		if !a.Approx {
			return a, errLimitExact, false
		}
	} else if a.Approx {
		a.DefaultLimit = true // DefaultLimit(stream-node-max-entries) when applied
	} else {
		a.Limit = 0
	}
	if xadd {
		if !a.IDGiven {
			a.SeqGiven = true
		}
		a.FieldsPos = i + 1
		n := len(args) - a.FieldsPos
		if n < 2 || n%2 == 1 {
			return a, wrongArity("xadd"), false
		}
		if a.IDGiven && a.SeqGiven && a.ID.IsZero() {
			return a, errIDZero, false
		}
	}
	return a, reply.Reply{}, true
}

// ParseXAdd parses XADD's arguments.
func ParseXAdd(args [][]byte) (AddTrim, reply.Reply, bool) { return ParseAddTrim(args, true) }

// ParseXTrim parses XTRIM's arguments.
func ParseXTrim(args [][]byte) (AddTrim, reply.Reply, bool) { return ParseAddTrim(args, false) }

// --- XRANGE / XREVRANGE ---

// Range is XRANGE's or XREVRANGE's arguments.
type Range struct {
	Start, End streamid.ID
	Count      int64 // -1: none
}

// ParseXRange parses XRANGE's or XREVRANGE's arguments (end before start).
func ParseXRange(args [][]byte) (a Range, r reply.Reply, ok bool) {
	startArg, endArg := args[2], args[3]
	if eq(args[0], "xrevrange") { // end start
		startArg, endArg = endArg, startArg
	}
	if a.Start, r, ok = RangeStart(startArg); !ok {
		return a, r, false
	}
	if a.End, r, ok = RangeEnd(endArg); !ok {
		return a, r, false
	}
	a.Count = -1
	for j := 4; j < len(args); j++ {
		if eq(args[j], "count") && j+1 < len(args) {
			n, good := redisnum.ParseInt(args[j+1])
			if !good {
				return a, reply.ErrNotInt, false
			}
			a.Count = max(n, 0)
			j++
		} else {
			return a, reply.ErrSyntax, false
		}
	}
	return a, reply.Reply{}, true
}

// RangeStart parses the start of a range of IDs: an exclusive start is
// the successor of its ID.
func RangeStart(b []byte) (streamid.ID, reply.Reply, bool) {
	id, excl, ok := streamid.ParseInterval(b, 0)
	if !ok {
		return id, ErrID, false
	}
	if excl {
		if id, ok = id.Incr(); !ok {
			return id, errBadStart, false
		}
	}
	return id, reply.Reply{}, true
}

// RangeEnd parses the end of a range of IDs: an exclusive end is the
// predecessor of its ID.
func RangeEnd(b []byte) (streamid.ID, reply.Reply, bool) {
	id, excl, ok := streamid.ParseInterval(b, math.MaxUint64)
	if !ok {
		return id, ErrID, false
	}
	if excl {
		if id, ok = id.Decr(); !ok {
			return id, errBadEnd, false
		}
	}
	return id, reply.Reply{}, true
}

// --- XSETID ---

// SetID is XSETID's arguments.
type SetID struct {
	ID        streamid.ID
	Added     int64 // -1: not given
	MaxDel    streamid.ID
	HasMaxDel bool
}

// ParseXSetID parses XSETID's arguments.
func ParseXSetID(args [][]byte) (a SetID, r reply.Reply, ok bool) {
	a.Added = -1
	id, good := streamid.ParseStrict(args[2])
	if !good {
		return a, ErrID, false
	}
	a.ID = id
	for i := 3; i < len(args); i += 2 {
		more := len(args) - 1 - i
		switch {
		case eq(args[i], "entriesadded") && more > 0:
			n, good := redisnum.ParseInt(args[i+1])
			if !good {
				return a, reply.ErrNotInt, false
			}
			if n < 0 {
				return a, errXSetIDEntries, false
			}
			a.Added = n
		case eq(args[i], "maxdeletedid") && more > 0:
			md, good := streamid.ParseStrict(args[i+1])
			if !good {
				return a, ErrID, false
			}
			if a.ID.Cmp(md) < 0 {
				return a, errXSetIDMaxDel, false
			}
			a.MaxDel, a.HasMaxDel = md, true
		default:
			return a, reply.ErrSyntax, false
		}
	}
	return a, reply.Reply{}, true
}

// --- XREAD / XREADGROUP ---

// XRead is XREAD's arguments.
type XRead struct {
	Count    int64
	Block    bool
	Timeout  int64 // ms, with Block
	Streams  int   // index of the first key
	NKeys    int
	CountIdx int // index of COUNT's argument, 0 if none
}

// XReadGroup is XREADGROUP's arguments.
type XReadGroup struct {
	XRead
	Group, Consumer []byte
	NoAck           bool
}

// ParseXRead parses XREAD's arguments.
func ParseXRead(args [][]byte) (a XRead, r reply.Reply, ok bool) {
	g, r, ok := parseXReads(args, false)
	return g.XRead, r, ok
}

// ParseXReadGroup parses XREADGROUP's arguments.
func ParseXReadGroup(args [][]byte) (XReadGroup, reply.Reply, bool) {
	return parseXReads(args, true)
}

// parseXReads parses XREAD's options or, with group, XREADGROUP's (one
// parser, as in Redis, so that both report the same errors in the same
// order).
func parseXReads(args [][]byte, group bool) (a XReadGroup, r reply.Reply, ok bool) {
	for i := 1; i < len(args); i++ {
		more := len(args) - 1 - i
		o := args[i]
		switch {
		case eq(o, "block") && more > 0:
			i++
			n, good := redisnum.ParseInt(args[i])
			if !good {
				return a, errXReadTimeoutInt, false
			}
			if n < 0 {
				return a, errXReadTimeoutNeg, false
			}
			a.Block, a.Timeout = true, n
		case eq(o, "count") && more > 0:
			i++
			n, good := redisnum.ParseInt(args[i])
			if !good {
				return a, reply.ErrNotInt, false
			}
			a.Count, a.CountIdx = max(n, 0), i
		case eq(o, "streams") && more > 0:
			a.Streams = i + 1
			n := len(args) - a.Streams
			if n%2 != 0 {
				return a, errXReadUnbalanced, false
			}
			a.NKeys = n / 2
			if group && a.Group == nil {
				return a, reply.Error("ERR Missing GROUP option for XREADGROUP"), false
			}
			return a, reply.Reply{}, true
		case eq(o, "group") && more >= 2:
			if !group {
				return a, errXReadGroup, false
			}
			a.Group, a.Consumer = args[i+1], args[i+2]
			i += 2
		case eq(o, "noack"):
			if !group {
				return a, errXReadNoAck, false
			}
			a.NoAck = true
		default:
			return a, reply.ErrSyntax, false
		}
	}
	return a, reply.ErrSyntax, false // STREAMS is mandatory
}
