package kv

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/listargs"
	"github.com/kvorum/kvorum/internal/notify"
	"github.com/kvorum/kvorum/internal/redisnum"
	"github.com/kvorum/kvorum/internal/zsetargs"
)

// Sorted sets. Every member has two element keys under the collection's
// version (see doc.go):
//
//	'm' + member                    -> score (float64 bits, 8 bytes BE)
//	's' + sortable(score) + member  -> empty
//
// sortable (redisnum.Sortable) maps a float64 onto 8 bytes whose byte
// order is the numeric order (negative: all bits flipped; positive: the
// sign bit flipped; -0 is stored as +0, as Redis's listpack does), so the
// 's' index is ordered exactly as Redis orders a sorted set: by score,
// then by member bytes. The metadata holds the member count, so ZCARD reads only it.
//
// Costs: ZADD/ZREM/ZSCORE/ZINCRBY are point reads and writes. Ranges by
// score (and by lex among equal scores) seek the index and read only what
// they return. There is no skiplist span to count with, so a rank costs a
// walk: ZRANK walks from both ends at once (O(min(rank, N-rank))), ZRANGE
// by rank seeks the nearer end and skips to the range (O(min(start,
// N-stop) + count)), ZCOUNT and ZLEXCOUNT walk the range they count
// (O(count), Redis is O(log N)). ZUNIONSTORE/ZINTERSTORE/ZDIFFSTORE compute
// the result in memory (it is written whole anyway) and replace the
// destination with a new incarnation.
//
// Lex ranges follow Redis's listpack algorithm, which is well defined even
// when the scores differ (Redis documents lex ranges only for equal
// scores): the first member >= min in index order starts the range, which
// ends at the first member > max. When the first and last scores are equal
// the index is in member order and the start is a seek.
//
// Scores in replies are formatted as Redis 7.0 does: "%.17g" for ZSCORE,
// ZINCRBY and WITHSCORES (addReplyDouble); ZSCAN returns them as a
// listpack stores them (integers without a fraction, else "%.17g"). Replies
// have Redis's shapes in RESP2 and RESP3 (doubles, nested pairs).
//
// The blocking BZPOPMIN, BZPOPMAX and BZMPOP are registered as their
// non-blocking kernels, like the blocking list commands (list.go): pop if
// a key has members, else a null array; the node blocks (BlockingTimeout).

