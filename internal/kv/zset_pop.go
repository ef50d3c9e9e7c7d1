package kv

import (
	"bytes"

	"github.com/kvorum/kvorum/internal/redisnum"
)

// Sorted set pops (see zset.go for the encoding): ZPOPMIN, ZPOPMAX, ZMPOP
// and the blocking BZPOPMIN, BZPOPMAX and BZMPOP, registered as their
// non-blocking kernels (the node blocks).

// ---------------------------------------------------------------------------
// ZPOPMIN, ZPOPMAX, ZMPOP, BZPOPMIN, BZPOPMAX, BZMPOP

func checkZPop(args [][]byte) (Reply, bool) {
	if len(args) > 3 {
		return errSyntax, false
	}
	if len(args) == 3 {
		// getPositiveLongFromObjectOrReply: one message for both.
		if n, ok := redisnum.ParseInt(args[2]); !ok || n < 0 {
			return errZPositive, false
		}
	}
	return Reply{}, true
}

// cmdZPop pops from the low (ZPOPMIN) or high end. Without a count the
// reply is [member, score]; with one, pairs (nested in RESP3), as Redis
// replies.
func cmdZPop(x *ctx, args [][]byte) Reply {
	if r, ok := checkZPop(args); !ok {
		return r
	}
	count := int64(1)
	if len(args) == 3 {
		count, _ = redisnum.ParseInt(args[2])
	}
	c, ok, e := x.loadColl(args[1], typeZSet)
	if e != nil {
		return errReply(e)
	}
	if !ok || count == 0 {
		return Array()
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
	return ents, x.saveColl(c)
}

// parseZMPop parses ZMPOP numkeys key [key ...] MIN|MAX [COUNT count] in
// Redis's order (zmpopGenericCommand), all before the keys are looked at;
// BZMPOP has the timeout first (numkeys at index 2).
func parseZMPop(args [][]byte) (keys [][]byte, max bool, count int64, r Reply, ok bool) {
	numIdx := int64(1)
	if args[0][0]|0x20 == 'b' {
		numIdx = 2
	}
	numkeys, ok := redisnum.ParseInt(args[numIdx])
	if !ok || numkeys < 1 {
		return nil, false, 0, errZNumKeys, false
	}
	where := numIdx + 1 + numkeys
	if numkeys > int64(len(args)) || where >= int64(len(args)) {
		return nil, false, 0, errSyntax, false
	}
	switch {
	case eq(args[where], "min"):
	case eq(args[where], "max"):
		max = true
	default:
		return nil, false, 0, errSyntax, false
	}
	count = -1
	for j := int(where) + 1; j < len(args); j++ {
		if count == -1 && eq(args[j], "count") && j+1 < len(args) {
			j++
			n, ok := redisnum.ParseInt(args[j])
			if !ok || n < 1 {
				return nil, false, 0, errZMPopCount, false
			}
			count = n
			continue
		}
		return nil, false, 0, errSyntax, false
	}
	if count == -1 {
		count = 1
	}
	return args[numIdx+1 : where], max, count, Reply{}, true
}

func checkZMPop(args [][]byte) (Reply, bool) {
	_, _, _, r, ok := parseZMPop(args)
	return r, ok
}

// checkBZMPop checks the timeout first, as Redis does (bzmpopCommand).
func checkBZMPop(args [][]byte) (Reply, bool) {
	if _, r, ok := listTimeout(args[1]); !ok {
		return r, false
	}
	return checkZMPop(args)
}

// cmdBZPop is the kernel of BZPOPMIN and BZPOPMAX: pop one member from the
// first of the keys that exists (which must be a sorted set), replying
// [key, member, score], or a null array.
func cmdBZPop(x *ctx, args [][]byte) Reply {
	max := eq(args[0], "bzpopmax")
	for _, k := range args[1 : len(args)-1] {
		c, ok, e := x.loadColl(k, typeZSet)
		if e != nil {
			return errReply(e)
		}
		if !ok {
			continue
		}
		ents, err := x.zpop(c, 1, max)
		if err != nil {
			return errReply(err)
		}
		if len(ents) == 0 {
			continue
		}
		return Array(Bulk(bytes.Clone(k)), Bulk(ents[0].member), zScoreReply(ents[0].score))
	}
	return NilArray
}

// cmdZMPop pops from the first of the keys that exists (which must be a
// sorted set). The reply is [key, [[member, score], ...]] in both
// protocols, or a null array when every key is missing.
func cmdZMPop(x *ctx, args [][]byte) Reply {
	keys, max, count, r, ok := parseZMPop(args)
	if !ok {
		return r
	}
	for _, k := range keys {
		c, ok, e := x.loadColl(k, typeZSet)
		if e != nil {
			return errReply(e)
		}
		if !ok {
			continue
		}
		ents, err := x.zpop(c, count, max)
		if err != nil {
			return errReply(err)
		}
		pairs := make([]Reply, len(ents))
		for i, en := range ents {
			pairs[i] = Array(Bulk(en.member), zScoreReply(en.score))
		}
		return Array(Bulk(bytes.Clone(k)), Array(pairs...))
	}
	return NilArray
}
