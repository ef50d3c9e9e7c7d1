// Package listargs is the list commands' arguments, parsed as Redis 7.0
// parses them, with Redis's error replies, and the blocking pops' ones
// that sorted sets share (BZPOPMIN, BZPOPMAX, ZMPOP and BZMPOP parse as
// BLPOP and LMPOP do). Package kv runs the commands over the keyspace;
// the parsers here read nothing but their arguments.
package listargs

import (
	"strings"

	"github.com/kvorum/kvorum/internal/redisnum"
	"github.com/kvorum/kvorum/internal/reply"
)

// Error texts of the list commands' syntax (Redis 7.0).
var (
	errSyntax       = reply.ErrSyntax
	errNotInteger   = reply.ErrNotInt
	errPositive     = reply.Error("ERR value is out of range, must be positive")
	errTimeoutFloat = reply.Error("ERR timeout is not a float or out of range")
	errTimeoutNeg   = reply.Error("ERR timeout is negative")
	errRankZero     = reply.Error("ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list")
	errLPosCount    = reply.Error("ERR COUNT can't be negative")
	errLPosMaxLen   = reply.Error("ERR MAXLEN can't be negative")
	errNumKeys      = reply.Error("ERR numkeys should be greater than 0")
	errMPopCount    = reply.Error("ERR count should be greater than 0")
)

// eq compares an argument with a keyword, ignoring case.
func eq(b []byte, s string) bool { return strings.EqualFold(string(b), s) }

// ParsePop parses LPOP and RPOP's count (-1 if not given) before the key
// is looked at, as Redis does.
func ParsePop(args [][]byte) (count int64, r reply.Reply, ok bool) {
	if len(args) > 3 {
		return 0, reply.Error("ERR wrong number of arguments for '" + strings.ToLower(string(args[0])) + "' command"), false
	}
	if len(args) < 3 {
		return -1, reply.Reply{}, true
	}
	// getPositiveLongFromObjectOrReply: one message for both.
	if n, ok := redisnum.ParseInt(args[2]); ok && n >= 0 {
		return n, reply.Reply{}, true
	}
	return 0, errPositive, false
}

// ParseInsert parses LINSERT's BEFORE or AFTER: after.
func ParseInsert(args [][]byte) (after bool, r reply.Reply, ok bool) {
	if !eq(args[2], "before") && !eq(args[2], "after") {
		return false, errSyntax, false
	}
	return eq(args[2], "after"), reply.Reply{}, true
}

// Pos is LPOS's options.
type Pos struct {
	Rank   int64 // 1 if not given; negative: from the tail
	Count  int64 // -1 if not given
	MaxLen int64 // 0: no limit
}

// ParsePos parses LPOS's options.
func ParsePos(args [][]byte) (Pos, reply.Reply, bool) {
	o := Pos{Rank: 1, Count: -1}
	for j := 3; j < len(args); j++ {
		more := j+1 < len(args)
		switch {
		case eq(args[j], "rank") && more:
			j++
			n, ok := redisnum.ParseInt(args[j])
			if !ok {
				return o, errNotInteger, false
			}
			if n == 0 {
				return o, errRankZero, false
			}
			o.Rank = n
		case eq(args[j], "count") && more:
			j++
			n, ok := redisnum.ParseInt(args[j])
			if !ok || n < 0 {
				return o, errLPosCount, false
			}
			o.Count = n
		case eq(args[j], "maxlen") && more:
			j++
			n, ok := redisnum.ParseInt(args[j])
			if !ok || n < 0 {
				return o, errLPosMaxLen, false
			}
			o.MaxLen = n
		default:
			return o, errSyntax, false
		}
	}
	return o, reply.Reply{}, true
}

// isLeft reports whether a LEFT/RIGHT argument says LEFT; ok=false if neither.
func isLeft(b []byte) (left, ok bool) {
	switch {
	case eq(b, "left"):
		return true, true
	case eq(b, "right"):
		return false, true
	}
	return false, false
}