func init() {
	const g = "sorted-set"
	defParsed("zadd", -4, "write denyoom fast", 1, 1, 1, g, "Adds one or more members to a sorted set, or updates their scores. Creates the key if it doesn't exist.", zsetargs.ParseZAdd, runZAdd)
	defParsed("zincrby", 4, "write denyoom fast", 1, 1, 1, g, "Increments the score of a member in a sorted set.", zsetargs.ParseZAdd, runZAdd)
	def("zrem", -3, "write fast", 1, 1, 1, g, "Removes one or more members from a sorted set. Deletes the sorted set if all members were removed.", cmdZRem, nil)
	def("zscore", 3, "readonly fast", 1, 1, 1, g, "Returns the score of a member in a sorted set.", cmdZScore, nil)
	def("zmscore", -3, "readonly fast", 1, 1, 1, g, "Returns the score of one or more members in a sorted set.", cmdZMScore, nil)
	def("zcard", 2, "readonly fast", 1, 1, 1, g, "Returns the number of members in a sorted set.", cmdZCard, nil)
	defParsed("zcount", 4, "readonly fast", 1, 1, 1, g, "Returns the count of members in a sorted set that have scores within a range.", zsetargs.ParseScoreSpan, cmdZSpan)
	defParsed("zlexcount", 4, "readonly fast", 1, 1, 1, g, "Returns the number of members in a sorted set within a lexicographical range.", zsetargs.ParseLexSpan, cmdZSpan)
	def("zrank", 3, "readonly fast", 1, 1, 1, g, "Returns the index of a member in a sorted set ordered by ascending scores.", cmdZRank, nil)
	def("zrevrank", 3, "readonly fast", 1, 1, 1, g, "Returns the index of a member in a sorted set ordered by descending scores.", cmdZRank, nil)
	defParsed("zrange", -4, "readonly", 1, 1, 1, g, "Returns members in a sorted set within a range of indexes.", zsetargs.ParseRange, cmdZRange)
	defParsed("zrangestore", -5, "write denyoom", 1, 2, 1, g, "Stores a range of members from sorted set in a key.", zsetargs.ParseRange, cmdZRange)
	defParsed("zrevrange", -4, "readonly", 1, 1, 1, g, "Returns members in a sorted set within a range of indexes in reverse order.", zsetargs.ParseRange, cmdZRange)
	defParsed("zrangebyscore", -4, "readonly", 1, 1, 1, g, "Returns members in a sorted set within a range of scores.", zsetargs.ParseRange, cmdZRange)
	defParsed("zrevrangebyscore", -4, "readonly", 1, 1, 1, g, "Returns members in a sorted set within a range of scores in reverse order.", zsetargs.ParseRange, cmdZRange)
	defParsed("zrangebylex", -4, "readonly", 1, 1, 1, g, "Returns members in a sorted set within a lexicographical range.", zsetargs.ParseRange, cmdZRange)
	defParsed("zrevrangebylex", -4, "readonly", 1, 1, 1, g, "Returns members in a sorted set within a lexicographical range in reverse order.", zsetargs.ParseRange, cmdZRange)
	defParsed("zpopmin", -2, "write fast", 1, 1, 1, g, "Returns the lowest-scoring members from a sorted set after removing them. Deletes the sorted set if the last member was popped.", zsetargs.ParsePop, cmdZPop)
	defParsed("zpopmax", -2, "write fast", 1, 1, 1, g, "Returns the highest-scoring members from a sorted set after removing them. Deletes the sorted set if the last member was popped.", zsetargs.ParsePop, cmdZPop)
	defParsed("zmpop", -4, "write movablekeys", 0, 0, 0, g, "Returns the highest- or lowest-scoring members from one or more sorted sets after removing them. Deletes the sorted set if the last member was popped.", listargs.ParseZMPop, cmdZMPop)
	defParsed("bzpopmin", -3, "write noscript blocking fast", 1, -2, 1, g, "Removes and returns the member with the lowest score from one or more sorted sets. Blocks until a member is available otherwise. Deletes the sorted set if the last element was popped.", listargs.ParseBlockingPop, cmdBZPop)
	defParsed("bzpopmax", -3, "write noscript blocking fast", 1, -2, 1, g, "Removes and returns the member with the highest score from one or more sorted sets. Blocks until a member is available otherwise. Deletes the sorted set if the last element was popped.", listargs.ParseBlockingPop, cmdBZPop)
	defParsed("bzmpop", -5, "write blocking movablekeys", 0, 0, 0, g, "Removes and returns a member by score from one or more sorted sets. Blocks until a member is available otherwise. Deletes the sorted set if the last element was popped.", listargs.ParseZMPop, cmdZMPop)
	defParsed("zremrangebyrank", 4, "write", 1, 1, 1, g, "Removes members in a sorted set within a range of indexes. Deletes the sorted set if all members were removed.", parseRange, cmdZRemRangeByRank)
	defParsed("zremrangebyscore", 4, "write", 1, 1, 1, g, "Removes members in a sorted set within a range of scores. Deletes the sorted set if all members were removed.", zsetargs.ParseScoreSpan, cmdZSpan)
	defParsed("zremrangebylex", 4, "write", 1, 1, 1, g, "Removes members in a sorted set within a lexicographical range. Deletes the sorted set if all members were removed.", zsetargs.ParseLexSpan, cmdZSpan)
	defParsed("zunionstore", -4, "write denyoom movablekeys", 1, 1, 1, g, "Stores the union of multiple sorted sets in a key.", zsetargs.ParseSetOp, cmdZSetOp)
	defParsed("zinterstore", -4, "write denyoom movablekeys", 1, 1, 1, g, "Stores the intersect of multiple sorted sets in a key.", zsetargs.ParseSetOp, cmdZSetOp)
	defParsed("zdiffstore", -4, "write denyoom movablekeys", 1, 1, 1, g, "Stores the difference of multiple sorted sets in a key.", zsetargs.ParseSetOp, cmdZSetOp)
	defParsed("zunion", -3, "readonly movablekeys", 0, 0, 0, g, "Returns the union of multiple sorted sets.", zsetargs.ParseSetOp, cmdZSetOp)
	defParsed("zinter", -3, "readonly movablekeys", 0, 0, 0, g, "Returns the intersect of multiple sorted sets.", zsetargs.ParseSetOp, cmdZSetOp)
	defParsed("zdiff", -3, "readonly movablekeys", 0, 0, 0, g, "Returns the difference between multiple sorted sets.", zsetargs.ParseSetOp, cmdZSetOp)
	defParsed("zintercard", -3, "readonly movablekeys", 0, 0, 0, g, "Returns the number of members of the intersect of multiple sorted sets.", zsetargs.ParseSetOp, cmdZSetOp)
	defParsed("zscan", -3, "readonly", 1, 1, 1, g, "Iterates over members and scores of a sorted set.", parseZScan, cmdZScan)
	defParsed("zrandmember", -2, "readonly", 1, 1, 1, g, "Returns one or more random members from a sorted set.", parseZRandMember, cmdZRandMember)
}

