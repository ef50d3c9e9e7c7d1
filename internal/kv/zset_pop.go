package kv

import (
	"bytes"

	"github.com/kvorum/kvorum/internal/listargs"
	"github.com/kvorum/kvorum/internal/notify"
	"github.com/kvorum/kvorum/internal/redisnum"
)

// Sorted set pops (see zset.go for the encoding): ZPOPMIN, ZPOPMAX, ZMPOP
// and the blocking BZPOPMIN, BZPOPMAX and BZMPOP, registered as their
// non-blocking kernels (the node blocks).

// ---------------------------------------------------------------------------
// ZPOPMIN, ZPOPMAX, ZMPOP, BZPOPMIN, BZPOPMAX, BZMPOP

// cmdZPop pops from the low (ZPOPMIN) or high end. Without a count the
// reply is [member, score]; with one, pairs (nested in RESP3), as Redis
// replies.
func cmdZPop(x *ctx, args [][]byte, count int64) Reply {
	c, ok, err := x.loadColl(args[1], typeZSet)
	if err != nil || !ok || count == 0 {
		return errOr(err, Array())
	}
	ents, err := x.zpop(c, count, eq(args[0], "zpopmax"))
	if err != nil {
		return errReply(err)
	}
	if len(args) == 2 && len(ents) == 1 {
		return Array(Bulk(ents[0].member), zScoreReply(ents[0].score))
	}
	return zReply(ents, true)
}

// zpop removes and returns up to count members from the low end of c (the
// high end if max), in pop order.
func (x *ctx) zpop(c *coll, count int64, max bool) ([]zent, error) {
	z := x.zview(c)
	var ents []zent
	err := z.walk(nil, max, func(u uint64, m []byte) bool {
		ents = append(ents, zent{member: bytes.Clone(m), score: redisnum.Unsortable(u)})
		return int64(len(ents)) < count
	})
	if err != nil {
		return nil, err
	}
	for _, en := range ents {
		if err := z.del(redisnum.Sortable(en.score), en.member); err != nil {
			return nil, err
		}
	}
	c.setLength(c.length() - int64(len(ents)))
	if err := x.saveColl(c); err != nil {
		return nil, err
	}
	ev := "zpopmin"
	if max {
		ev = "zpopmax"
	}
	x.collEvent(notify.ZSet, ev, c)
	return ents, nil
}

// zpopFirst pops up to count members from the low end (the high end if
// max) of the first of keys that exists (which must be a sorted set);
// ents is nil if none exists.
func (x *ctx) zpopFirst(keys [][]byte, count int64, max bool) (key []byte, ents []zent, err error) {
	for _, k := range keys {
		c, ok, err := x.loadColl(k, typeZSet)
		if err != nil {
			return nil, nil, err
		}
		if ok {
			ents, err = x.zpop(c, count, max)
			return bytes.Clone(k), ents, err
		}
	}
	return nil, nil, nil
}

// cmdBZPop is the kernel of BZPOPMIN and BZPOPMAX: pop one member from the
// first of the keys that exists (which must be a sorted set), replying
// [key, member, score], or a null array.
func cmdBZPop(x *ctx, args [][]byte, _ int64) Reply {
	k, ents, err := x.zpopFirst(args[1:len(args)-1], 1, eq(args[0], "bzpopmax"))
	if err != nil || len(ents) == 0 {
		return errOr(err, NilArray)
	}
	return Array(Bulk(k), Bulk(ents[0].member), zScoreReply(ents[0].score))
}

// cmdZMPop pops from the first of the keys that exists (which must be a
// sorted set). The reply is [key, [[member, score], ...]] in both
// protocols, or a null array when every key is missing.
func cmdZMPop(x *ctx, args [][]byte, a listargs.MPop) Reply {
	k, ents, err := x.zpopFirst(a.Keys, a.Count, !a.Head)
	if err != nil || ents == nil {
		return errOr(err, NilArray)
	}
	pairs := make([]Reply, len(ents))
	for i, en := range ents {
		pairs[i] = Array(Bulk(en.member), zScoreReply(en.score))
	}
	return Array(Bulk(k), Array(pairs...))
}
