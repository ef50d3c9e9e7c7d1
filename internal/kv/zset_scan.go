package kv

import (
	"bytes"
	"slices"

	"github.com/kvorum/kvorum/internal/redisnum"
)

// Sorted set sampling (see zset.go for the encoding): ZSCAN and
// ZRANDMEMBER.

// ---------------------------------------------------------------------------
// ZSCAN

// parseZScan parses ZSCAN's cursor, before the key is looked at (the
// options come after it, as in Redis).
func parseZScan(args [][]byte) (cursor uint64, r Reply, ok bool) {
	if cursor, ok = parseCursor(args[2]); !ok {
		return 0, errInvalidCurs, false
	}
	return cursor, Reply{}, true
}

// cmdZScan pages through the index like HSCAN (scanPage): a position is
// an index element ('s', sortable score, member).
func cmdZScan(x *ctx, args [][]byte, cursor uint64) Reply {
	c, ok, err := x.loadColl(args[1], typeZSet)
	if err != nil || !ok {
		return errOr(err, Array(BulkString("0"), Array()))
	}
	p, start, r, ok := newScanPage(c, args, cursor, []byte{'s'})
	if !ok {
		return r
	}
	z := x.zview(c)
	var out []Reply
	err = z.walk(start, false, func(u uint64, m []byte) bool {
		if !p.next() {
			return false
		}
		p.last = zIndexElem(p.last[:0], u, m)
		if p.matches(m) {
			out = append(out, Bulk(bytes.Clone(m)), Bulk(redisnum.AppendListpackDouble(nil, redisnum.Unsortable(u))))
		}
		return true
	})
	if err != nil {
		return errReply(err)
	}
	return p.reply(out)
}

// ---------------------------------------------------------------------------
// ZRANDMEMBER

func parseZRandMember(args [][]byte) (randArgs, Reply, bool) {
	return parseRandArgs(args, "withscores")
}

// cmdZRandMember picks random ranks and reads them in one walk of the
// index (O(N) at worst). A count of at least the size returns the whole
// set (highest score first, as Redis does); a negative count may repeat
// members.
func cmdZRandMember(x *ctx, args [][]byte, a randArgs) Reply {
	l, withScores := a.count, a.withOpt
	c, ok, err := x.loadColl(args[1], typeZSet)
	if err != nil {
		return errReply(err)
	}
	if !ok {
		if a.has {
			return Array()
		}
		return Nil
	}
	z := x.zview(c)
	n := c.length()
	rng := x.rand()
	if !a.has {
		p := rng.Int64N(n)
		ents, err := z.byRank(p, p, false)
		if err != nil {
			return errReply(err)
		}
		if len(ents) == 0 {
			return Nil
		}
		return Bulk(ents[0].member)
	}
	if l == 0 {
		return Array()
	}
	if l >= n {
		// The whole set, from the highest score down, as Redis's iterator
		// (zuiInitIterator) walks a sorted set.
		ents, err := z.byRank(0, n-1, true)
		if err != nil {
			return errReply(err)
		}
		return zReply(ents, withScores)
	}
	if -l > zRandMemberMax {
		return errZRandTooMany
	}
	picks := randomRanks(rng, n, l) // in reply order
	sorted := slices.Clone(picks)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	got := make(map[int64]zent, len(sorted))
	var rank int64
	next := 0
	err = z.walk(nil, false, func(u uint64, m []byte) bool {
		if rank == sorted[next] {
			got[rank] = zent{member: bytes.Clone(m), score: redisnum.Unsortable(u)}
			next++
		}
		rank++
		return next < len(sorted)
	})
	if err != nil {
		return errReply(err)
	}
	ents := make([]zent, 0, len(picks))
	for _, p := range picks {
		if en, ok := got[p]; ok {
			ents = append(ents, en)
		}
	}
	return zReply(ents, withScores)
}