// Redis error texts of sorted set commands.
var (
	errZNaN         = Error("ERR resulting score is not a number (NaN)")
	errZRandTooMany = Error("ERR ZRANDMEMBER count is too large: kvorum replies with at most 1048576 members")
)

// zRandMemberMax bounds the reply of ZRANDMEMBER with a negative count,
// the one sorted set reply not bounded by the data.
const zRandMemberMax = 1 << 20

// ---------------------------------------------------------------------------
// Scores (redisnum parses and formats them as Redis does).

// zScoreReply is the reply for one score: a Double, which the resp layer
// writes as a RESP3 double (",1.5") or, in RESP2, as the bulk string
// Redis 7.0 sends ("%.17g", redisnum.AppendDouble); Lua scripts get
// that string too (or a {double=...} table after redis.setresp(3)).
func zScoreReply(f float64) Reply { return Double(f) }

// ---------------------------------------------------------------------------
// Storage

// zent is one member and its score.
type zent struct {
	member []byte
	score  float64
}

// zview accesses the elements of a loaded sorted set.
type zview struct {
	x    *ctx
	c    *coll
	base []byte // element key prefix of c's incarnation
	kb   []byte // scratch key
}

func (x *ctx) zview(c *coll) *zview {
	return &zview{x: x, c: c, base: appendElemPrefix(make([]byte, 0, len(c.key)+16), c.key, c.rec.version)}
}

// mkey returns the storage key of member's score (scratch, valid until the
// next call).
func (z *zview) mkey(member []byte) []byte {
	z.kb = append(append(append(z.kb[:0], z.base...), 'm'), member...)
	return z.kb
}

// zIndexElem appends the index element ('s' + sortable + member) to b.
func zIndexElem(b []byte, u uint64, member []byte) []byte {
	b = binary.BigEndian.AppendUint64(append(b, 's'), u)
	return append(b, member...)
}

// skey returns the storage key of member's index entry (scratch).
func (z *zview) skey(u uint64, member []byte) []byte {
	z.kb = zIndexElem(append(z.kb[:0], z.base...), u, member)
	return z.kb
}

// score returns member's score; ok=false if it is not a member.
func (z *zview) score(member []byte) (float64, bool, error) {
	v, cl, err := z.x.r.Get(z.mkey(member))
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	var f float64
	if len(v) == 8 {
		f = math.Float64frombits(binary.BigEndian.Uint64(v))
	}
	_ = cl.Close()
	return f, true, nil
}

// set gives member the score f, replacing the index entry of its old
// score if it had one. -0 is stored as +0, as Redis's listpack does.
func (z *zview) set(member []byte, f, old float64, had bool) error {
	if f == 0 {
		f = 0
	}
	u := redisnum.Sortable(f)
	if !had {
		z.x.grow(z.c, member, nil)
	}
	if had {
		if ou := redisnum.Sortable(old); ou != u {
			if err := z.x.w.Delete(z.skey(ou, member), nil); err != nil {
				return err
			}
		}
	}
	var vb [8]byte
	binary.BigEndian.PutUint64(vb[:], math.Float64bits(f))
	if err := z.x.w.Set(z.mkey(member), vb[:], nil); err != nil {
		return err
	}
	return z.x.w.Set(z.skey(u, member), []byte{}, nil)
}

