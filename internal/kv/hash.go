package kv

import (
	"bytes"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"strconv"

	"github.com/kvorum/kvorum/internal/notify"
	"github.com/kvorum/kvorum/internal/redisnum"
)

// Hashes. A hash is a collection (coll.go): each field is one element
// storage key whose value is the field's value, and the metadata holds the
// number of fields, so HLEN is one point read and HSET/HGET/HDEL/HINCRBY
// touch only the fields they name (plus the metadata record for writes).
// HGETALL, HKEYS and HVALS read the hash whole, in byte order of the fields
// (Redis leaves the order unspecified). HSCAN pages through the fields in
// byte order (collScan, coll.go).
//
// This file also holds what hashes and sets share: writing to a collection
// that may not exist yet (collForWrite, materialize) and the random choice
// of elements (HRANDFIELD, SRANDMEMBER, SPOP).

func init() {
	const g = "hash"
	def("hset", -4, "write denyoom fast", 1, 1, 1, g, "Creates or modifies the value of a field in a hash.", cmdHSet, checkPairs("hset", 2))
	def("hsetnx", 4, "write denyoom fast", 1, 1, 1, g, "Sets the value of a field in a hash only when the field doesn't exist.", cmdHSetNX, nil)
	def("hget", 3, "readonly fast", 1, 1, 1, g, "Returns the value of a field in a hash.", cmdHGet, nil)
	def("hmset", -4, "write denyoom fast", 1, 1, 1, g, "Sets the values of multiple fields.", cmdHSet, checkPairs("hmset", 2))
	def("hmget", -3, "readonly fast", 1, 1, 1, g, "Returns the values of all fields in a hash.", cmdHMGet, nil)
	def("hgetall", 2, "readonly", 1, 1, 1, g, "Returns all fields and values in a hash.", cmdHGetAll, nil)
	def("hdel", -3, "write fast", 1, 1, 1, g, "Deletes one or more fields and their values from a hash. Deletes the hash if no fields remain.", cmdHDel, nil)
	def("hexists", 3, "readonly fast", 1, 1, 1, g, "Determines whether a field exists in a hash.", cmdHExists, nil)
	def("hlen", 2, "readonly fast", 1, 1, 1, g, "Returns the number of fields in a hash.", cmdHLen, nil)
	def("hkeys", 2, "readonly", 1, 1, 1, g, "Returns all fields in a hash.", cmdHGetAll, nil)
	def("hvals", 2, "readonly", 1, 1, 1, g, "Returns all values in a hash.", cmdHGetAll, nil)
	defParsed("hincrby", 4, "write denyoom fast", 1, 1, 1, g, "Increments the integer value of a field in a hash by a number. Uses 0 as initial value if the field doesn't exist.", intArg(3), cmdHIncrBy)
	defParsed("hincrbyfloat", 4, "write denyoom fast", 1, 1, 1, g, "Increments the floating point value of a field by a number. Uses 0 as initial value if the field doesn't exist.", parseHIncrByFloat, cmdHIncrByFloat)
	def("hstrlen", 3, "readonly fast", 1, 1, 1, g, "Returns the length of the value of a field.", cmdHStrlen, nil)
	defParsed("hrandfield", -2, "readonly", 1, 1, 1, g, "Returns one or more random fields from a hash.", parseHRandField, cmdHRandField)
	defParsed("hscan", -3, "readonly", 1, 1, 1, g, "Iterates over fields and values of a hash.", parseScanCursor, cmdHScan)
}

// Redis error texts of hash commands.
var (
	errHashNotInt   = Error("ERR hash value is not an integer")
	errHashNotFloat = Error("ERR hash value is not a float")
	errHashIncrInf  = Error("ERR value is NaN or Infinity")
	errRandRange    = Error("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807")
	errRandValues   = Error("ERR value is out of range")
	errHRandTooMany = Error("ERR HRANDFIELD count is too large: kvorum replies with at most " + strconv.Itoa(randMaxReply) + " fields")
)

// collForWrite loads k as a collection of type typ for a write command or,
// if absent, returns a new empty one with no version allocated yet (see
// materialize).
func (x *ctx) collForWrite(k []byte, typ byte) (*coll, error) {
	c, ok, err := x.loadColl(k, typ)
	if err != nil {
		return nil, err
	}
	if !ok {
		c = &coll{key: k, rec: record{typ: typ}}
		c.setLength(0)
	}
	return c, nil
}

// materialize gives a collection made by collForWrite its incarnation
// number just before its first element is written, so that a command that
// ends up writing nothing allocates nothing either.
func (x *ctx) materialize(c *coll) error {
	if c.rec.version != 0 {
		return nil
	}
	v, err := x.newVersion()
	c.rec.version = v
	return err
}

