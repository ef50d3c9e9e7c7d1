package kv

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/kvorum/kvorum/internal/glob"
	"github.com/kvorum/kvorum/internal/redisnum"
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
	def("zadd", -4, "write denyoom fast", 1, 1, 1, g, "Adds one or more members to a sorted set, or updates their scores. Creates the key if it doesn't exist.", cmdZAdd, checkZAdd)
	def("zincrby", 4, "write denyoom fast", 1, 1, 1, g, "Increments the score of a member in a sorted set.", cmdZAdd, checkZAdd)
	def("zrem", -3, "write fast", 1, 1, 1, g, "Removes one or more members from a sorted set. Deletes the sorted set if all members were removed.", cmdZRem, nil)
	def("zscore", 3, "readonly fast", 1, 1, 1, g, "Returns the score of a member in a sorted set.", cmdZScore, nil)
	def("zmscore", -3, "readonly fast", 1, 1, 1, g, "Returns the score of one or more members in a sorted set.", cmdZMScore, nil)
	def("zcard", 2, "readonly fast", 1, 1, 1, g, "Returns the number of members in a sorted set.", cmdZCard, nil)
	def("zcount", 4, "readonly fast", 1, 1, 1, g, "Returns the count of members in a sorted set that have scores within a range.", cmdZCount, checkZScoreArgs)
	def("zlexcount", 4, "readonly fast", 1, 1, 1, g, "Returns the number of members in a sorted set within a lexicographical range.", cmdZLexCount, checkZLexArgs)
	def("zrank", 3, "readonly fast", 1, 1, 1, g, "Returns the index of a member in a sorted set ordered by ascending scores.", cmdZRank, nil)
	def("zrevrank", 3, "readonly fast", 1, 1, 1, g, "Returns the index of a member in a sorted set ordered by descending scores.", cmdZRank, nil)
	def("zrange", -4, "readonly", 1, 1, 1, g, "Returns members in a sorted set within a range of indexes.", cmdZRange, checkZRange)
	def("zrangestore", -5, "write denyoom", 1, 2, 1, g, "Stores a range of members from sorted set in a key.", cmdZRange, checkZRange)
	def("zrevrange", -4, "readonly", 1, 1, 1, g, "Returns members in a sorted set within a range of indexes in reverse order.", cmdZRange, checkZRange)
	def("zrangebyscore", -4, "readonly", 1, 1, 1, g, "Returns members in a sorted set within a range of scores.", cmdZRange, checkZRange)
	def("zrevrangebyscore", -4, "readonly", 1, 1, 1, g, "Returns members in a sorted set within a range of scores in reverse order.", cmdZRange, checkZRange)
	def("zrangebylex", -4, "readonly", 1, 1, 1, g, "Returns members in a sorted set within a lexicographical range.", cmdZRange, checkZRange)
	def("zrevrangebylex", -4, "readonly", 1, 1, 1, g, "Returns members in a sorted set within a lexicographical range in reverse order.", cmdZRange, checkZRange)
	def("zpopmin", -2, "write fast", 1, 1, 1, g, "Returns the lowest-scoring members from a sorted set after removing them. Deletes the sorted set if the last member was popped.", cmdZPop, checkZPop)
	def("zpopmax", -2, "write fast", 1, 1, 1, g, "Returns the highest-scoring members from a sorted set after removing them. Deletes the sorted set if the last member was popped.", cmdZPop, checkZPop)
	def("zmpop", -4, "write movablekeys", 0, 0, 0, g, "Returns the highest- or lowest-scoring members from one or more sorted sets after removing them. Deletes the sorted set if the last member was popped.", cmdZMPop, checkZMPop)
	def("bzpopmin", -3, "write noscript blocking fast", 1, -2, 1, g, "Removes and returns the member with the lowest score from one or more sorted sets. Blocks until a member is available otherwise. Deletes the sorted set if the last element was popped.", cmdBZPop, checkBLPop)
	def("bzpopmax", -3, "write noscript blocking fast", 1, -2, 1, g, "Removes and returns the member with the highest score from one or more sorted sets. Blocks until a member is available otherwise. Deletes the sorted set if the last element was popped.", cmdBZPop, checkBLPop)
	def("bzmpop", -5, "write blocking movablekeys", 0, 0, 0, g, "Removes and returns a member by score from one or more sorted sets. Blocks until a member is available otherwise. Deletes the sorted set if the last element was popped.", cmdZMPop, checkBZMPop)
	def("zremrangebyrank", 4, "write", 1, 1, 1, g, "Removes members in a sorted set within a range of indexes. Deletes the sorted set if all members were removed.", cmdZRemRangeByRank, checkIntArgs(2, 3))
	def("zremrangebyscore", 4, "write", 1, 1, 1, g, "Removes members in a sorted set within a range of scores. Deletes the sorted set if all members were removed.", cmdZRemRangeByScore, checkZScoreArgs)
	def("zremrangebylex", 4, "write", 1, 1, 1, g, "Removes members in a sorted set within a lexicographical range. Deletes the sorted set if all members were removed.", cmdZRemRangeByLex, checkZLexArgs)
	def("zunionstore", -4, "write denyoom movablekeys", 1, 1, 1, g, "Stores the union of multiple sorted sets in a key.", cmdZSetOp, checkZSetOp)
	def("zinterstore", -4, "write denyoom movablekeys", 1, 1, 1, g, "Stores the intersect of multiple sorted sets in a key.", cmdZSetOp, checkZSetOp)
	def("zdiffstore", -4, "write denyoom movablekeys", 1, 1, 1, g, "Stores the difference of multiple sorted sets in a key.", cmdZSetOp, checkZSetOp)
	def("zunion", -3, "readonly movablekeys", 0, 0, 0, g, "Returns the union of multiple sorted sets.", cmdZSetOp, checkZSetOp)
	def("zinter", -3, "readonly movablekeys", 0, 0, 0, g, "Returns the intersect of multiple sorted sets.", cmdZSetOp, checkZSetOp)
	def("zdiff", -3, "readonly movablekeys", 0, 0, 0, g, "Returns the difference between multiple sorted sets.", cmdZSetOp, checkZSetOp)
	def("zintercard", -3, "readonly movablekeys", 0, 0, 0, g, "Returns the number of members of the intersect of multiple sorted sets.", cmdZSetOp, checkZSetOp)
	def("zscan", -3, "readonly", 1, 1, 1, g, "Iterates over members and scores of a sorted set.", cmdZScan, checkZScan)
	def("zrandmember", -2, "readonly", 1, 1, 1, g, "Returns one or more random members from a sorted set.", cmdZRandMember, checkZRandMember)
}