// del removes member, whose index position is u.
func (z *zview) del(u uint64, member []byte) error {
	if err := z.x.w.Delete(z.skey(u, member), nil); err != nil {
		return err
	}
	return z.x.w.Delete(z.mkey(member), nil)
}

// walk calls fn for the index entries in score order (reverse order if
// rev), from position start: forward, the entries whose index element is
// >= start; reverse, the entries < start (nil: from the first / last
// entry); until fn returns false. member is valid only during the call; no
// writes may happen during the walk.
func (z *zview) walk(start []byte, rev bool, fn func(u uint64, member []byte) bool) (err error) {
	lo := append(append(make([]byte, 0, len(z.base)+1), z.base...), 's')
	hi := append(append(make([]byte, 0, len(z.base)+1), z.base...), 's'+1)
	if start != nil {
		start = append(append(make([]byte, 0, len(z.base)+len(start)), z.base...), start...)
	}
	n := len(z.base)
	return walkRange(z.x.r, lo, hi, start, rev, func(it *pebble.Iterator) (bool, error) {
		k := it.Key()
		if len(k) < n+9 {
			return true, nil
		}
		return fn(binary.BigEndian.Uint64(k[n+1:]), k[n+9:]), nil
	})
}

// zPos returns the walk start of the first index entry with sortable score
// >= u (forward), or of the last one with sortable score < u (reverse).
func zPos(u uint64) []byte { return binary.BigEndian.AppendUint64([]byte{'s'}, u) }

// zAfter returns the forward walk start just after the entry (u, member).
func zAfter(u uint64, member []byte) []byte { return append(zIndexElem(nil, u, member), 0) }

// zAt returns the walk start of the entry (u, member) itself: for a
// forward walk the entry; for a reverse walk the position just after it.
func zAt(u uint64, member []byte, rev bool) []byte {
	if rev {
		return zAfter(u, member)
	}
	return zIndexElem(nil, u, member)
}

// ends returns the first and last index entries (copies); ok=false if the
// set is empty.
func (z *zview) ends() (first, last zent, ok bool, err error) {
	for i, rev := range []bool{false, true} {
		e := &first
		if i == 1 {
			e = &last
		}
		err = z.walk(nil, rev, func(u uint64, m []byte) bool {
			*e = zent{member: bytes.Clone(m), score: redisnum.Unsortable(u)}
			ok = true
			return false
		})
		if err != nil || !ok {
			return first, last, false, err
		}
	}
	return first, last, true, nil
}

// rank returns the 0-based ascending rank of the entry (u, member), which
// must exist. It walks from both ends at once and stops at the first end
// that reaches the entry: O(min(rank, N-rank)).
func (z *zview) rank(u uint64, member []byte) (int64, error) {
	lo := append(append([]byte{}, z.base...), 's')
	hi := append(append([]byte{}, z.base...), 's'+1)
	target := zIndexElem(append([]byte{}, z.base...), u, member)
	var its [2]*pebble.Iterator
	for i := range its {
		it, err := z.x.r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
		if err != nil {
			if i == 1 {
				_ = its[0].Close()
			}
			return 0, err
		}
		its[i] = it
	}
	defer func() { _ = its[0].Close(); _ = its[1].Close() }()
	fwd, back := its[0].First(), its[1].Last()
	var nf, nb int64
	for fwd || back {
		if fwd {
			if bytes.Equal(its[0].Key(), target) {
				return nf, nil
			}
			fwd = its[0].Next()
			nf++
		}
		if back {
			if bytes.Equal(its[1].Key(), target) {
				return z.c.length() - 1 - nb, nil
			}
			back = its[1].Prev()
			nb++
		}
	}
	if err := its[0].Error(); err != nil {
		return 0, err
	}
	return 0, errors.New("kv: sorted set member missing from its index")
}

// byRank returns the entries of ascending ranks [from, to] (0 <= from <=
// to < N), in descending order if rev. It walks from the nearer end.
func (z *zview) byRank(from, to int64, rev bool) ([]zent, error) {
	n := z.c.length()
	want := to - from + 1
	fromStart := from <= n-1-to
	skip := from
	if !fromStart {
		skip = n - 1 - to
	}
	out := make([]zent, 0, min(want, 1024))
	err := z.walk(nil, !fromStart, func(u uint64, m []byte) bool {
		if skip > 0 {
			skip--
			return true
		}
		out = append(out, zent{member: bytes.Clone(m), score: redisnum.Unsortable(u)})
		return int64(len(out)) < want
	})
	if fromStart == rev {
		slices.Reverse(out)
	}
	return out, err
}