func cmdHSet(x *ctx, args [][]byte) Reply {
	c, err := x.collForWrite(args[1], typeHash)
	if err != nil {
		return errReply(err)
	}
	if err := x.materialize(c); err != nil {
		return errReply(err)
	}
	var created int64
	for i := 2; i+1 < len(args); i += 2 {
		had, err := x.hasElem(c, args[i])
		if err != nil {
			return errReply(err)
		}
		if err := x.setElem(c, args[i], args[i+1]); err != nil {
			return errReply(err)
		}
		if !had {
			created++
		}
	}
	c.setLength(c.length() + created)
	if err := x.saveColl(c); err != nil {
		return errReply(err)
	}
	x.event(notify.Hash, "hset", c.key)
	if len(args[0]) == len("hset") {
		return Int(created)
	}
	return OK
}

func cmdHSetNX(x *ctx, args [][]byte) Reply {
	c, err := x.collForWrite(args[1], typeHash)
	if err != nil {
		return errReply(err)
	}
	if c.rec.version != 0 {
		had, err := x.hasElem(c, args[2])
		if err != nil {
			return errReply(err)
		}
		if had {
			return Int(0)
		}
	}
	if r := x.hashPut(c, args[2], false, args[3], "hset"); r.IsError() {
		return r
	}
	return Int(1)
}

func cmdHGet(x *ctx, args [][]byte) Reply {
	c, ok, err := x.loadColl(args[1], typeHash)
	if err != nil || !ok {
		return errOr(err, Nil)
	}
	v, ok, err := x.getElem(c, args[2])
	if err != nil || !ok {
		return errOr(err, Nil)
	}
	return Bulk(v)
}

func cmdHMGet(x *ctx, args [][]byte) Reply {
	c, ok, err := x.loadColl(args[1], typeHash)
	if err != nil {
		return errReply(err)
	}
	out := make([]Reply, len(args)-2)
	for i, f := range args[2:] {
		out[i] = Nil
		if !ok {
			continue
		}
		v, found, err := x.getElem(c, f)
		if err != nil {
			return errReply(err)
		}
		if found {
			out[i] = Bulk(v)
		}
	}
	return Array(out...)
}

// cmdHGetAll serves HGETALL (a map), HKEYS and HVALS (arrays).
func cmdHGetAll(x *ctx, args [][]byte) Reply {
	keys, vals := true, true
	switch {
	case eq(args[0], "hkeys"):
		vals = false
	case eq(args[0], "hvals"):
		keys = false
	}
	c, ok, err := x.loadColl(args[1], typeHash)
	if err != nil {
		return errReply(err)
	}
	var out []Reply
	if ok {
		n := c.length()
		if keys && vals {
			n *= 2
		}
		out = make([]Reply, 0, min(n, 1<<16))
		err := x.iterElems(c, nil, nil, false, func(f, v []byte) bool {
			if keys {
				out = append(out, Bulk(bytes.Clone(f)))
			}
			if vals {
				out = append(out, Bulk(bytes.Clone(v)))
			}
			return true
		})
		if err != nil {
			return errReply(err)
		}
	}
	if keys && vals {
		return Map(out...)
	}
	return Array(out...)
}

// cmdHDel: "hdel" if a field went, then "del" if the hash did.
func cmdHDel(x *ctx, args [][]byte) Reply {
	r := removeElems(x, args, typeHash)
	if r.Int > 0 {
		x.event(notify.Hash, "hdel", args[1])
		if _, ok, err := x.load(args[1]); !ok && err == nil {
			x.event(notify.Generic, "del", args[1])
		}
	}
	return r
}

func cmdHExists(x *ctx, args [][]byte) Reply { return elemExists(x, args, typeHash) }

func cmdHLen(x *ctx, args [][]byte) Reply { return collLength(x, args, typeHash) }

func cmdHStrlen(x *ctx, args [][]byte) Reply {
	c, ok, err := x.loadColl(args[1], typeHash)
	if err != nil || !ok {
		return errOr(err, Int(0))
	}
	v, _, err := x.getElem(c, args[2])
	if err != nil {
		return errReply(err)
	}
	return Int(int64(len(v)))
}

func cmdHIncrBy(x *ctx, args [][]byte, incr int64) Reply {
	c, v, had, err := x.hashField(args)
	if err != nil {
		return errReply(err)
	}
	var cur int64
	if had {
		n, ok := redisnum.ParseInt(v)
		if !ok {
			return errHashNotInt
		}
		cur = n
	}
	if (incr < 0 && cur < 0 && incr < math.MinInt64-cur) || (incr > 0 && cur > 0 && incr > math.MaxInt64-cur) {
		return errOverflow
	}
	cur += incr
	if r := x.hashPut(c, args[2], had, strconv.AppendInt(nil, cur, 10), "hincrby"); r.IsError() {
		return r
	}
	return Int(cur)
}

