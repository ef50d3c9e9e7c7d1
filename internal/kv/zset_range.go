package kv

import (
	"bytes"
	"math"
	"strings"

	"github.com/kvorum/kvorum/internal/notify"
	"github.com/kvorum/kvorum/internal/redisnum"
	"github.com/kvorum/kvorum/internal/zrange"
)

// Sorted sets by range (see zset.go for the encoding): where the walks of
// score and lex ranges start, ZCOUNT, ZLEXCOUNT, the ZRANGE family with
// ZRANGESTORE, and ZREMRANGEBYRANK, ZREMRANGEBYSCORE, ZREMRANGEBYLEX.

// ---------------------------------------------------------------------------
// Score and lex ranges (parsed and tested by package zrange)

// zspan is a parsed score range or, if byLex, lex range.
type zspan struct {
	byLex bool
	score zrange.Score
	lex   zrange.Lex
}

// parseScoreArgs parses the score range at args[2] and args[3].
func parseScoreArgs(args [][]byte) (zspan, Reply, bool) {
	s, ok := zrange.ParseScore(args[2], args[3])
	if !ok {
		return zspan{}, errZMinMax, false
	}
	return zspan{score: s}, Reply{}, true
}

// parseLexArgs parses the lex range at args[2] and args[3].
func parseLexArgs(args [][]byte) (zspan, Reply, bool) {
	s, ok := zrange.ParseLex(args[2], args[3])
	if !ok {
		return zspan{}, errZLexRange, false
	}
	return zspan{byLex: true, lex: s}, Reply{}, true
}

// spanWalk returns where a walk over span s starts (at its last entry if
// rev) and in, which tells whether an entry of the walk is still inside
// s; ok=false: no entry is inside.
func (z *zview) spanWalk(s zspan, rev bool) (start []byte, in func(u uint64, m []byte) bool, ok bool, err error) {
	if s.byLex {
		in = func(_ uint64, m []byte) bool {
			if rev {
				return s.lex.GteMin(m)
			}
			return s.lex.LteMax(m)
		}
		start, ok, err = z.lexStart(s.lex, rev)
		return start, in, ok, err
	}
	if s.score.Empty() {
		return nil, nil, false, nil
	}
	in = func(u uint64, _ []byte) bool {
		if rev {
			return s.score.GteMin(redisnum.Unsortable(u))
		}
		return s.score.LteMax(redisnum.Unsortable(u))
	}
	return zScoreStart(s.score, rev), in, true, nil
}

// zScoreStart returns the walk start of the first entry of a score range
// (the last one if rev).
func zScoreStart(s zrange.Score, rev bool) []byte {
	if !rev {
		u := redisnum.Sortable(s.Min)
		if s.MinEx {
			u++
		}
		return zPos(u)
	}
	u := redisnum.Sortable(s.Max)
	if !s.MaxEx {
		u++
	}
	return zPos(u)
}

// lexStart finds where a lex range starts as Redis's listpack does
// (zzlFirstInLexRange, or zzlLastInLexRange if rev): the range is empty
// unless the last member is >= min and the first <= max; then the first
// member >= min in index order (the last <= max if rev) starts it if it is
// also <= max (>= min). ok=false: the range is empty.
func (z *zview) lexStart(s zrange.Lex, rev bool) (start []byte, ok bool, err error) {
	if s.Empty() {
		return nil, false, nil
	}
	first, last, ok, err := z.ends()
	if err != nil || !ok {
		return nil, false, err
	}
	if !s.GteMin(last.member) || !s.LteMax(first.member) {
		return nil, false, nil
	}
	var from []byte
	if u := redisnum.Sortable(first.score); u == redisnum.Sortable(last.score) {
		// One score: the index is in member order, seek the bound.
		b := s.Min
		if rev {
			b = s.Max
		}
		switch {
		case b.Inf == -1 && !rev:
			from = zPos(u)
		case b.Inf == 1 && rev:
			from = zPos(u + 1)
		case b.Inf != 0:
			return nil, false, nil
		case !rev && s.MinEx, rev && !s.MaxEx:
			from = zAfter(u, b.V)
		default:
			from = zIndexElem(nil, u, b.V)
		}
	}
	found := false
	var fu uint64
	var fm []byte
	err = z.walk(from, rev, func(u uint64, m []byte) bool {
		if (!rev && s.GteMin(m)) || (rev && s.LteMax(m)) {
			found, fu, fm = true, u, bytes.Clone(m)
			return false
		}
		return true
	})
	if err != nil || !found {
		return nil, false, err
	}
	if (!rev && !s.LteMax(fm)) || (rev && !s.GteMin(fm)) {
		return nil, false, nil
	}
	return zAt(fu, fm, rev), true, nil
}

