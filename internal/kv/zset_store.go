package kv

import (
	"bytes"
	"math"
	"sort"
	"strings"

	"github.com/kvorum/kvorum/internal/redisnum"
	"github.com/kvorum/kvorum/internal/zsetargs"
)

// Sorted set algebra (see zset.go for the encoding): ZUNIONSTORE,
// ZINTERSTORE, ZDIFFSTORE, ZUNION, ZINTER, ZDIFF and ZINTERCARD, whose
// sources may be sets too.

// ---------------------------------------------------------------------------
// ZUNIONSTORE, ZINTERSTORE, ZDIFFSTORE, ZUNION, ZINTER, ZDIFF, ZINTERCARD

// zsrc is one input of a set operation: a sorted set, a set (every member
// scores 1) or a missing key (c == nil).
type zsrc struct {
	key    []byte
	c      *coll
	n      int64
	weight float64
	z      *zview
}

// zsrcEach calls fn for every member of s (sorted sets from the highest
// score down, as Redis's zuiInitIterator). member is valid only during the
// call.
func (x *ctx) zsrcEach(s *zsrc, fn func(member []byte, score float64) bool) error {
	switch {
	case s.c == nil:
		return nil
	case s.c.rec.typ == typeZSet:
		return s.z.walk(nil, true, func(u uint64, m []byte) bool { return fn(m, redisnum.Unsortable(u)) })
	default:
		return x.iterElems(s.c, nil, nil, false, func(m, _ []byte) bool { return fn(m, 1) })
	}
}

// zsrcScore returns member's score in s.
func (x *ctx) zsrcScore(s *zsrc, member []byte) (float64, bool, error) {
	switch {
	case s.c == nil:
		return 0, false, nil
	case s.c.rec.typ == typeZSet:
		return s.z.score(member)
	default:
		ok, err := x.hasElem(s.c, member)
		return 1, ok, err
	}
}

// zSortEnts sorts ents as a sorted set orders its members.
func zSortEnts(ents []zent) {
	sort.Slice(ents, func(i, j int) bool {
		a, b := ents[i], ents[j]
		if a.score != b.score {
			return a.score < b.score
		}
		return bytes.Compare(a.member, b.member) < 0
	})
}

// cmdZSetOp is a port of zunionInterDiffGenericCommand. The keys are
// checked for their type before the options are parsed, as Redis does.
func cmdZSetOp(x *ctx, args [][]byte, o zsetargs.SetOp) Reply {
	srcs := make([]zsrc, o.NumKeys)
	j := o.NumIdx + 1
	for i := range srcs {
		k := args[j]
		j++
		srcs[i] = zsrc{key: k, weight: 1}
		rec, ok, err := x.load(k)
		if err != nil {
			return errReply(err)
		}
		if !ok {
			continue
		}
		if rec.typ != typeZSet && rec.typ != typeSet {
			return errWrongType
		}
		c := &coll{key: k, rec: rec}
		srcs[i].c, srcs[i].n = c, c.length()
		if rec.typ == typeZSet {
			srcs[i].z = x.zview(c)
		}
	}
	opts, r, ok := o.ParseOptions(args)
	if !ok {
		return r
	}
	for i, w := range opts.Weights {
		srcs[i].weight = w
	}
	agg, withScores, limit := opts.Agg, opts.WithScores, opts.Limit
	if o.Op != zsetargs.Diff {
		// Smallest first, as Redis (stable, so equal sizes keep their order:
		// with SUM the order of the additions can matter).
		sort.SliceStable(srcs, func(a, b int) bool { return srcs[a].n < srcs[b].n })
	}
	var ents []zent
	var card int64
	var werr error
	switch o.Op {
	case zsetargs.Inter:
		if srcs[0].n == 0 {
			break
		}
		err := x.zsrcEach(&srcs[0], func(m []byte, s float64) bool {
			score := srcs[0].weight * s
			if math.IsNaN(score) {
				score = 0
			}
			for k := 1; k < len(srcs); k++ {
				v, found := s, true
				if !bytes.Equal(srcs[k].key, srcs[0].key) {
					if v, found, werr = x.zsrcScore(&srcs[k], m); werr != nil {
						return false
					}
				}
				if !found {
					return true
				}
				score = zsetargs.Aggregate(score, v*srcs[k].weight, agg)
			}
			if o.CardOnly {
				card++
				return limit == 0 || card < limit
			}
			ents = append(ents, zent{member: bytes.Clone(m), score: score})
			return true
		})
		if werr == nil {
			werr = err
		}
	case zsetargs.Union:
		at := map[string]int{}
		for i := range srcs {
			s := &srcs[i]
			err := x.zsrcEach(s, func(m []byte, sc float64) bool {
				score := s.weight * sc
				if math.IsNaN(score) {
					score = 0
				}
				if p, ok := at[string(m)]; ok {
					ents[p].score = zsetargs.Aggregate(ents[p].score, score, agg)
				} else {
					at[string(m)] = len(ents)
					ents = append(ents, zent{member: bytes.Clone(m), score: score})
				}
				return true
			})
			if err != nil {
				werr = err
				break
			}
		}
	case zsetargs.Diff:
		if srcs[0].n == 0 {
			break
		}
		for k := 1; k < len(srcs); k++ {
			if bytes.Equal(srcs[k].key, srcs[0].key) && srcs[0].c != nil {
				srcs[0].n = 0 // the first set minus itself
			}
		}
		if srcs[0].n == 0 {
			break
		}
		err := x.zsrcEach(&srcs[0], func(m []byte, s float64) bool {
			for k := 1; k < len(srcs); k++ {
				var found bool
				if _, found, werr = x.zsrcScore(&srcs[k], m); werr != nil {
					return false
				}
				if found {
					return true
				}
			}
			ents = append(ents, zent{member: bytes.Clone(m), score: s})
			return true
		})
		if werr == nil {
			werr = err
		}
	}
	if werr != nil {
		return errReply(werr)
	}
	if o.CardOnly {
		return Int(card)
	}
	zSortEnts(ents)
	if o.Store {
		return x.zStore(args[1], ents, strings.ToLower(string(args[0])))
	}
	return zReply(ents, withScores)
}