// hashField loads the hash args[1] for a write (collForWrite) and the
// value of its field args[2], if it has it.
func (x *ctx) hashField(args [][]byte) (c *coll, v []byte, had bool, err error) {
	if c, err = x.collForWrite(args[1], typeHash); err != nil || c.rec.version == 0 {
		return c, nil, false, err
	}
	v, had, err = x.getElem(c, args[2])
	return c, v, had, err
}

// hashPut sets field f of c, which had it or not, to v, saves c and
// emits event.
func (x *ctx) hashPut(c *coll, f []byte, had bool, v []byte, event string) Reply {
	if err := x.materialize(c); err != nil {
		return errReply(err)
	}
	if err := x.setElem(c, f, v); err != nil {
		return errReply(err)
	}
	if !had {
		c.setLength(c.length() + 1)
	}
	if err := x.saveColl(c); err != nil {
		return errReply(err)
	}
	x.event(notify.Hash, event, c.key)
	return OK
}

// parseHIncrByFloat: Redis refuses a non-float or infinite increment
// before it looks at the key.
func parseHIncrByFloat(args [][]byte) (*big.Float, Reply, bool) {
	f, r, ok := floatArg(3)(args)
	if ok && f.IsInf() {
		return nil, errHashIncrInf, false
	}
	return f, r, ok
}

// cmdHIncrByFloat computes like INCRBYFLOAT (addLongDouble).
func cmdHIncrByFloat(x *ctx, args [][]byte, incr *big.Float) Reply {
	c, v, had, err := x.hashField(args)
	if err != nil {
		return errReply(err)
	}
	cur := new(big.Float).SetPrec(64)
	if had {
		f, good := redisnum.ParseLongDouble(v)
		if !good {
			return errHashNotFloat
		}
		cur = f
	}
	if cur.IsInf() {
		return errNaN
	}
	out, ok := addLongDouble(cur, incr)
	if !ok {
		return errNaN
	}
	if r := x.hashPut(c, args[2], had, out, "hincrbyfloat"); r.IsError() {
		return r
	}
	return Bulk(out)
}

// parseRandCount parses the count of HRANDFIELD and SRANDMEMBER as Redis's
// getRangeLongFromObjectOrReply(-LONG_MAX, LONG_MAX) does.
func parseRandCount(b []byte) (int64, Reply, bool) {
	n, ok := redisnum.ParseInt(b)
	if !ok {
		return 0, errNotInt, false
	}
	if n == math.MinInt64 {
		return 0, errRandRange, false
	}
	return n, Reply{}, true
}

// randArgs is the parsed count and option (WITHVALUES, WITHSCORES) of
// HRANDFIELD or ZRANDMEMBER.
type randArgs struct {
	count   int64
	has     bool // a count was given
	withOpt bool // the option was given
}

// parseRandArgs parses the count of HRANDFIELD or ZRANDMEMBER and its
// option, in Redis's order.
func parseRandArgs(args [][]byte, option string) (randArgs, Reply, bool) {
	if len(args) < 3 {
		return randArgs{}, Reply{}, true
	}
	n, r, ok := parseRandCount(args[2])
	if !ok {
		return randArgs{}, r, false
	}
	if len(args) > 4 || (len(args) == 4 && !eq(args[3], option)) {
		return randArgs{}, errSyntax, false
	}
	if len(args) == 4 && (n < -math.MaxInt64/2 || n > math.MaxInt64/2) {
		return randArgs{}, errRandValues, false
	}
	return randArgs{count: n, has: true, withOpt: len(args) == 4}, Reply{}, true
}

func parseHRandField(args [][]byte) (randArgs, Reply, bool) {
	return parseRandArgs(args, "withvalues")
}

// cmdHRandField: without a count, one random field (nil if the key is
// absent). With a count: that many distinct fields in random order, the
// whole hash (in byte order) if the count is at least its size, or for a
// negative count that many independent draws. WITHVALUES replies a flat
// field, value, ... array, as Redis does in RESP2 (RESP3 would nest the
// pairs; kv has no reply kind for that).
func cmdHRandField(x *ctx, args [][]byte, a randArgs) Reply {
	picks, r, ok := x.randomPicks(args, typeHash, a, errHRandTooMany)
	if !ok {
		return r
	}
	if !a.withOpt {
		return Array(elemReplies(picks)...)
	}
	out := make([]Reply, 0, 2*len(picks))
	for _, p := range picks {
		out = append(out, Bulk(p.elem), Bulk(p.value))
	}
	return Pairs(out...)
}

func cmdHScan(x *ctx, args [][]byte, id uint64) Reply {
	return collScan(x, args, id, typeHash)
}