// Redis error texts of sorted set commands.
var (
	errZNaN         = Error("ERR resulting score is not a number (NaN)")
	errZMinMax      = Error("ERR min or max is not a float")
	errZLexRange    = Error("ERR min or max not valid string range item")
	errZWeight      = Error("ERR weight value is not a float")
	errZPositive    = Error("ERR value is out of range, must be positive")
	errZNXXX        = Error("ERR XX and NX options at the same time are not compatible")
	errZGTLTNX      = Error("ERR GT, LT, and/or NX options at the same time are not compatible")
	errZIncrPair    = Error("ERR INCR option supports a single increment-element pair")
	errZLimitRank   = Error("ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX")
	errZScoresLex   = Error("ERR syntax error, WITHSCORES not supported in combination with BYLEX")
	errZLimitNeg    = Error("ERR LIMIT can't be negative")
	errZNumKeys     = Error("ERR numkeys should be greater than 0")
	errZMPopCount   = Error("ERR count should be greater than 0")
	errZRandTooMany = Error("ERR ZRANDMEMBER count is too large: kvorum replies with at most 1048576 members")
)

// zRandMemberMax bounds the reply of ZRANDMEMBER with a negative count,
// the one sorted set reply not bounded by the data.
const zRandMemberMax = 1 << 20