// zRemoveChunk bounds how many entries a removal reads before deleting them.
const zRemoveChunk = 256

// remove deletes entries walking from start (see walk), after skipping
// skip of them, at most max, while keep says so. It returns how many it
// deleted; the caller updates the length.
func (z *zview) remove(start []byte, rev bool, skip, max int64, keep func(u uint64, m []byte) bool) (int64, error) {
	var deleted int64
	type ent struct {
		u uint64
		m []byte
	}
	chunk := make([]ent, 0, zRemoveChunk)
	for {
		chunk = chunk[:0]
		stop := false
		err := z.walk(start, rev, func(u uint64, m []byte) bool {
			if skip > 0 {
				skip--
				return true
			}
			if deleted+int64(len(chunk)) >= max || (keep != nil && !keep(u, m)) {
				stop = true
				return false
			}
			chunk = append(chunk, ent{u, bytes.Clone(m)})
			return len(chunk) < zRemoveChunk
		})
		if err != nil {
			return deleted, err
		}
		for _, e := range chunk {
			if err := z.del(e.u, e.m); err != nil {
				return deleted, err
			}
		}
		deleted += int64(len(chunk))
		if stop || len(chunk) < zRemoveChunk {
			return deleted, nil
		}
		last := chunk[len(chunk)-1]
		if rev {
			start = zIndexElem(nil, last.u, last.m)
		} else {
			start = zAfter(last.u, last.m)
		}
	}
}

// newZSet returns an empty sorted set for k with a fresh version, which
// saveColl will create.
func (x *ctx) newZSet(k []byte) (*coll, error) {
	v, err := x.newVersion()
	if err != nil {
		return nil, err
	}
	c := &coll{key: k, rec: record{typ: typeZSet, version: v}}
	c.setLength(0)
	return c, nil
}

// zStore replaces dst with a sorted set of ents (distinct members) and
// emits event, or deletes it if ents is empty, and replies the new length.
func (x *ctx) zStore(dst []byte, ents []zent, event string) Reply {
	if len(ents) == 0 {
		return x.removeStored(dst)
	}
	c, err := x.newZSet(dst)
	if err != nil {
		return errReply(err)
	}
	z := x.zview(c)
	for _, en := range ents {
		if err := z.set(en.member, en.score, 0, false); err != nil {
			return errReply(err)
		}
	}
	c.setLength(int64(len(ents)))
	if err := x.saveColl(c); err != nil {
		return errReply(err)
	}
	x.event(notify.ZSet, event, dst)
	return Int(int64(len(ents)))
}

// zReply replies members, or with withScores [member, score] pairs (flat
// in RESP2, nested in RESP3, as Redis replies).
func zReply(ents []zent, withScores bool) Reply {
	if !withScores {
		out := make([]Reply, len(ents))
		for i, e := range ents {
			out[i] = Bulk(e.member)
		}
		return Array(out...)
	}
	out := make([]Reply, 0, 2*len(ents))
	for _, e := range ents {
		out = append(out, Bulk(e.member), zScoreReply(e.score))
	}
	return Pairs(out...)
}

// ---------------------------------------------------------------------------
// ZADD, ZINCRBY, ZREM, ZSCORE, ZMSCORE, ZCARD, ZRANK

// cmdZAdd runs ZADD arguments that no parser checked before (GEOADD's).
func cmdZAdd(x *ctx, args [][]byte) Reply {
	a, r, ok := zsetargs.ParseZAdd(args)
	if !ok {
		return r
	}
	return runZAdd(x, args, a)
}