// ---------------------------------------------------------------------------
// Random elements (HRANDFIELD, SRANDMEMBER, SPOP).
//
// Elements are stored in byte order with no rank index, and the spread of
// element bytes says nothing reliable about ranks (user1, user10, user100...
// are far from evenly spread), so a random choice draws ranks exactly
// uniformly and reads them in one walk that stops at the largest rank
// drawn: O(N) at worst (Redis: O(1) per element), memory O(count). The walk
// reads only replicated state and write commands (SPOP) draw from x.rand(),
// seeded by the log position, so every replica picks the same elements.

// randMaxReply bounds the reply of a negative count (independent draws),
// the one HRANDFIELD/SRANDMEMBER reply not bounded by the data.
const randMaxReply = 1 << 20

type elemPair struct{ elem, value []byte }

// randomPicks is what HRANDFIELD and SRANDMEMBER share: the random
// elements of the collection args[1] of type typ that the parsed count a
// asks for. ok=false: r is the whole reply, for no count (one element,
// nil if there is none), a missing key or an error. For a count: 0 is
// nothing, a positive count at least the size is every element in byte
// order, a smaller one as many distinct elements in random order, a
// negative count -count independent draws (refused with tooMany beyond
// randMaxReply).
func (x *ctx) randomPicks(args [][]byte, typ byte, a randArgs, tooMany Reply) ([]elemPair, Reply, bool) {
	c, exists, err := x.loadColl(args[1], typ)
	switch {
	case err != nil:
		return nil, errReply(err), false
	case !a.has && !exists:
		return nil, Nil, false
	case !a.has:
		picks, err := x.randomElems(c, x.rand(), 1)
		if err != nil {
			return nil, errReply(err), false
		}
		if len(picks) == 0 {
			return nil, Nil, false
		}
		return nil, Bulk(picks[0].elem), false
	case !exists:
		return nil, Array(), false
	}
	n := c.length()
	switch {
	case a.count == 0:
		return nil, Reply{}, true
	case a.count >= n:
		var all []elemPair
		err := x.iterElems(c, nil, nil, false, func(elem, value []byte) bool {
			all = append(all, elemPair{bytes.Clone(elem), bytes.Clone(value)})
			return true
		})
		if err != nil {
			return nil, errReply(err), false
		}
		return all, Reply{}, true
	case a.count < 0 && -a.count > randMaxReply:
		return nil, tooMany, false
	}
	picks, err := x.randomElems(c, x.rand(), a.count)
	if err != nil {
		return nil, errReply(err), false
	}
	return picks, Reply{}, true
}

// elemReplies is the elements of picks, as bulk strings.
func elemReplies(picks []elemPair) []Reply {
	out := make([]Reply, len(picks))
	for i, p := range picks {
		out[i] = Bulk(p.elem)
	}
	return out
}

// randomRanks draws ranks among n (> 0) with rng, as Redis's counts ask:
// for count > 0, min(count, n) distinct ones in random order; for count <
// 0, -count independent draws.
func randomRanks(rng *rand.Rand, n, count int64) []int64 {
	if count < 0 {
		ranks := make([]int64, -count)
		for i := range ranks {
			ranks[i] = rng.Int64N(n)
		}
		return ranks
	}
	k := min(count, n)
	// Floyd's algorithm, then a shuffle for a random order.
	ranks := make([]int64, 0, k)
	chosen := make(map[int64]struct{}, k) // membership only, never iterated
	for j := n - k; j < n; j++ {
		t := rng.Int64N(j + 1)
		if _, dup := chosen[t]; dup {
			t = j
		}
		chosen[t] = struct{}{}
		ranks = append(ranks, t)
	}
	rng.Shuffle(len(ranks), func(a, b int) { ranks[a], ranks[b] = ranks[b], ranks[a] })
	return ranks
}

// randomElems returns elements of c drawn with rng as randomRanks draws
// them, in its order.
func (x *ctx) randomElems(c *coll, rng *rand.Rand, count int64) ([]elemPair, error) {
	n := c.length()
	if n <= 0 || count == 0 {
		return nil, nil
	}
	ranks := randomRanks(rng, n, count) // in reply order
	sorted := slices.Clone(ranks)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	got := make([]elemPair, 0, len(sorted))
	var rank int64
	err := x.iterElems(c, nil, nil, false, func(elem, value []byte) bool {
		if rank == sorted[len(got)] {
			got = append(got, elemPair{bytes.Clone(elem), bytes.Clone(value)})
		}
		rank++
		return len(got) < len(sorted)
	})
	if err != nil {
		return nil, err
	}
	out := make([]elemPair, 0, len(ranks))
	for _, r := range ranks {
		if i, _ := slices.BinarySearch(sorted, r); i < len(got) {
			out = append(out, got[i])
		}
	}
	return out, nil
}
