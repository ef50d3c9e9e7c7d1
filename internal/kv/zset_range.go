package kv

import (
	"bytes"
	"math"
	"strings"

	"github.com/kvorum/kvorum/internal/notify"
	"github.com/kvorum/kvorum/internal/redisnum"
	"github.com/kvorum/kvorum/internal/zrange"
	"github.com/kvorum/kvorum/internal/zsetargs"
)

// Sorted sets by range (see zset.go for the encoding): where the walks of
// score and lex ranges start, ZCOUNT, ZLEXCOUNT, the ZRANGE family with
// ZRANGESTORE, and ZREMRANGEBYRANK, ZREMRANGEBYSCORE, ZREMRANGEBYLEX.

// ---------------------------------------------------------------------------
// Score and lex ranges (parsed by package zsetargs, tested by package zrange)

// spanWalk returns where a walk over span s starts (at its last entry if
// rev) and in, which tells whether an entry of the walk is still inside
// s; ok=false: no entry is inside.
func (z *zview) spanWalk(s zsetargs.Span, rev bool) (start []byte, in func(u uint64, m []byte) bool, ok bool, err error) {
	if s.ByLex {
		in = func(_ uint64, m []byte) bool {
			if rev {
				return s.Lex.GteMin(m)
			}
			return s.Lex.LteMax(m)
		}
		start, ok, err = z.lexStart(s.Lex, rev)
		return start, in, ok, err
	}
	if s.Score.Empty() {
		return nil, nil, false, nil
	}
	in = func(u uint64, _ []byte) bool {
		if rev {
			return s.Score.GteMin(redisnum.Unsortable(u))
		}
		return s.Score.LteMax(redisnum.Unsortable(u))
	}
	return zScoreStart(s.Score, rev), in, true, nil
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
func cmdZSpan(x *ctx, args [][]byte, s zsetargs.Span) Reply {
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

func cmdZRange(x *ctx, args [][]byte, q zsetargs.Range) Reply {
	c, ok, err := x.loadColl(args[q.Src], typeZSet)
	if err != nil {
		return errReply(err)
	}
	var ents []zent
	if ok {
		if ents, err = x.zview(c).rangeEnts(q); err != nil {
			return errReply(err)
		}
	}
	if q.Store {
		return x.zStore(args[1], ents, "zrangestore")
	}
	return zReply(ents, q.WithScores)
}

// rangeEnts returns the entries a ZRANGE-family request selects, in reply
// order.
func (z *zview) rangeEnts(q zsetargs.Range) ([]zent, error) {
	n := z.c.length()
	if q.Kind == zsetargs.ByRank {
		from, to := indexRange{q.Start, q.Stop}.span(n)
		switch {
		case from >= to:
			return nil, nil
		case q.Rev:
			return z.byRank(n-to, n-1-from, true)
		}
		return z.byRank(from, to-1, false)
	}
	if q.Offset < 0 || (q.Offset > 0 && q.Offset >= n) || q.Limit == 0 {
		return nil, nil
	}
	start, in, ok, err := z.spanWalk(q.Span, q.Rev)
	if err != nil || !ok {
		return nil, err
	}
	// The offset skips entries without checking them against the range,
	// as Redis does.
	offset := q.Offset
	var out []zent
	err = z.walk(start, q.Rev, func(u uint64, m []byte) bool {
		if offset > 0 {
			offset--
			return true
		}
		if !in(u, m) {
			return false
		}
		out = append(out, zent{member: bytes.Clone(m), score: redisnum.Unsortable(u)})
		return q.Limit < 0 || int64(len(out)) < q.Limit
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