// runZAdd is a port of zaddGenericCommand and zsetAdd.
func runZAdd(x *ctx, args [][]byte, a zsetargs.ZAdd) Reply {
	f := a.Flags
	nx, xx, gt, lt, incr := f&zsetargs.NX != 0, f&zsetargs.XX != 0, f&zsetargs.GT != 0, f&zsetargs.LT != 0, f&zsetargs.Incr != 0
	c, exists, err := x.loadColl(args[1], typeZSet)
	if err != nil {
		return errReply(err)
	}
	var added, updated, processed int64
	var score float64
	if exists || !xx {
		if !exists {
			if c, err = x.newZSet(args[1]); err != nil {
				return errReply(err)
			}
		}
		z := x.zview(c)
		n := c.length()
		for j, s := range a.Scores {
			member := args[a.First+2*j+1]
			cur, had, err := z.score(member)
			if err != nil {
				return errReply(err)
			}
			switch {
			case had && nx, !had && xx:
				continue
			case had:
				if incr {
					s += cur
					if math.IsNaN(s) {
						return errZNaN // INCR takes one member: nothing was written
					}
				}
				if (lt && s >= cur) || (gt && s <= cur) {
					continue
				}
				processed++
				score = s
				if s != cur {
					if err := z.set(member, s, cur, true); err != nil {
						return errReply(err)
					}
					updated++
				}
			default:
				if err := z.set(member, s, 0, false); err != nil {
					return errReply(err)
				}
				processed++
				added++
				n++
				score = s
			}
		}
		if added+updated > 0 {
			c.setLength(n)
			if err := x.saveColl(c); err != nil {
				return errReply(err)
			}
			ev := "zadd"
			if incr {
				ev = "zincr"
			}
			x.event(notify.ZSet, ev, c.key)
		}
	}
	if incr {
		if processed > 0 {
			return zScoreReply(score)
		}
		return Nil
	}
	if f&zsetargs.CH != 0 {
		return Int(added + updated)
	}
	return Int(added)
}

func cmdZRem(x *ctx, args [][]byte) Reply {
	c, ok, err := x.loadColl(args[1], typeZSet)
	if err != nil || !ok {
		return errOr(err, Int(0))
	}
	z := x.zview(c)
	n := c.length()
	var deleted int64
	for _, m := range args[2:] {
		cur, had, err := z.score(m)
		if err != nil {
			return errReply(err)
		}
		if had {
			if err := z.del(redisnum.Sortable(cur), m); err != nil {
				return errReply(err)
			}
			deleted++
			n--
		}
		if n == 0 {
			break
		}
	}
	if deleted > 0 {
		c.setLength(n)
		if err := x.saveColl(c); err != nil {
			return errReply(err)
		}
		x.collEvent(notify.ZSet, "zrem", c)
	}
	return Int(deleted)
}

// zScoreOf looks member up in the sorted set at key: its score, and the
// set's view; ok=false if the key or the member is missing.
func (x *ctx) zScoreOf(key, member []byte) (z *zview, f float64, ok bool, err error) {
	c, ok, err := x.loadColl(key, typeZSet)
	if err != nil || !ok {
		return nil, 0, false, err
	}
	z = x.zview(c)
	f, ok, err = z.score(member)
	return z, f, ok, err
}

func cmdZScore(x *ctx, args [][]byte) Reply {
	_, f, ok, err := x.zScoreOf(args[1], args[2])
	if err != nil || !ok {
		return errOr(err, Nil)
	}
	return zScoreReply(f)
}

func cmdZMScore(x *ctx, args [][]byte) Reply {
	c, ok, err := x.loadColl(args[1], typeZSet)
	if err != nil {
		return errReply(err)
	}
	out := make([]Reply, len(args)-2)
	for i, m := range args[2:] {
		out[i] = Nil
		if !ok {
			continue
		}
		f, had, err := x.zview(c).score(m)
		if err != nil {
			return errReply(err)
		}
		if had {
			out[i] = zScoreReply(f)
		}
	}
	return Array(out...)
}

func cmdZCard(x *ctx, args [][]byte) Reply { return collLength(x, args, typeZSet) }

// cmdZRank counts the entries before the member (after it for ZREVRANK)
// walking from both ends of the index: O(min(rank, N-rank)), where Redis's
// skiplist is O(log N).
func cmdZRank(x *ctx, args [][]byte) Reply {
	z, f, ok, err := x.zScoreOf(args[1], args[2])
	if err != nil || !ok {
		return errOr(err, Nil)
	}
	r, err := z.rank(redisnum.Sortable(f), args[2])
	if err != nil {
		return errReply(err)
	}
	if eq(args[0], "zrevrank") {
		r = z.c.length() - 1 - r
	}
	return Int(r)
}
