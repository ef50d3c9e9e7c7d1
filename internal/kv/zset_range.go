package kv

import (
	"bytes"
	"math"
	"strings"

	"github.com/kvorum/kvorum/internal/redisnum"
)

// Sorted sets by range (see zset.go for the encoding): score and lex range
// specs and where their walks start, ZCOUNT, ZLEXCOUNT, the ZRANGE family
// with ZRANGESTORE, and ZREMRANGEBYRANK, ZREMRANGEBYSCORE, ZREMRANGEBYLEX.

// ---------------------------------------------------------------------------
// Score and lex ranges

// zScoreSpec is a parsed score range (Redis's zrangespec).
type zScoreSpec struct {
	min, max     float64
	minex, maxex bool
}

// zParseRangeItem parses one bound like zslParseRange: an optional '(' for
// an exclusive bound, then what strtod reads of the C string (up to the
// first NUL), which must be all of it; NaN is refused. Note that strtod
// accepts leading spaces and the empty string (0).
func zParseRangeItem(b []byte) (f float64, ex, ok bool) {
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

func zParseScoreRange(minb, maxb []byte) (zScoreSpec, bool) {
	var s zScoreSpec
	var ok bool
	if s.min, s.minex, ok = zParseRangeItem(minb); !ok {
		return s, false
	}
	if s.max, s.maxex, ok = zParseRangeItem(maxb); !ok {
		return s, false
	}
	return s, true
}

func (s *zScoreSpec) empty() bool {
	return s.min > s.max || (s.min == s.max && (s.minex || s.maxex))
}

func (s *zScoreSpec) gteMin(f float64) bool {
	if s.minex {
		return f > s.min
	}
	return f >= s.min
}

func (s *zScoreSpec) lteMax(f float64) bool {
	if s.maxex {
		return f < s.max
	}
	return f <= s.max
}

// zLexBound is one end of a lex range: a member, or "-" (inf -1, below
// everything) or "+" (inf 1, above everything).
type zLexBound struct {
	v   []byte
	inf int8
}

type zLexSpec struct {
	min, max     zLexBound
	minex, maxex bool
}

// zParseLexItem is zslParseLexRangeItem: "+", "-", "(member", "[member".
func zParseLexItem(b []byte) (zLexBound, bool, bool) {
	if len(b) == 0 {
		return zLexBound{}, false, false
	}
	switch b[0] {
	case '+', '-':
		if len(b) > 1 && b[1] != 0 { // Redis looks at a C string
			return zLexBound{}, false, false
		}
		if b[0] == '+' {
			return zLexBound{inf: 1}, true, true
		}
		return zLexBound{inf: -1}, true, true
	case '(':
		return zLexBound{v: b[1:]}, true, true
	case '[':
		return zLexBound{v: b[1:]}, false, true
	}
	return zLexBound{}, false, false
}

func zParseLexRange(minb, maxb []byte) (zLexSpec, bool) {
	var s zLexSpec
	var ok bool
	if s.min, s.minex, ok = zParseLexItem(minb); !ok {
		return s, false
	}
	if s.max, s.maxex, ok = zParseLexItem(maxb); !ok {
		return s, false
	}
	return s, true
}

// zLexCmp is Redis's sdscmplex.
func zLexCmp(a, b zLexBound) int {
	switch {
	case a.inf != 0 && a.inf == b.inf:
		return 0
	case a.inf == -1 || b.inf == 1:
		return -1
	case a.inf == 1 || b.inf == -1:
		return 1
	}
	return bytes.Compare(a.v, b.v)
}

func (s *zLexSpec) empty() bool {
	c := zLexCmp(s.min, s.max)
	return c > 0 || (c == 0 && (s.minex || s.maxex))
}

func (s *zLexSpec) gteMin(m []byte) bool {
	c := zLexCmp(zLexBound{v: m}, s.min)
	if s.minex {
		return c > 0
	}
	return c >= 0
}

func (s *zLexSpec) lteMax(m []byte) bool {
	c := zLexCmp(zLexBound{v: m}, s.max)
	if s.maxex {
		return c < 0
	}
	return c <= 0
}

// zScoreStart returns the walk start of the first entry of a score range
// (the last one if rev).
func zScoreStart(s *zScoreSpec, rev bool) []byte {
	if !rev {
		u := redisnum.Sortable(s.min)
		if s.minex {
			u++
		}
		return zPos(u)
	}
	u := redisnum.Sortable(s.max)
	if !s.maxex {
		u++
	}
	return zPos(u)
}

// lexStart finds where a lex range starts as Redis's listpack does
// (zzlFirstInLexRange, or zzlLastInLexRange if rev): the range is empty
// unless the last member is >= min and the first <= max; then the first
// member >= min in index order (the last <= max if rev) starts it if it is
// also <= max (>= min). ok=false: the range is empty.
func (z *zview) lexStart(s *zLexSpec, rev bool) (start []byte, ok bool, err error) {
	if s.empty() {
		return nil, false, nil
	}
	first, last, ok, err := z.ends()
	if err != nil || !ok {
		return nil, false, err
	}
	if !s.gteMin(last.member) || !s.lteMax(first.member) {
		return nil, false, nil
	}
	var from []byte
	if u := redisnum.Sortable(first.score); u == redisnum.Sortable(last.score) {
		// One score: the index is in member order, seek the bound.
		b := s.min
		if rev {
			b = s.max
		}
		switch {
		case b.inf == -1 && !rev:
			from = zPos(u)
		case b.inf == 1 && rev:
			from = zPos(u + 1)
		case b.inf != 0:
			return nil, false, nil
		case !rev && s.minex, rev && !s.maxex:
			from = zAfter(u, b.v)
		default:
			from = zIndexElem(nil, u, b.v)
		}
	}
	found := false
	var fu uint64
	var fm []byte
	err = z.walk(from, rev, func(u uint64, m []byte) bool {
		if (!rev && s.gteMin(m)) || (rev && s.lteMax(m)) {
			found, fu, fm = true, u, bytes.Clone(m)
			return false
		}
		return true
	})
	if err != nil || !found {
		return nil, false, err
	}
	if (!rev && !s.lteMax(fm)) || (rev && !s.gteMin(fm)) {
		return nil, false, nil
	}
	return zAt(fu, fm, rev), true, nil
}

// ---------------------------------------------------------------------------
// ZCOUNT, ZLEXCOUNT

func checkZScoreArgs(args [][]byte) (Reply, bool) {
	if _, ok := zParseScoreRange(args[2], args[3]); !ok {
		return errZMinMax, false
	}
	return Reply{}, true
}

func checkZLexArgs(args [][]byte) (Reply, bool) {
	if _, ok := zParseLexRange(args[2], args[3]); !ok {
		return errZLexRange, false
	}
	return Reply{}, true
}

// cmdZCount walks the range it counts: O(count).
func cmdZCount(x *ctx, args [][]byte) Reply {
	s, ok := zParseScoreRange(args[2], args[3])
	if !ok {
		return errZMinMax
	}
	c, ok, e := x.loadColl(args[1], typeZSet)
	if e != nil {
		return errReply(e)
	}
	if !ok || s.empty() {
		return Int(0)
	}
	var n int64
	err := x.zview(c).walk(zScoreStart(&s, false), false, func(u uint64, _ []byte) bool {
		if !s.lteMax(redisnum.Unsortable(u)) {
			return false
		}
		n++
		return true
	})
	if err != nil {
		return errReply(err)
	}
	return Int(n)
}

func cmdZLexCount(x *ctx, args [][]byte) Reply {
	s, ok := zParseLexRange(args[2], args[3])
	if !ok {
		return errZLexRange
	}
	c, ok, e := x.loadColl(args[1], typeZSet)
	if e != nil {
		return errReply(e)
	}
	if !ok {
		return Int(0)
	}
	z := x.zview(c)
	start, ok, err := z.lexStart(&s, false)
	if err != nil {
		return errReply(err)
	}
	if !ok {
		return Int(0)
	}
	var n int64
	err = z.walk(start, false, func(_ uint64, m []byte) bool {
		if !s.lteMax(m) {
			return false
		}
		n++
		return true
	})
	if err != nil {
		return errReply(err)
	}
	return Int(n)
}

// ---------------------------------------------------------------------------
// ZRANGE and friends, ZRANGESTORE

type zrangeKind uint8

const (
	zrAuto zrangeKind = iota
	zrRank
	zrScore
	zrLex
)

// zrangeReq is a parsed ZRANGE-family command.
type zrangeReq struct {
	src        int // position of the source key
	store      bool
	kind       zrangeKind
	rev        bool
	withScores bool
	offset     int64
	limit      int64 // -1: none
	start, end int64
	score      zScoreSpec
	lex        zLexSpec
}

// parseZRange is the parsing half of Redis's zrangeGenericCommand: options,
// their conflicts and the range, all before the key is looked at.
func parseZRange(args [][]byte) (zrangeReq, Reply, bool) {
	q := zrangeReq{src: 1, limit: -1}
	dir := 0 // 0 auto, 1 forward, 2 reverse
	switch strings.ToLower(string(args[0])) {
	case "zrangestore":
		q.src, q.store = 2, true
	case "zrevrange":
		q.kind, dir = zrRank, 2
	case "zrangebyscore":
		q.kind, dir = zrScore, 1
	case "zrevrangebyscore":
		q.kind, dir = zrScore, 2
	case "zrangebylex":
		q.kind, dir = zrLex, 1
	case "zrevrangebylex":
		q.kind, dir = zrLex, 2
	}
	minIdx, maxIdx := q.src+1, q.src+2
	for j := q.src + 3; j < len(args); j++ {
		left := len(args) - j - 1
		a := args[j]
		switch {
		case !q.store && eq(a, "withscores"):
			q.withScores = true
		case eq(a, "limit") && left >= 2:
			var ok bool
			if q.offset, ok = redisnum.ParseInt(args[j+1]); !ok {
				return q, errNotInt, false
			}
			if q.limit, ok = redisnum.ParseInt(args[j+2]); !ok {
				return q, errNotInt, false
			}
			j += 2
		case dir == 0 && eq(a, "rev"):
			dir = 2
		case q.kind == zrAuto && eq(a, "bylex"):
			q.kind = zrLex
		case q.kind == zrAuto && eq(a, "byscore"):
			q.kind = zrScore
		default:
			return q, errSyntax, false
		}
	}
	q.rev = dir == 2
	if q.kind == zrAuto {
		q.kind = zrRank
	}
	if q.limit != -1 && q.kind == zrRank {
		return q, errZLimitRank, false
	}
	if q.withScores && q.kind == zrLex {
		return q, errZScoresLex, false
	}
	if q.rev && q.kind != zrRank {
		minIdx, maxIdx = maxIdx, minIdx // the range is given as max, min
	}
	switch q.kind {
	case zrRank:
		var ok bool
		if q.start, ok = redisnum.ParseInt(args[minIdx]); !ok {
			return q, errNotInt, false
		}
		if q.end, ok = redisnum.ParseInt(args[maxIdx]); !ok {
			return q, errNotInt, false
		}
	case zrScore:
		var ok bool
		if q.score, ok = zParseScoreRange(args[minIdx], args[maxIdx]); !ok {
			return q, errZMinMax, false
		}
	case zrLex:
		var ok bool
		if q.lex, ok = zParseLexRange(args[minIdx], args[maxIdx]); !ok {
			return q, errZLexRange, false
		}
	}
	return q, Reply{}, true
}

func checkZRange(args [][]byte) (Reply, bool) {
	_, r, ok := parseZRange(args)
	return r, ok
}

func cmdZRange(x *ctx, args [][]byte) Reply {
	q, r, ok := parseZRange(args)
	if !ok {
		return r
	}
	c, ok, e := x.loadColl(args[q.src], typeZSet)
	if e != nil {
		return errReply(e)
	}
	var ents []zent
	if ok {
		var err error
		if ents, err = x.zview(c).rangeEnts(&q); err != nil {
			return errReply(err)
		}
	}
	if q.store {
		return x.zStore(args[1], ents)
	}
	return zReply(ents, q.withScores)
}

// rangeEnts returns the entries a ZRANGE-family request selects, in reply
// order.
func (z *zview) rangeEnts(q *zrangeReq) ([]zent, error) {
	n := z.c.length()
	switch q.kind {
	case zrRank:
		start, end := q.start, q.end
		if start < 0 {
			start += n
		}
		if end < 0 {
			end += n
		}
		if start < 0 {
			start = 0
		}
		if start > end || start >= n {
			return nil, nil
		}
		if end >= n {
			end = n - 1
		}
		if q.rev {
			return z.byRank(n-1-end, n-1-start, true)
		}
		return z.byRank(start, end, false)
	case zrScore:
		s := &q.score
		if s.empty() || (q.offset > 0 && q.offset >= n) || q.offset < 0 {
			return nil, nil
		}
		return z.collect(zScoreStart(s, q.rev), q.rev, q.offset, q.limit, func(u uint64, _ []byte) bool {
			if q.rev {
				return s.gteMin(redisnum.Unsortable(u))
			}
			return s.lteMax(redisnum.Unsortable(u))
		})
	default:
		s := &q.lex
		if q.offset < 0 {
			return nil, nil
		}
		start, ok, err := z.lexStart(s, q.rev)
		if err != nil || !ok {
			return nil, err
		}
		return z.collect(start, q.rev, q.offset, q.limit, func(_ uint64, m []byte) bool {
			if q.rev {
				return s.gteMin(m)
			}
			return s.lteMax(m)
		})
	}
}

// collect walks from start, skips offset entries (not checked against the
// range, as Redis does), then returns up to limit entries (limit < 0: no
// limit) while in(entry) holds.
func (z *zview) collect(start []byte, rev bool, offset, limit int64, in func(u uint64, m []byte) bool) ([]zent, error) {
	var out []zent
	if limit == 0 {
		return nil, nil
	}
	err := z.walk(start, rev, func(u uint64, m []byte) bool {
		if offset > 0 {
			offset--
			return true
		}
		if !in(u, m) {
			return false
		}
		out = append(out, zent{member: bytes.Clone(m), score: redisnum.Unsortable(u)})
		return limit < 0 || int64(len(out)) < limit
	})
	return out, err
}

// ---------------------------------------------------------------------------
// ZREMRANGEBYRANK, ZREMRANGEBYSCORE, ZREMRANGEBYLEX

// zRemoved finishes a ZREMRANGEBY* command that deleted n entries.
func (x *ctx) zRemoved(c *coll, n int64) Reply {
	if n > 0 {
		c.setLength(c.length() - n)
		if err := x.saveColl(c); err != nil {
			return errReply(err)
		}
	}
	return Int(n)
}

func cmdZRemRangeByRank(x *ctx, args [][]byte) Reply {
	start, _ := redisnum.ParseInt(args[2])
	end, _ := redisnum.ParseInt(args[3])
	c, ok, e := x.loadColl(args[1], typeZSet)
	if e != nil {
		return errReply(e)
	}
	if !ok {
		return Int(0)
	}
	n := c.length()
	if start < 0 {
		start += n
	}
	if end < 0 {
		end += n
	}
	if start < 0 {
		start = 0
	}
	if start > end || start >= n {
		return Int(0)
	}
	if end >= n {
		end = n - 1
	}
	if start == 0 && end == n-1 {
		// Everything: one range deletion.
		if err := x.remove(args[1]); err != nil {
			return errReply(err)
		}
		return Int(n)
	}
	z := x.zview(c)
	var deleted int64
	var err error
	if start <= n-1-end {
		deleted, err = z.remove(nil, false, start, end-start+1, nil)
	} else {
		deleted, err = z.remove(nil, true, n-1-end, end-start+1, nil)
	}
	if err != nil {
		return errReply(err)
	}
	return x.zRemoved(c, deleted)
}

func cmdZRemRangeByScore(x *ctx, args [][]byte) Reply {
	s, ok := zParseScoreRange(args[2], args[3])
	if !ok {
		return errZMinMax
	}
	c, ok, e := x.loadColl(args[1], typeZSet)
	if e != nil {
		return errReply(e)
	}
	if !ok || s.empty() {
		return Int(0)
	}
	deleted, err := x.zview(c).remove(zScoreStart(&s, false), false, 0, math.MaxInt64, func(u uint64, _ []byte) bool {
		return s.lteMax(redisnum.Unsortable(u))
	})
	if err != nil {
		return errReply(err)
	}
	return x.zRemoved(c, deleted)
}

func cmdZRemRangeByLex(x *ctx, args [][]byte) Reply {
	s, ok := zParseLexRange(args[2], args[3])
	if !ok {
		return errZLexRange
	}
	c, ok, e := x.loadColl(args[1], typeZSet)
	if e != nil {
		return errReply(e)
	}
	if !ok {
		return Int(0)
	}
	z := x.zview(c)
	start, ok, err := z.lexStart(&s, false)
	if err != nil {
		return errReply(err)
	}
	if !ok {
		return Int(0)
	}
	deleted, err := z.remove(start, false, 0, math.MaxInt64, func(_ uint64, m []byte) bool { return s.lteMax(m) })
	if err != nil {
		return errReply(err)
	}
	return x.zRemoved(c, deleted)
}