// ---------------------------------------------------------------------------
// Scores: replies and ranges (redisnum parses and formats them as Redis).

// zScoreReply is the reply for one score: a Double, which the resp layer
// writes as a RESP3 double (",1.5") or, in RESP2, as the bulk string
// Redis 7.0 sends ("%.17g", redisnum.AppendDouble); Lua scripts get
// that string too (or a {double=...} table after redis.setresp(3)).
func zScoreReply(f float64) Reply { return Double(f) }

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
	it, err := z.x.r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	defer func() {
		if cerr := it.Close(); err == nil {
			err = cerr
		}
	}()
	var valid bool
	switch {
	case start == nil && !rev:
		valid = it.First()
	case start == nil:
		valid = it.Last()
	case !rev:
		valid = it.SeekGE(append(append(make([]byte, 0, len(z.base)+len(start)), z.base...), start...))
	default:
		valid = it.SeekLT(append(append(make([]byte, 0, len(z.base)+len(start)), z.base...), start...))
	}
	n := len(z.base)
	for valid {
		k := it.Key()
		if len(k) >= n+9 {
			if !fn(binary.BigEndian.Uint64(k[n+1:]), k[n+9:]) {
				return nil
			}
		}
		if rev {
			valid = it.Prev()
		} else {
			valid = it.Next()
		}
	}
	return it.Error()
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

// newZSet returns an empty sorted set for k with a fresh version, which
// saveColl will create.
func (x *ctx) newZSet(k []byte) (*coll, *Reply) {
	v, err := x.newVersion()
	if err != nil {
		r := errStorage(err)
		return nil, &r
	}
	c := &coll{key: k, rec: record{typ: typeZSet, version: v}}
	c.setLength(0)
	return c, nil
}

