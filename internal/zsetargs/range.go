package zsetargs

import (
	"strings"

	"github.com/kvorum/kvorum/internal/redisnum"
	"github.com/kvorum/kvorum/internal/reply"
	"github.com/kvorum/kvorum/internal/zrange"
)

// Span is a parsed score range or, if ByLex, lex range.
type Span struct {
	ByLex bool
	Score zrange.Score
	Lex   zrange.Lex
}

// ParseScoreSpan parses the score range at args[2] and args[3] (ZCOUNT,
// ZREMRANGEBYSCORE).
func ParseScoreSpan(args [][]byte) (Span, reply.Reply, bool) {
	s, ok := zrange.ParseScore(args[2], args[3])
	if !ok {
		return Span{}, errMinMax, false
	}
	return Span{Score: s}, reply.Reply{}, true
}

// ParseLexSpan parses the lex range at args[2] and args[3] (ZLEXCOUNT,
// ZREMRANGEBYLEX).
func ParseLexSpan(args [][]byte) (Span, reply.Reply, bool) {
	s, ok := zrange.ParseLex(args[2], args[3])
	if !ok {
		return Span{}, errLexRange, false
	}
	return Span{ByLex: true, Lex: s}, reply.Reply{}, true
}

// Kind is what a ZRANGE-family command ranges over.
type Kind uint8

// The kinds of range (Range.Kind).
const (
	auto Kind = iota
	ByRank
	ByScore
	ByLex
)

// Range is a parsed ZRANGE-family command.
type Range struct {
	Src         int // position of the source key
	Store       bool
	Kind        Kind
	Rev         bool
	WithScores  bool
	Offset      int64
	Limit       int64 // -1: none
	Start, Stop int64 // ByRank: the indexes as given
	Span        Span  // ByScore, ByLex
}

// ParseRange is the parsing half of Redis's zrangeGenericCommand:
// options, their conflicts and the range, all before the key is looked
// at (ZRANGE, ZRANGESTORE, ZREVRANGE, ZRANGEBYSCORE, ZREVRANGEBYSCORE,
// ZRANGEBYLEX, ZREVRANGEBYLEX).
func ParseRange(args [][]byte) (Range, reply.Reply, bool) {
	q := Range{Src: 1, Limit: -1}
	dir := 0 // 0 auto, 1 forward, 2 reverse
	switch strings.ToLower(string(args[0])) {
	case "zrangestore":
		q.Src, q.Store = 2, true
	case "zrevrange":
		q.Kind, dir = ByRank, 2
	case "zrangebyscore":
		q.Kind, dir = ByScore, 1
	case "zrevrangebyscore":
		q.Kind, dir = ByScore, 2
	case "zrangebylex":
		q.Kind, dir = ByLex, 1
	case "zrevrangebylex":
		q.Kind, dir = ByLex, 2
	}
	minIdx, maxIdx := q.Src+1, q.Src+2
	for j := q.Src + 3; j < len(args); j++ {
		left := len(args) - j - 1
		a := args[j]
		switch {
		case !q.Store && eq(a, "withscores"):
			q.WithScores = true
		case eq(a, "limit") && left >= 2:
			var ok bool
			if q.Offset, ok = redisnum.ParseInt(args[j+1]); !ok {
				return q, errNotInteger, false
			}
			if q.Limit, ok = redisnum.ParseInt(args[j+2]); !ok {
				return q, errNotInteger, false
			}
			j += 2
		case dir == 0 && eq(a, "rev"):
			dir = 2
		case q.Kind == auto && eq(a, "bylex"):
			q.Kind = ByLex
		case q.Kind == auto && eq(a, "byscore"):
			q.Kind = ByScore
		default:
			return q, errSyntax, false
		}
	}
	q.Rev = dir == 2
	if q.Kind == auto {
		q.Kind = ByRank
	}
	if q.Limit != -1 && q.Kind == ByRank {
		return q, errLimitRank, false
	}
	if q.WithScores && q.Kind == ByLex {
		return q, errScoresLex, false
	}
	if q.Rev && q.Kind != ByRank {
		minIdx, maxIdx = maxIdx, minIdx // the range is given as max, min
	}
	// The span parsers read args[2] and args[3].
	bounds := [][]byte{nil, nil, args[minIdx], args[maxIdx]}
	var r reply.Reply
	ok := true
	switch q.Kind {
	case ByRank:
		if q.Start, ok = redisnum.ParseInt(bounds[2]); !ok {
			return q, errNotInteger, false
		}
		if q.Stop, ok = redisnum.ParseInt(bounds[3]); !ok {
			return q, errNotInteger, false
		}
	case ByScore:
		q.Span, r, ok = ParseScoreSpan(bounds)
	case ByLex:
		q.Span, r, ok = ParseLexSpan(bounds)
	}
	return q, r, ok
}
