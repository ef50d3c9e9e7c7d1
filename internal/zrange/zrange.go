// Package zrange reads and tests the ranges of Redis's sorted set
// commands as redis-server 7.0 does: score ranges (ZCOUNT, ZRANGEBYSCORE,
// ZREMRANGEBYSCORE, ZRANGE BYSCORE: zslParseRange) and lex ranges
// (ZLEXCOUNT, ZRANGEBYLEX, ZREMRANGEBYLEX, ZRANGE BYLEX:
// zslParseLexRange, compared as sdscmplex does). It knows nothing of how
// a sorted set is stored: package kv seeks and walks its index with these
// ranges.
package zrange

import (
	"bytes"
	"math"

	"github.com/kvorum/kvorum/internal/redisnum"
)

// Score is a score range (Redis's zrangespec): Min to Max, each bound
// exclusive or not.
type Score struct {
	Min, Max     float64
	MinEx, MaxEx bool
}

// ParseScore parses a score range's two bounds; ok=false if either is
// invalid ("ERR min or max is not a float").
func ParseScore(min, max []byte) (s Score, ok bool) {
	if s.Min, s.MinEx, ok = parseScoreItem(min); !ok {
		return s, false
	}
	s.Max, s.MaxEx, ok = parseScoreItem(max)
	return s, ok
}

// parseScoreItem parses one bound like zslParseRange: an optional '(' for
// an exclusive bound, then what strtod reads of the C string (up to the
// first NUL), which must be all of it; NaN is refused. Note that strtod
// accepts leading spaces and the empty string (0).
func parseScoreItem(b []byte) (f float64, ex, ok bool) {
	if len(b) > 0 && b[0] == '(' {
		ex = true
		b = b[1:]
	}
	f, n, _ := redisnum.Strtod(b)
	if (n != len(b) && b[n] != 0) || math.IsNaN(f) {
		return 0, false, false
	}
	return f, ex, true
}

// Empty reports whether no score can be in the range.
func (s Score) Empty() bool {
	return s.Min > s.Max || (s.Min == s.Max && (s.MinEx || s.MaxEx))
}

// GteMin reports whether f is not below the range.
func (s Score) GteMin(f float64) bool {
	if s.MinEx {
		return f > s.Min
	}
	return f >= s.Min
}

// LteMax reports whether f is not above the range.
func (s Score) LteMax(f float64) bool {
	if s.MaxEx {
		return f < s.Max
	}
	return f <= s.Max
}

// Bound is one end of a lex range: a member V, or (Inf -1) "-", below
// every member, or (Inf 1) "+", above every member.
type Bound struct {
	V   []byte
	Inf int8
}

// Lex is a lex range (Redis's zlexrangespec).
type Lex struct {
	Min, Max     Bound
	MinEx, MaxEx bool
}

// ParseLex parses a lex range's two bounds; ok=false if either is invalid
// ("ERR min or max not valid string range item").
func ParseLex(min, max []byte) (s Lex, ok bool) {
	if s.Min, s.MinEx, ok = parseLexItem(min); !ok {
		return s, false
	}
	s.Max, s.MaxEx, ok = parseLexItem(max)
	return s, ok
}

// parseLexItem is zslParseLexRangeItem: "+", "-", "(member", "[member".
func parseLexItem(b []byte) (Bound, bool, bool) {
	if len(b) == 0 {
		return Bound{}, false, false
	}
	switch b[0] {
	case '+', '-':
		if len(b) > 1 && b[1] != 0 { // Redis looks at a C string
			return Bound{}, false, false
		}
		if b[0] == '+' {
			return Bound{Inf: 1}, true, true
		}
		return Bound{Inf: -1}, true, true
	case '(':
		return Bound{V: b[1:]}, true, true
	case '[':
		return Bound{V: b[1:]}, false, true
	}
	return Bound{}, false, false
}

// Compare orders two bounds as Redis's sdscmplex: "-" first, "+" last,
// members by their bytes.
func Compare(a, b Bound) int {
	switch {
	case a.Inf != 0 && a.Inf == b.Inf:
		return 0
	case a.Inf == -1 || b.Inf == 1:
		return -1
	case a.Inf == 1 || b.Inf == -1:
		return 1
	}
	return bytes.Compare(a.V, b.V)
}

// Empty reports whether no member can be in the range.
func (s Lex) Empty() bool {
	c := Compare(s.Min, s.Max)
	return c > 0 || (c == 0 && (s.MinEx || s.MaxEx))
}

// GteMin reports whether member m is not below the range.
func (s Lex) GteMin(m []byte) bool {
	c := Compare(Bound{V: m}, s.Min)
	if s.MinEx {
		return c > 0
	}
	return c >= 0
}

// LteMax reports whether member m is not above the range.
func (s Lex) LteMax(m []byte) bool {
	c := Compare(Bound{V: m}, s.Max)
	if s.MaxEx {
		return c < 0
	}
	return c <= 0
}