// zStore replaces dst with a sorted set of ents (distinct members), or
// deletes it if ents is empty, and replies the new length.
func (x *ctx) zStore(dst []byte, ents []zent) Reply {
	if len(ents) == 0 {
		if err := x.remove(dst); err != nil {
			return errStorage(err)
		}
		return Int(0)
	}
	c, e := x.newZSet(dst)
	if e != nil {
		return *e
	}
	z := x.zview(c)
	for _, en := range ents {
		if err := z.set(en.member, en.score, 0, false); err != nil {
			return errStorage(err)
		}
	}
	c.setLength(int64(len(ents)))
	if err := x.saveColl(c); err != nil {
		return errStorage(err)
	}
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

const (
	zaddNX = 1 << iota
	zaddXX
	zaddGT
	zaddLT
	zaddCH
	zaddIncr
)

// zaddArgs is a parsed ZADD (or ZINCRBY).
type zaddArgs struct {
	flags  int
	first  int // position of the first score
	scores []float64
}

// parseZAdd parses ZADD's options and scores in Redis's order (all of it
// before the key is looked at); ZINCRBY is ZADD INCR.
func parseZAdd(args [][]byte) (zaddArgs, Reply, bool) {
	if eq(args[0], "zincrby") {
		f, ok := redisnum.ParseDouble(args[2])
		if !ok {
			return zaddArgs{}, errNotFloat, false
		}
		return zaddArgs{flags: zaddIncr, first: 2, scores: []float64{f}}, Reply{}, true
	}
	a := zaddArgs{first: 2}
opts:
	for ; a.first < len(args); a.first++ {
		o := args[a.first]
		switch {
		case eq(o, "nx"):
			a.flags |= zaddNX
		case eq(o, "xx"):
			a.flags |= zaddXX
		case eq(o, "ch"):
			a.flags |= zaddCH
		case eq(o, "incr"):
			a.flags |= zaddIncr
		case eq(o, "gt"):
			a.flags |= zaddGT
		case eq(o, "lt"):
			a.flags |= zaddLT
		default:
			break opts
		}
	}
	elements := len(args) - a.first
	if elements%2 != 0 || elements == 0 {
		return a, errSyntax, false
	}
	f := a.flags
	nx, xx, gt, lt := f&zaddNX != 0, f&zaddXX != 0, f&zaddGT != 0, f&zaddLT != 0
	if nx && xx {
		return a, errZNXXX, false
	}
	if (gt && nx) || (lt && nx) || (gt && lt) {
		return a, errZGTLTNX, false
	}
	if f&zaddIncr != 0 && elements > 2 {
		return a, errZIncrPair, false
	}
	a.scores = make([]float64, elements/2)
	for j := range a.scores {
		s, ok := redisnum.ParseDouble(args[a.first+2*j])
		if !ok {
			return a, errNotFloat, false
		}
		a.scores[j] = s
	}
	return a, Reply{}, true
}

func checkZAdd(args [][]byte) (Reply, bool) {
	_, r, ok := parseZAdd(args)
	return r, ok
}

// cmdZAdd is a port of zaddGenericCommand and zsetAdd.
func cmdZAdd(x *ctx, args [][]byte) Reply {
	a, r, ok := parseZAdd(args)
	if !ok {
		return r
	}
	f := a.flags
	nx, xx, gt, lt, incr := f&zaddNX != 0, f&zaddXX != 0, f&zaddGT != 0, f&zaddLT != 0, f&zaddIncr != 0
	c, exists, e := x.loadColl(args[1], typeZSet)
	if e != nil {
		return *e
	}
	var added, updated, processed int64
	var score float64
	if exists || !xx {
		if !exists {
			if c, e = x.newZSet(args[1]); e != nil {
				return *e
			}
		}
		z := x.zview(c)
		n := c.length()
		for j, s := range a.scores {
			member := args[a.first+2*j+1]
			cur, had, err := z.score(member)
			if err != nil {
				return errStorage(err)
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
						return errStorage(err)
					}
					updated++
				}
			default:
				if err := z.set(member, s, 0, false); err != nil {
					return errStorage(err)
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
				return errStorage(err)
			}
		}
	}
	if incr {
		if processed > 0 {
			return zScoreReply(score)
		}
		return Nil
	}
	if f&zaddCH != 0 {
		return Int(added + updated)
	}
	return Int(added)
}

