package kv

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/kvorum/kvorum/internal/glob"
	"github.com/kvorum/kvorum/internal/redisnum"
)

// Hashes. A hash is a collection (coll.go): each field is one element
// storage key whose value is the field's value, and the metadata holds the
// number of fields, so HLEN is one point read and HSET/HGET/HDEL/HINCRBY
// touch only the fields they name (plus the metadata record for writes).
// HGETALL, HKEYS and HVALS read the hash whole, in byte order of the fields
// (Redis leaves the order unspecified). HSCAN pages through the fields in
// byte order with the cursors described at collCursors.
//
// This file also holds what hashes and sets share: HSCAN/SSCAN cursors and
// the random choice of elements (HRANDFIELD, SRANDMEMBER, SPOP).

func init() {
	const g = "hash"
	def("hset", -4, "write denyoom fast", 1, 1, 1, g, "Creates or modifies the value of a field in a hash.", cmdHSet, checkHSet)
	def("hsetnx", 4, "write denyoom fast", 1, 1, 1, g, "Sets the value of a field in a hash only when the field doesn't exist.", cmdHSetNX, nil)
	def("hget", 3, "readonly fast", 1, 1, 1, g, "Returns the value of a field in a hash.", cmdHGet, nil)
	def("hmset", -4, "write denyoom fast", 1, 1, 1, g, "Sets the values of multiple fields.", cmdHSet, checkHSet)
	def("hmget", -3, "readonly fast", 1, 1, 1, g, "Returns the values of all fields in a hash.", cmdHMGet, nil)
	def("hgetall", 2, "readonly", 1, 1, 1, g, "Returns all fields and values in a hash.", cmdHGetAll, nil)
	def("hdel", -3, "write fast", 1, 1, 1, g, "Deletes one or more fields and their values from a hash. Deletes the hash if no fields remain.", cmdHDel, nil)
	def("hexists", 3, "readonly fast", 1, 1, 1, g, "Determines whether a field exists in a hash.", cmdHExists, nil)
	def("hlen", 2, "readonly fast", 1, 1, 1, g, "Returns the number of fields in a hash.", cmdHLen, nil)
	def("hkeys", 2, "readonly", 1, 1, 1, g, "Returns all fields in a hash.", cmdHGetAll, nil)
	def("hvals", 2, "readonly", 1, 1, 1, g, "Returns all values in a hash.", cmdHGetAll, nil)
	def("hincrby", 4, "write denyoom fast", 1, 1, 1, g, "Increments the integer value of a field in a hash by a number. Uses 0 as initial value if the field doesn't exist.", cmdHIncrBy, checkIntArg(3))
	def("hincrbyfloat", 4, "write denyoom fast", 1, 1, 1, g, "Increments the floating point value of a field by a number. Uses 0 as initial value if the field doesn't exist.", cmdHIncrByFloat, checkHIncrByFloat)
	def("hstrlen", 3, "readonly fast", 1, 1, 1, g, "Returns the length of the value of a field.", cmdHStrlen, nil)
	def("hrandfield", -2, "readonly", 1, 1, 1, g, "Returns one or more random fields from a hash.", cmdHRandField, checkHRandField)
	def("hscan", -3, "readonly", 1, 1, 1, g, "Iterates over fields and values of a hash.", cmdHScan, checkCollScan)
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

// checkHSet: HSET and HMSET take field/value pairs.
func checkHSet(args [][]byte) (Reply, bool) {
	if len(args)%2 == 1 {
		if len(args[0]) == len("hset") {
			return wrongArity("hset"), false
		}
		return wrongArity("hmset"), false
	}
	return Reply{}, true
}

// collForWrite loads k as a collection of type typ for a write command or,
// if absent, returns a new empty one with no version allocated yet (see
// materialize).
func (x *ctx) collForWrite(k []byte, typ byte) (*coll, error) {
	c, ok, e := x.loadColl(k, typ)
	if e != nil {
		return nil, e
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
	c, e := x.collForWrite(args[1], typeHash)
	if e != nil {
		return errReply(e)
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
	if len(args[0]) == len("hset") {
		return Int(created)
	}
	return OK
}

func cmdHSetNX(x *ctx, args [][]byte) Reply {
	c, e := x.collForWrite(args[1], typeHash)
	if e != nil {
		return errReply(e)
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
	if err := x.materialize(c); err != nil {
		return errReply(err)
	}
	if err := x.setElem(c, args[2], args[3]); err != nil {
		return errReply(err)
	}
	c.setLength(c.length() + 1)
	if err := x.saveColl(c); err != nil {
		return errReply(err)
	}
	return Int(1)
}

func cmdHGet(x *ctx, args [][]byte) Reply {
	c, ok, e := x.loadColl(args[1], typeHash)
	if e != nil {
		return errReply(e)
	}
	if !ok {
		return Nil
	}
	v, ok, err := x.getElem(c, args[2])
	if err != nil {
		return errReply(err)
	}
	if !ok {
		return Nil
	}
	return Bulk(v)
}

func cmdHMGet(x *ctx, args [][]byte) Reply {
	c, ok, e := x.loadColl(args[1], typeHash)
	if e != nil {
		return errReply(e)
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
	c, ok, e := x.loadColl(args[1], typeHash)
	if e != nil {
		return errReply(e)
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

func cmdHDel(x *ctx, args [][]byte) Reply { return removeElems(x, args, typeHash) }

func cmdHExists(x *ctx, args [][]byte) Reply { return elemExists(x, args, typeHash) }

func cmdHLen(x *ctx, args [][]byte) Reply {
	c, ok, e := x.loadColl(args[1], typeHash)
	if e != nil {
		return errReply(e)
	}
	if !ok {
		return Int(0)
	}
	return Int(c.length())
}

func cmdHStrlen(x *ctx, args [][]byte) Reply {
	c, ok, e := x.loadColl(args[1], typeHash)
	if e != nil {
		return errReply(e)
	}
	if !ok {
		return Int(0)
	}
	v, _, err := x.getElem(c, args[2])
	if err != nil {
		return errReply(err)
	}
	return Int(int64(len(v)))
}

func cmdHIncrBy(x *ctx, args [][]byte) Reply {
	incr, _ := redisnum.ParseInt(args[3])
	c, e := x.collForWrite(args[1], typeHash)
	if e != nil {
		return errReply(e)
	}
	var cur int64
	if c.rec.version != 0 {
		v, had, err := x.getElem(c, args[2])
		if err != nil {
			return errReply(err)
		}
		if had {
			n, ok := redisnum.ParseInt(v)
			if !ok {
				return errHashNotInt
			}
			cur = n
		}
	}
	if (incr < 0 && cur < 0 && incr < math.MinInt64-cur) || (incr > 0 && cur > 0 && incr > math.MaxInt64-cur) {
		return errOverflow
	}
	cur += incr
	if r := x.hashPut(c, args[2], strconv.AppendInt(nil, cur, 10)); r.IsError() {
		return r
	}
	return Int(cur)
}

// hashPut sets field f of c (created if needed) to v and saves c.
func (x *ctx) hashPut(c *coll, f, v []byte) Reply {
	had := false
	if c.rec.version != 0 {
		var err error
		if had, err = x.hasElem(c, f); err != nil {
			return errReply(err)
		}
	}
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
	return OK
}

// checkHIncrByFloat: Redis refuses a non-float or infinite increment
// before it looks at the key.
func checkHIncrByFloat(args [][]byte) (Reply, bool) {
	f, ok := redisnum.ParseLongDouble(args[3])
	if !ok {
		return errNotFloat, false
	}
	if f.IsInf() {
		return errHashIncrInf, false
	}
	return Reply{}, true
}

// cmdHIncrByFloat computes like INCRBYFLOAT (x87 extended precision,
// formatted as Redis's ld2string(LD_STR_HUMAN)); see cmdIncrByFloat.
func cmdHIncrByFloat(x *ctx, args [][]byte) Reply {
	incr, ok := redisnum.ParseLongDouble(args[3])
	if !ok {
		return errNotFloat
	}
	if incr.IsInf() {
		return errHashIncrInf
	}
	c, e := x.collForWrite(args[1], typeHash)
	if e != nil {
		return errReply(e)
	}
	cur := new(big.Float).SetPrec(64)
	if c.rec.version != 0 {
		v, had, err := x.getElem(c, args[2])
		if err != nil {
			return errReply(err)
		}
		if had {
			f, good := redisnum.ParseLongDouble(v)
			if !good {
				return errHashNotFloat
			}
			cur = f
		}
	}
	if cur.IsInf() {
		return errNaN
	}
	sum := new(big.Float).SetPrec(64).SetMode(big.ToNearestEven).Add(cur, incr)
	if sum.Sign() != 0 && sum.MantExp(nil) > 16384 {
		return errNaN // beyond the x87 extended range: Redis gets Infinity
	}
	out := []byte(redisnum.FormatLongDouble(sum))
	if r := x.hashPut(c, args[2], out); r.IsError() {
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

// parseRandArgs returns the count of HRANDFIELD or ZRANDMEMBER (has=false
// without one) and whether option (WITHVALUES, WITHSCORES) was given,
// checked in Redis's order.
func parseRandArgs(args [][]byte, option string) (count int64, has, withOpt bool, r Reply, ok bool) {
	if len(args) < 3 {
		return 0, false, false, Reply{}, true
	}
	n, r, ok := parseRandCount(args[2])
	if !ok {
		return 0, false, false, r, false
	}
	if len(args) > 4 || (len(args) == 4 && !eq(args[3], option)) {
		return 0, false, false, errSyntax, false
	}
	if len(args) == 4 {
		if n < -math.MaxInt64/2 || n > math.MaxInt64/2 {
			return 0, false, false, errRandValues, false
		}
		withOpt = true
	}
	return n, true, withOpt, Reply{}, true
}

func parseHRandField(args [][]byte) (count int64, has, withValues bool, r Reply, ok bool) {
	return parseRandArgs(args, "withvalues")
}

func checkHRandField(args [][]byte) (Reply, bool) {
	_, _, _, r, ok := parseHRandField(args)
	return r, ok
}

// cmdHRandField: without a count, one random field (nil if the key is
// absent). With a count: that many distinct fields in random order, the
// whole hash (in byte order) if the count is at least its size, or for a
// negative count that many independent draws. WITHVALUES replies a flat
// field, value, ... array, as Redis does in RESP2 (RESP3 would nest the
// pairs; kv has no reply kind for that).
func cmdHRandField(x *ctx, args [][]byte) Reply {
	l, has, withValues, r, ok := parseHRandField(args)
	if !ok {
		return r
	}
	c, ok, e := x.loadColl(args[1], typeHash)
	if e != nil {
		return errReply(e)
	}
	if !ok {
		if has {
			return Array()
		}
		return Nil
	}
	if !has {
		picks, err := x.randomElems(c, x.rand(), 1, true)
		if err != nil {
			return errReply(err)
		}
		if len(picks) == 0 {
			return Nil
		}
		return Bulk(picks[0].elem)
	}
	picks, r, ok := x.randomCount(c, l, errHRandTooMany)
	if !ok {
		return r
	}
	if !withValues {
		out := make([]Reply, len(picks))
		for i, p := range picks {
			out[i] = Bulk(p.elem)
		}
		return Array(out...)
	}
	out := make([]Reply, 0, 2*len(picks))
	for _, p := range picks {
		out = append(out, Bulk(p.elem), Bulk(p.value))
	}
	return Pairs(out...)
}

func cmdHScan(x *ctx, args [][]byte) Reply { return x.collScan(args, typeHash) }

// ---------------------------------------------------------------------------
// HSCAN and SSCAN.

// checkCollScan checks the cursor, which Redis parses before it looks at
// the key; the options are parsed after (HSCAN of a missing key with bad
// options is an empty page, not an error).
func checkCollScan(args [][]byte) (Reply, bool) {
	if _, ok := parseCursor(args[2]); !ok {
		return errInvalidCurs, false
	}
	return Reply{}, true
}

// parseCollScan parses HSCAN/SSCAN's options (from args[3]) like Redis's
// scanGenericCommand: COUNT (>= 1) and MATCH, each possibly repeated.
func parseCollScan(args [][]byte) (count int64, match []byte, r Reply, ok bool) {
	count = 10
	for i := 3; i < len(args); i += 2 {
		if i+1 >= len(args) {
			return 0, nil, errSyntax, false
		}
		switch {
		case eq(args[i], "count"):
			n, ok := redisnum.ParseInt(args[i+1])
			if !ok {
				return 0, nil, errNotInt, false
			}
			if n < 1 {
				return 0, nil, errSyntax, false
			}
			count = n
		case eq(args[i], "match"):
			match = args[i+1]
			if len(match) == 1 && match[0] == '*' {
				match = nil
			}
		default:
			return 0, nil, errSyntax, false
		}
	}
	return count, match, Reply{}, true
}

// HSCAN/SSCAN cursors follow the design of SCAN's (keyspace.go), over the
// elements of one collection in byte order:
//
//   - A cursor is P<<32 | S: P is the first 4 bytes (zero padded) of the
//     last element the previous call visited and S a random salt, never 0.
//   - The node that hands out a cursor remembers, for cursorTTL, the key,
//     its incarnation and that exact element, and resumes strictly after it.
//   - A cursor the node does not remember (another node issued it, the node
//     restarted, the key was re-created, the entry expired or was evicted)
//     resumes at the first element >= P with trailing zero bytes removed,
//     which is never after the exact position: the scan stays complete and
//     may return elements again, as HSCAN/SSCAN allow.
//
// So every element present for the whole scan is returned at least once,
// and the scan ends with cursor 0. A collection of up to collScanWhole
// elements is returned whole by any call (cursor 0), as Redis does for its
// small encodings (listpack, intset). COUNT is the number of elements
// visited per call, matching MATCH or not. As with SCAN, the fallback's
// granularity is the 4-byte prefix: a scan whose every call lands on a node
// that does not remember its cursor re-reads the elements sharing that
// prefix, and makes no progress if more than COUNT of them share it.
var collCursors struct {
	sync.Mutex
	m    map[uint64]collCursor
	last time.Time
}

type collCursor struct {
	key     string
	version uint64
	after   []byte // the last element visited
	at      time.Time
}

const collScanWhole = 128

func collCursorRemember(key []byte, version uint64, after []byte) uint64 {
	collCursors.Lock()
	defer collCursors.Unlock()
	if collCursors.m == nil {
		collCursors.m = map[uint64]collCursor{}
	}
	now := time.Now()
	if len(collCursors.m) >= cursorLimit || now.Sub(collCursors.last) > time.Minute {
		for k, v := range collCursors.m {
			if now.Sub(v.at) > cursorTTL || len(collCursors.m) >= cursorLimit {
				delete(collCursors.m, k)
			}
		}
		collCursors.last = now
	}
	var p [4]byte
	copy(p[:], after)
	pos := collCursor{key: string(key), version: version, after: after, at: now}
	for {
		id := uint64(binary.BigEndian.Uint32(p[:]))<<32 | (1 + rand.Uint64N(1<<32-1))
		if old, ok := collCursors.m[id]; ok && (old.key != pos.key || old.version != version || !bytes.Equal(old.after, after)) {
			continue
		}
		collCursors.m[id] = pos
		return id
	}
}

// collCursorResume returns the element a scan with cursor id (not 0) of
// key's incarnation version resumes at (inclusive).
func collCursorResume(id uint64, key []byte, version uint64) []byte {
	collCursors.Lock()
	p, ok := collCursors.m[id]
	collCursors.Unlock()
	if ok && p.key == string(key) && p.version == version {
		return append(bytes.Clone(p.after), 0) // the successor of after
	}
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(id>>32))
	end := 4
	for end > 0 && b[end-1] == 0 {
		end--
	}
	return append([]byte{}, b[:end]...)
}

// collScan serves HSCAN (field, value pairs) and SSCAN (members).
func (x *ctx) collScan(args [][]byte, typ byte) Reply {
	cursor, ok := parseCursor(args[2])
	if !ok {
		return errInvalidCurs
	}
	c, ok, e := x.loadColl(args[1], typ)
	if e != nil {
		return errReply(e)
	}
	if !ok {
		return Array(BulkString("0"), Array())
	}
	count, match, r, ok := parseCollScan(args)
	if !ok {
		return r
	}
	var from []byte
	if c.length() <= collScanWhole {
		count = math.MaxInt64
	} else if cursor != 0 {
		from = collCursorResume(cursor, c.key, c.rec.version)
	}
	withValues := typ == typeHash
	out := []Reply{}
	var seen int64
	var last []byte
	more := false
	err := x.iterElems(c, nil, from, false, func(elem, value []byte) bool {
		if seen >= count {
			more = true
			return false
		}
		seen++
		last = append(last[:0], elem...)
		if match != nil && !glob.Match(match, elem, false) {
			return true
		}
		out = append(out, Bulk(bytes.Clone(elem)))
		if withValues {
			out = append(out, Bulk(bytes.Clone(value)))
		}
		return true
	})
	if err != nil {
		return errReply(err)
	}
	next := uint64(0)
	if more {
		next = collCursorRemember(c.key, c.rec.version, bytes.Clone(last))
	}
	return Array(BulkString(strconv.FormatUint(next, 10)), Array(out...))
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

// randomCount serves a count argument of HRANDFIELD/SRANDMEMBER: 0 is
// nothing, a positive count at least the size is every element in byte
// order, a smaller one as many distinct elements in random order, a
// negative count -count independent draws (refused with tooMany beyond
// randMaxReply).
func (x *ctx) randomCount(c *coll, l int64, tooMany Reply) ([]elemPair, Reply, bool) {
	n := c.length()
	switch {
	case l == 0:
		return nil, Reply{}, true
	case l >= n:
		var all []elemPair
		err := x.iterElems(c, nil, nil, false, func(elem, value []byte) bool {
			all = append(all, elemPair{bytes.Clone(elem), bytes.Clone(value)})
			return true
		})
		if err != nil {
			return nil, errReply(err), false
		}
		return all, Reply{}, true
	case l < 0 && -l > randMaxReply:
		return nil, tooMany, false
	}
	distinct := l > 0
	if l < 0 {
		l = -l
	}
	picks, err := x.randomElems(c, x.rand(), l, distinct)
	if err != nil {
		return nil, errReply(err), false
	}
	return picks, Reply{}, true
}

// randomElems returns k elements of c drawn with rng, in random order:
// distinct ones if distinct (at most the size), else k independent draws.
func (x *ctx) randomElems(c *coll, rng *rand.Rand, k int64, distinct bool) ([]elemPair, error) {
	n := c.length()
	if n <= 0 || k <= 0 {
		return nil, nil
	}
	if distinct && k > n {
		k = n
	}
	ranks := make([]int64, 0, k) // in reply order
	if distinct {
		// Floyd's algorithm, then a shuffle for a random order.
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
	} else {
		for i := int64(0); i < k; i++ {
			ranks = append(ranks, rng.Int64N(n))
		}
	}
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
