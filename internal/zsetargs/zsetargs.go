// Package zsetargs is the sorted set commands' arguments, parsed as Redis
// 7.0 parses them, with Redis's error replies: ZADD and ZINCRBY, the
// ZRANGE family (with ZCOUNT's and ZLEXCOUNT's ranges), ZUNION, ZINTER,
// ZDIFF and their STORE forms, ZINTERCARD, ZPOPMIN and ZPOPMAX. Package
// kv runs the commands over the keyspace; the parsers here read nothing
// but their arguments.
package zsetargs

import (
	"strings"

	"github.com/kvorum/kvorum/internal/redisnum"
	"github.com/kvorum/kvorum/internal/reply"
)

// Error texts of the sorted set commands' syntax (Redis 7.0).
var (
	errNotFloat   = reply.Error("ERR value is not a valid float")
	errPositive   = reply.Error("ERR value is out of range, must be positive")
	errMinMax     = reply.Error("ERR min or max is not a float")
	errLexRange   = reply.Error("ERR min or max not valid string range item")
	errWeight     = reply.Error("ERR weight value is not a float")
	errNXXX       = reply.Error("ERR XX and NX options at the same time are not compatible")
	errGTLTNX     = reply.Error("ERR GT, LT, and/or NX options at the same time are not compatible")
	errIncrPair   = reply.Error("ERR INCR option supports a single increment-element pair")
	errLimitRank  = reply.Error("ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX")
	errScoresLex  = reply.Error("ERR syntax error, WITHSCORES not supported in combination with BYLEX")
	errLimitNeg   = reply.Error("ERR LIMIT can't be negative")
	errSyntax     = reply.ErrSyntax
	errNotInteger = reply.ErrNotInt
)

// eq compares an argument with a keyword, ignoring case.
func eq(b []byte, s string) bool { return strings.EqualFold(string(b), s) }

// ZADD's flags (ZAdd.Flags).
const (
	NX = 1 << iota
	XX
	GT
	LT
	CH
	Incr
)

// ZAdd is a parsed ZADD (or ZINCRBY).
type ZAdd struct {
	Flags  int       // NX, XX, GT, LT, CH, Incr
	First  int       // position of the first score; its member follows it
	Scores []float64 // the scores, in order
}

// ParseZAdd parses ZADD's options and scores in Redis's order (all of it
// before the key is looked at); ZINCRBY is ZADD INCR.
func ParseZAdd(args [][]byte) (ZAdd, reply.Reply, bool) {
	if eq(args[0], "zincrby") {
		f, ok := redisnum.ParseDouble(args[2])
		if !ok {
			return ZAdd{}, errNotFloat, false
		}
		return ZAdd{Flags: Incr, First: 2, Scores: []float64{f}}, reply.Reply{}, true
	}
	a := ZAdd{First: 2}
opts:
	for ; a.First < len(args); a.First++ {
		o := args[a.First]
		switch {
		case eq(o, "nx"):
			a.Flags |= NX
		case eq(o, "xx"):
			a.Flags |= XX
		case eq(o, "ch"):
			a.Flags |= CH
		case eq(o, "incr"):
			a.Flags |= Incr
		case eq(o, "gt"):
			a.Flags |= GT
		case eq(o, "lt"):
			a.Flags |= LT
		default:
			break opts
		}
	}
	elements := len(args) - a.First
	if elements%2 != 0 || elements == 0 {
		return a, errSyntax, false
	}
	f := a.Flags
	nx, xx, gt, lt := f&NX != 0, f&XX != 0, f&GT != 0, f&LT != 0
	if nx && xx {
		return a, errNXXX, false
	}
	if (gt && nx) || (lt && nx) || (gt && lt) {
		return a, errGTLTNX, false
	}
	if f&Incr != 0 && elements > 2 {
		return a, errIncrPair, false
	}
	a.Scores = make([]float64, elements/2)
	for j := range a.Scores {
		s, ok := redisnum.ParseDouble(args[a.First+2*j])
		if !ok {
			return a, errNotFloat, false
		}
		a.Scores[j] = s
	}
	return a, reply.Reply{}, true
}

// ParsePop parses ZPOPMIN and ZPOPMAX's count (1 if not given) before
// the key is looked at, as Redis does.
func ParsePop(args [][]byte) (count int64, r reply.Reply, ok bool) {
	if len(args) > 3 {
		return 0, errSyntax, false
	}
	if len(args) < 3 {
		return 1, reply.Reply{}, true
	}
	// getPositiveLongFromObjectOrReply: one message for both.
	if n, ok := redisnum.ParseInt(args[2]); ok && n >= 0 {
		return n, reply.Reply{}, true
	}
	return 0, errPositive, false
}