func cmdZRem(x *ctx, args [][]byte) Reply {
	c, ok, e := x.loadColl(args[1], typeZSet)
	if e != nil {
		return *e
	}
	if !ok {
		return Int(0)
	}
	z := x.zview(c)
	n := c.length()
	var deleted int64
	for _, m := range args[2:] {
		cur, had, err := z.score(m)
		if err != nil {
			return errStorage(err)
		}
		if had {
			if err := z.del(redisnum.Sortable(cur), m); err != nil {
				return errStorage(err)
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
			return errStorage(err)
		}
	}
	return Int(deleted)
}

func cmdZScore(x *ctx, args [][]byte) Reply {
	c, ok, e := x.loadColl(args[1], typeZSet)
	if e != nil {
		return *e
	}
	if !ok {
		return Nil
	}
	f, had, err := x.zview(c).score(args[2])
	if err != nil {
		return errStorage(err)
	}
	if !had {
		return Nil
	}
	return zScoreReply(f)
}

func cmdZMScore(x *ctx, args [][]byte) Reply {
	c, ok, e := x.loadColl(args[1], typeZSet)
	if e != nil {
		return *e
	}
	out := make([]Reply, len(args)-2)
	for i, m := range args[2:] {
		out[i] = Nil
		if !ok {
			continue
		}
		f, had, err := x.zview(c).score(m)
		if err != nil {
			return errStorage(err)
		}
		if had {
			out[i] = zScoreReply(f)
		}
	}
	return Array(out...)
}

func cmdZCard(x *ctx, args [][]byte) Reply {
	c, ok, e := x.loadColl(args[1], typeZSet)
	if e != nil {
		return *e
	}
	if !ok {
		return Int(0)
	}
	return Int(c.length())
}

// cmdZRank counts the entries before the member (after it for ZREVRANK)
// walking from both ends of the index: O(min(rank, N-rank)), where Redis's
// skiplist is O(log N).
func cmdZRank(x *ctx, args [][]byte) Reply {
	c, ok, e := x.loadColl(args[1], typeZSet)
	if e != nil {
		return *e
	}
	if !ok {
		return Nil
	}
	z := x.zview(c)
	f, had, err := z.score(args[2])
	if err != nil {
		return errStorage(err)
	}
	if !had {
		return Nil
	}
	r, err := z.rank(redisnum.Sortable(f), args[2])
	if err != nil {
		return errStorage(err)
	}
	if eq(args[0], "zrevrank") {
		r = c.length() - 1 - r
	}
	return Int(r)
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
		return *e
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
		return errStorage(err)
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
		return *e
	}
	if !ok {
		return Int(0)
	}
	z := x.zview(c)
	start, ok, err := z.lexStart(&s, false)
	if err != nil {
		return errStorage(err)
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
		return errStorage(err)
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
		return *e
	}
	var ents []zent
	if ok {
		var err error
		if ents, err = x.zview(c).rangeEnts(&q); err != nil {
			return errStorage(err)
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
// ZPOPMIN, ZPOPMAX, ZREMRANGEBY*

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
		return *e
	}
	if !ok || count == 0 {
		return Array()
	}
	ents, err := x.zpop(c, count, eq(args[0], "zpopmax"))
	if err != nil {
		return errStorage(err)
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
			return *e
		}
		if !ok {
			continue
		}
		ents, err := x.zpop(c, 1, max)
		if err != nil {
			return errStorage(err)
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
			return *e
		}
		if !ok {
			continue
		}
		ents, err := x.zpop(c, count, max)
		if err != nil {
			return errStorage(err)
		}
		pairs := make([]Reply, len(ents))
		for i, en := range ents {
			pairs[i] = Array(Bulk(en.member), zScoreReply(en.score))
		}
		return Array(Bulk(bytes.Clone(k)), Array(pairs...))
	}
	return NilArray
}

// zRemoved finishes a ZREMRANGEBY* command that deleted n entries.
func (x *ctx) zRemoved(c *coll, n int64) Reply {
	if n > 0 {
		c.setLength(c.length() - n)
		if err := x.saveColl(c); err != nil {
			return errStorage(err)
		}
	}
	return Int(n)
}

func cmdZRemRangeByRank(x *ctx, args [][]byte) Reply {
	start, _ := redisnum.ParseInt(args[2])
	end, _ := redisnum.ParseInt(args[3])
	c, ok, e := x.loadColl(args[1], typeZSet)
	if e != nil {
		return *e
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
			return errStorage(err)
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
		return errStorage(err)
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
		return *e
	}
	if !ok || s.empty() {
		return Int(0)
	}
	deleted, err := x.zview(c).remove(zScoreStart(&s, false), false, 0, math.MaxInt64, func(u uint64, _ []byte) bool {
		return s.lteMax(redisnum.Unsortable(u))
	})
	if err != nil {
		return errStorage(err)
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
		return *e
	}
	if !ok {
		return Int(0)
	}
	z := x.zview(c)
	start, ok, err := z.lexStart(&s, false)
	if err != nil {
		return errStorage(err)
	}
	if !ok {
		return Int(0)
	}
	deleted, err := z.remove(start, false, 0, math.MaxInt64, func(_ uint64, m []byte) bool { return s.lteMax(m) })
	if err != nil {
		return errStorage(err)
	}
	return x.zRemoved(c, deleted)
}

// ---------------------------------------------------------------------------
// ZUNIONSTORE, ZINTERSTORE, ZDIFFSTORE, ZUNION, ZINTER, ZDIFF, ZINTERCARD

const (
	zopUnion = iota
	zopInter
	zopDiff
)

const (
	zaggSum = iota
	zaggMin
	zaggMax
)