// ---------------------------------------------------------------------------
// ZCOUNT, ZLEXCOUNT, ZREMRANGEBYSCORE, ZREMRANGEBYLEX

// cmdZSpan counts the members of a score or lex span (ZCOUNT, ZLEXCOUNT:
// it walks them, O(count)) or removes them (ZREMRANGEBYSCORE,
// ZREMRANGEBYLEX).
func cmdZSpan(x *ctx, args [][]byte, s zspan) Reply {
	c, ok, err := x.loadColl(args[1], typeZSet)
	if err != nil || !ok {
		return errOr(err, Int(0))
	}
	z := x.zview(c)
	start, in, ok, err := z.spanWalk(s, false)
	if err != nil || !ok {
		return errOr(err, Int(0))
	}
	if len(args[0]) > 9 { // ZREMRANGEBY*
		n, err := z.remove(start, false, 0, math.MaxInt64, in)
		return x.zRemoved(args, c, n, err)
	}
	var n int64
	err = z.walk(start, false, func(u uint64, m []byte) bool {
		if !in(u, m) {
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
	rank       indexRange
	span       zspan // by score or lex
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
	// The range parsers read args[2] and args[3].
	bounds := [][]byte{nil, nil, args[minIdx], args[maxIdx]}
	var r Reply
	ok := true
	switch q.kind {
	case zrRank:
		q.rank, r, ok = parseRange(bounds)
	case zrScore:
		q.span, r, ok = parseScoreArgs(bounds)
	case zrLex:
		q.span, r, ok = parseLexArgs(bounds)
	}
	return q, r, ok
}

func cmdZRange(x *ctx, args [][]byte, q zrangeReq) Reply {
	c, ok, err := x.loadColl(args[q.src], typeZSet)
	if err != nil {
		return errReply(err)
	}
	var ents []zent
	if ok {
		if ents, err = x.zview(c).rangeEnts(q); err != nil {
			return errReply(err)
		}
	}
	if q.store {
		return x.zStore(args[1], ents, "zrangestore")
	}
	return zReply(ents, q.withScores)
}

// rangeEnts returns the entries a ZRANGE-family request selects, in reply
// order.
func (z *zview) rangeEnts(q zrangeReq) ([]zent, error) {
	n := z.c.length()
	if q.kind == zrRank {
		from, to := q.rank.span(n)
		switch {
		case from >= to:
			return nil, nil
		case q.rev:
			return z.byRank(n-to, n-1-from, true)
		}
		return z.byRank(from, to-1, false)
	}
	if q.offset < 0 || (q.offset > 0 && q.offset >= n) || q.limit == 0 {
		return nil, nil
	}
	start, in, ok, err := z.spanWalk(q.span, q.rev)
	if err != nil || !ok {
		return nil, err
	}
	// The offset skips entries without checking them against the range,
	// as Redis does.
	offset := q.offset
	var out []zent
	err = z.walk(start, q.rev, func(u uint64, m []byte) bool {
		if offset > 0 {
			offset--
			return true
		}
		if !in(u, m) {
			return false
		}
		out = append(out, zent{member: bytes.Clone(m), score: redisnum.Unsortable(u)})
		return q.limit < 0 || int64(len(out)) < q.limit
	})
	return out, err
}

// ---------------------------------------------------------------------------
// ZREMRANGEBYRANK

// zRemoved finishes a ZREMRANGEBY* command that deleted n entries (the
// whole set: saveColl deletes the key with one range deletion).
func (x *ctx) zRemoved(args [][]byte, c *coll, n int64, err error) Reply {
	if err != nil {
		return errReply(err)
	}
	if n > 0 {
		c.setLength(c.length() - n)
		if err := x.saveColl(c); err != nil {
			return errReply(err)
		}
		x.collEvent(notify.ZSet, strings.ToLower(string(args[0])), c)
	}
	return Int(n)
}

func cmdZRemRangeByRank(x *ctx, args [][]byte, q indexRange) Reply {
	c, ok, err := x.loadColl(args[1], typeZSet)
	if err != nil || !ok {
		return errOr(err, Int(0))
	}
	n := c.length()
	from, to := q.span(n)
	switch {
	case from >= to:
		return Int(0)
	case from == 0 && to == n:
		return x.zRemoved(args, c, n, nil) // everything
	}
	// Walk from the nearer end.
	z := x.zview(c)
	var deleted int64
	if from <= n-to {
		deleted, err = z.remove(nil, false, from, to-from, nil)
	} else {
		deleted, err = z.remove(nil, true, n-to, to-from, nil)
	}
	return x.zRemoved(args, c, deleted, err)
}