// Move is a parsed LMOVE, RPOPLPUSH, BLMOVE or BRPOPLPUSH: the ends to
// pop from and push to (left: true) and the timeout of the blocking
// forms (see ParseTimeout).
type Move struct {
	From, To bool
	Timeout  int64
}

// ParseMove parses, in Redis's order, LMOVE and BLMOVE's wherefrom and
// whereto, then the blocking forms' timeout (RPOPLPUSH moves right to
// left).
func ParseMove(args [][]byte) (a Move, r reply.Reply, ok bool) {
	a.To = true
	if len(args) >= 5 {
		if a.From, ok = isLeft(args[3]); !ok {
			return a, errSyntax, false
		}
		if a.To, ok = isLeft(args[4]); !ok {
			return a, errSyntax, false
		}
	}
	if args[0][0]|0x20 == 'b' {
		if a.Timeout, r, ok = ParseTimeout(args[len(args)-1]); !ok {
			return a, r, false
		}
	}
	return a, reply.Reply{}, true
}

// ParseTimeout parses a blocking command's timeout (seconds; see
// redisnum.ParseTimeout) into milliseconds, 0 for "forever".
func ParseTimeout(b []byte) (int64, reply.Reply, bool) {
	ms, ok := redisnum.ParseTimeout(b)
	switch {
	case !ok:
		return 0, errTimeoutFloat, false
	case ms < 0:
		return 0, errTimeoutNeg, false
	}
	return ms, reply.Reply{}, true
}

// ParseBlockingPop parses the timeout, the last argument, of BLPOP,
// BRPOP, BZPOPMIN and BZPOPMAX.
func ParseBlockingPop(args [][]byte) (timeout int64, r reply.Reply, ok bool) {
	return ParseTimeout(args[len(args)-1])
}

// MPop is a parsed LMPOP, BLMPOP, ZMPOP or BZMPOP: the keys, the end to
// pop from (Head: LEFT or MIN), the count (1 if not given) and the
// timeout of the blocking forms (see ParseTimeout).
type MPop struct {
	Keys    [][]byte
	Head    bool
	Count   int64
	Timeout int64
}

// ParseMPop parses [timeout] numkeys key [key ...] head|tail [COUNT
// count] (the timeout for the blocking forms) in Redis's order
// (lmpopGenericCommand, zmpopGenericCommand): the timeout last. head and
// tail are the words naming the two ends.
func ParseMPop(args [][]byte, head, tail string) (a MPop, r reply.Reply, ok bool) {
	numIdx := 1
	blocking := args[0][0]|0x20 == 'b'
	if blocking {
		numIdx = 2
	}
	nk, ok := redisnum.ParseInt(args[numIdx])
	if !ok || nk < 1 {
		return a, errNumKeys, false
	}
	if nk >= int64(len(args)-numIdx-1) {
		return a, errSyntax, false
	}
	whereIdx := numIdx + int(nk) + 1
	switch {
	case eq(args[whereIdx], head):
		a.Head = true
	case !eq(args[whereIdx], tail):
		return a, errSyntax, false
	}
	a.Keys, a.Count = args[numIdx+1:whereIdx], -1
	for j := whereIdx + 1; j < len(args); j++ {
		if a.Count != -1 || !eq(args[j], "count") || j+1 == len(args) {
			return a, errSyntax, false
		}
		j++
		if a.Count, ok = redisnum.ParseInt(args[j]); !ok || a.Count < 1 {
			return a, errMPopCount, false
		}
	}
	a.Count = max(a.Count, 1)
	if blocking {
		if a.Timeout, r, ok = ParseTimeout(args[1]); !ok {
			return a, r, false
		}
	}
	return a, reply.Reply{}, true
}

// ParseLMPop parses LMPOP and BLMPOP (LEFT or RIGHT).
func ParseLMPop(args [][]byte) (MPop, reply.Reply, bool) { return ParseMPop(args, "left", "right") }

// ParseZMPop parses ZMPOP and BZMPOP (MIN or MAX).
func ParseZMPop(args [][]byte) (MPop, reply.Reply, bool) { return ParseMPop(args, "min", "max") }