// zsetOp describes one of the commands by name.
type zsetOp struct {
	op       int
	numIdx   int // position of numkeys
	store    bool
	cardOnly bool
	name     string
}

func zsetOpOf(name []byte) zsetOp {
	n := strings.ToLower(string(name))
	o := zsetOp{numIdx: 1, name: n}
	switch n {
	case "zunionstore":
		o.op, o.numIdx, o.store = zopUnion, 2, true
	case "zinterstore":
		o.op, o.numIdx, o.store = zopInter, 2, true
	case "zdiffstore":
		o.op, o.numIdx, o.store = zopDiff, 2, true
	case "zunion":
		o.op = zopUnion
	case "zinter":
		o.op = zopInter
	case "zdiff":
		o.op = zopDiff
	case "zintercard":
		o.op, o.cardOnly = zopInter, true
	}
	return o
}

// checkZSetOp checks numkeys as Redis does before looking at the keys.
func checkZSetOp(args [][]byte) (Reply, bool) {
	o := zsetOpOf(args[0])
	n, ok := redisnum.ParseInt(args[o.numIdx])
	if !ok {
		return errNotInt, false
	}
	if n < 1 {
		return Error("ERR at least 1 input key is needed for '" + o.name + "' command"), false
	}
	if n > int64(len(args)-(o.numIdx+1)) {
		return errSyntax, false
	}
	return Reply{}, true
}

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

func zAggregate(target, v float64, agg int) float64 {
	switch agg {
	case zaggMin:
		if v < target {
			return v
		}
		return target
	case zaggMax:
		if v > target {
			return v
		}
		return target
	}
	target += v
	if math.IsNaN(target) { // inf + -inf: Redis's convention is 0
		return 0
	}
	return target
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
func cmdZSetOp(x *ctx, args [][]byte) Reply {
	if r, ok := checkZSetOp(args); !ok {
		return r
	}
	o := zsetOpOf(args[0])
	setnum, _ := redisnum.ParseInt(args[o.numIdx])
	srcs := make([]zsrc, setnum)
	j := o.numIdx + 1
	for i := range srcs {
		k := args[j]
		j++
		srcs[i] = zsrc{key: k, weight: 1}
		rec, ok, err := x.load(k)
		if err != nil {
			return errStorage(err)
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
	agg, withScores, limit := zaggSum, false, int64(0)
	for remaining := len(args) - j; remaining > 0; remaining = len(args) - j {
		a := args[j]
		switch {
		case o.op != zopDiff && !o.cardOnly && remaining >= int(setnum)+1 && eq(a, "weights"):
			j++
			for i := range srcs {
				w, ok := redisnum.ParseDouble(args[j])
				if !ok {
					return errZWeight
				}
				srcs[i].weight = w
				j++
			}
		case o.op != zopDiff && !o.cardOnly && remaining >= 2 && eq(a, "aggregate"):
			switch v := args[j+1]; {
			case eq(v, "sum"):
				agg = zaggSum
			case eq(v, "min"):
				agg = zaggMin
			case eq(v, "max"):
				agg = zaggMax
			default:
				return errSyntax
			}
			j += 2
		case !o.store && !o.cardOnly && eq(a, "withscores"):
			withScores = true
			j++
		case o.cardOnly && remaining >= 2 && eq(a, "limit"):
			l, ok := redisnum.ParseInt(args[j+1])
			if !ok || l < 0 {
				return errZLimitNeg
			}
			limit = l
			j += 2
		default:
			return errSyntax
		}
	}
	if o.op != zopDiff {
		// Smallest first, as Redis (stable, so equal sizes keep their order:
		// with SUM the order of the additions can matter).
		sort.SliceStable(srcs, func(a, b int) bool { return srcs[a].n < srcs[b].n })
	}
	var ents []zent
	var card int64
	var werr error
	switch o.op {
	case zopInter:
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
				score = zAggregate(score, v*srcs[k].weight, agg)
			}
			if o.cardOnly {
				card++
				return limit == 0 || card < limit
			}
			ents = append(ents, zent{member: bytes.Clone(m), score: score})
			return true
		})
		if werr == nil {
			werr = err
		}
	case zopUnion:
		at := map[string]int{}
		for i := range srcs {
			s := &srcs[i]
			err := x.zsrcEach(s, func(m []byte, sc float64) bool {
				score := s.weight * sc
				if math.IsNaN(score) {
					score = 0
				}
				if p, ok := at[string(m)]; ok {
					ents[p].score = zAggregate(ents[p].score, score, agg)
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
	case zopDiff:
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
		return errStorage(werr)
	}
	if o.cardOnly {
		return Int(card)
	}
	zSortEnts(ents)
	if o.store {
		return x.zStore(args[1], ents)
	}
	return zReply(ents, withScores)
}

// ---------------------------------------------------------------------------
// ZSCAN

func checkZScan(args [][]byte) (Reply, bool) {
	if _, ok := parseCursor(args[2]); !ok {
		return errInvalidCurs, false
	}
	return Reply{}, true
}

// ZSCAN cursors follow the design of SCAN's (keyspace.go): a cursor is
// P<<32 | S, P the first 4 bytes of the sortable score of the last entry
// returned and S a random salt (never 0). The node remembers for cursorTTL
// the exact entry (with the key and its incarnation) and resumes strictly
// after it; a cursor it does not remember resumes at the first entry whose
// sortable score starts with P or more, which is never after the exact
// position, so the scan stays complete (it may repeat members). A sorted
// set of up to zscanWhole members is returned whole in one call (cursor 0),
// as Redis does for its small (listpack) sorted sets.
var zscanCursors struct {
	sync.Mutex
	m    map[uint64]zscanPos
	last time.Time
}

type zscanPos struct {
	key     string
	version uint64
	after   []byte // index element of the last entry returned
	at      time.Time
}

const zscanWhole = 128

func zscanRemember(key []byte, version uint64, after []byte) uint64 {
	zscanCursors.Lock()
	defer zscanCursors.Unlock()
	if zscanCursors.m == nil {
		zscanCursors.m = map[uint64]zscanPos{}
	}
	now := time.Now()
	if len(zscanCursors.m) >= cursorLimit || now.Sub(zscanCursors.last) > time.Minute {
		for k, v := range zscanCursors.m {
			if now.Sub(v.at) > cursorTTL || len(zscanCursors.m) >= cursorLimit {
				delete(zscanCursors.m, k)
			}
		}
		zscanCursors.last = now
	}
	p := uint64(binary.BigEndian.Uint32(after[1:5]))
	pos := zscanPos{key: string(key), version: version, after: after, at: now}
	for {
		id := p<<32 | (1 + rand.Uint64N(1<<32-1))
		if old, ok := zscanCursors.m[id]; ok && (old.key != pos.key || old.version != version || !bytes.Equal(old.after, after)) {
			continue
		}
		zscanCursors.m[id] = pos
		return id
	}
}

// zscanResume returns the walk start of cursor id (not 0) on key's
// incarnation version.
func zscanResume(id uint64, key []byte, version uint64) []byte {
	zscanCursors.Lock()
	p, ok := zscanCursors.m[id]
	zscanCursors.Unlock()
	if ok && p.key == string(key) && p.version == version {
		return append(bytes.Clone(p.after), 0)
	}
	return binary.BigEndian.AppendUint32([]byte{'s'}, uint32(id>>32))
}

func cmdZScan(x *ctx, args [][]byte) Reply {
	cursor, ok := parseCursor(args[2])
	if !ok {
		return errInvalidCurs
	}
	c, ok, e := x.loadColl(args[1], typeZSet)
	if e != nil {
		return *e
	}
	if !ok {
		return Array(BulkString("0"), Array())
	}
	count := int64(10)
	var match []byte
	for i := 3; i < len(args); {
		left := len(args) - i
		switch {
		case eq(args[i], "count") && left >= 2:
			n, ok := redisnum.ParseInt(args[i+1])
			if !ok {
				return errNotInt
			}
			if n < 1 {
				return errSyntax
			}
			count = n
			i += 2
		case eq(args[i], "match") && left >= 2:
			match = args[i+1]
			if len(match) == 1 && match[0] == '*' {
				match = nil
			}
			i += 2
		default:
			return errSyntax
		}
	}
	z := x.zview(c)
	var start []byte
	if c.length() <= zscanWhole {
		count = math.MaxInt64
	} else if cursor != 0 {
		start = zscanResume(cursor, c.key, c.rec.version)
	}
	var out []Reply
	var seen int64
	var last []byte
	more := false
	err := z.walk(start, false, func(u uint64, m []byte) bool {
		if seen >= count {
			more = true
			return false
		}
		seen++
		last = zIndexElem(last[:0], u, m)
		if match != nil && !glob.Match(match, m, false) {
			return true
		}
		out = append(out, Bulk(bytes.Clone(m)), Bulk(redisnum.AppendListpackDouble(nil, redisnum.Unsortable(u))))
		return true
	})
	if err != nil {
		return errStorage(err)
	}
	next := uint64(0)
	if more {
		next = zscanRemember(c.key, c.rec.version, last)
	}
	return Array(BulkString(strconv.FormatUint(next, 10)), Array(out...))
}

// ---------------------------------------------------------------------------
// ZRANDMEMBER

func parseZRandMember(args [][]byte) (count int64, has, withScores bool, r Reply, ok bool) {
	return parseRandArgs(args, "withscores")
}

func checkZRandMember(args [][]byte) (Reply, bool) {
	_, _, _, r, ok := parseZRandMember(args)
	return r, ok
}

// cmdZRandMember picks random ranks and reads them in one walk of the
// index (O(N) at worst). A count of at least the size returns the whole
// set (highest score first, as Redis does); a negative count may repeat
// members.
func cmdZRandMember(x *ctx, args [][]byte) Reply {
	l, has, withScores, r, ok := parseZRandMember(args)
	if !ok {
		return r
	}
	c, ok, e := x.loadColl(args[1], typeZSet)
	if e != nil {
		return *e
	}
	if !ok {
		if has {
			return Array()
		}
		return Nil
	}
	z := x.zview(c)
	n := c.length()
	rng := x.rand()
	if !has {
		p := rng.Int64N(n)
		ents, err := z.byRank(p, p, false)
		if err != nil {
			return errStorage(err)
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
			return errStorage(err)
		}
		return zReply(ents, withScores)
	}
	var picks []int64 // ranks in reply order
	if l > 0 {
		// l distinct ranks (Floyd's algorithm), then in random order.
		chosen := make(map[int64]struct{}, l)
		for j := n - l; j < n; j++ {
			t := rng.Int64N(j + 1)
			if _, dup := chosen[t]; dup {
				t = j
			}
			chosen[t] = struct{}{}
			picks = append(picks, t)
		}
		rng.Shuffle(len(picks), func(a, b int) { picks[a], picks[b] = picks[b], picks[a] })
	} else {
		if -l > zRandMemberMax {
			return errZRandTooMany
		}
		picks = make([]int64, -l)
		for i := range picks {
			picks[i] = rng.Int64N(n)
		}
	}
	sorted := slices.Clone(picks)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	got := make(map[int64]zent, len(sorted))
	var rank int64
	next := 0
	err := z.walk(nil, false, func(u uint64, m []byte) bool {
		if rank == sorted[next] {
			got[rank] = zent{member: bytes.Clone(m), score: redisnum.Unsortable(u)}
			next++
		}
		rank++
		return next < len(sorted)
	})
	if err != nil {
		return errStorage(err)
	}
	ents := make([]zent, 0, len(picks))
	for _, p := range picks {
		if en, ok := got[p]; ok {
			ents = append(ents, en)
		}
	}
	return zReply(ents, withScores)
}
