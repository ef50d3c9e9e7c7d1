package kv

import (
	"bytes"
	"cmp"
	"container/heap"
	"slices"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/notify"
	"github.com/kvorum/kvorum/internal/redisnum"
	"github.com/kvorum/kvorum/internal/reply"
)

// Sets. A set is a collection (coll.go): each member is one element
// storage key with an empty value, and the metadata holds the number of
// members, so SCARD is one point read and SADD/SREM/SISMEMBER touch only the
// members they name. Whole-set replies (SMEMBERS, SINTER, SUNION, SDIFF, and
// SPOP of the whole set) are RESP3 sets, in byte order of the members.
//
// SINTER iterates the smallest set and probes the others with point reads;
// SDIFF iterates the first set and probes the others; SUNION merges the
// sets' iterators. None of them holds more than its reply in memory, and
// the *STORE variants hold nothing: they write the result as it is
// computed into a new incarnation of the destination (a new version, so the
// destination may be one of the sources: its old elements are read under
// the old version and dropped when the new incarnation is saved). SPOP and
// SRANDMEMBER choose members as described in hash.go (randomElems).

func init() {
	const g = "set"
	def("sadd", -3, "write denyoom fast", 1, 1, 1, g, "Adds one or more members to a set. Creates the key if it doesn't exist.", cmdSAdd, nil)
	def("srem", -3, "write fast", 1, 1, 1, g, "Removes one or more members from a set. Deletes the set if the last member was removed.", cmdSRem, nil)
	def("smembers", 2, "readonly", 1, 1, 1, g, "Returns all members of a set.", cmdSMembers, nil)
	def("sismember", 3, "readonly fast", 1, 1, 1, g, "Determines whether a member belongs to a set.", cmdSIsMember, nil)
	def("smismember", -3, "readonly fast", 1, 1, 1, g, "Determines whether multiple members belong to a set.", cmdSMIsMember, nil)
	def("scard", 2, "readonly fast", 1, 1, 1, g, "Returns the number of members in a set.", cmdSCard, nil)
	defParsed("spop", -2, "write fast", 1, 1, 1, g, "Returns one or more random members from a set after removing them. Deletes the set if the last member was popped.", parseSPop, cmdSPop)
	defParsed("srandmember", -2, "readonly", 1, 1, 1, g, "Get one or multiple random members from a set", parseSRandMember, cmdSRandMember)
	def("smove", 4, "write fast", 1, 2, 1, g, "Moves a member from one set to another.", cmdSMove, nil)
	def("sinter", -2, "readonly", 1, -1, 1, g, "Returns the intersect of multiple sets.", cmdSOp, nil)
	def("sunion", -2, "readonly", 1, -1, 1, g, "Returns the union of multiple sets.", cmdSOp, nil)
	def("sdiff", -2, "readonly", 1, -1, 1, g, "Returns the difference of multiple sets.", cmdSOp, nil)
	def("sinterstore", -3, "write denyoom", 1, -1, 1, g, "Stores the intersect of multiple sets in a key.", cmdSOpStore, nil)
	def("sunionstore", -3, "write denyoom", 1, -1, 1, g, "Stores the union of multiple sets in a key.", cmdSOpStore, nil)
	def("sdiffstore", -3, "write denyoom", 1, -1, 1, g, "Stores the difference of multiple sets in a key.", cmdSOpStore, nil)
	defParsed("sintercard", -3, "readonly movablekeys", 0, 0, 0, g, "Returns the number of members of the intersect of multiple sets.", parseSInterCard, cmdSInterCard)
	defParsed("sscan", -3, "readonly", 1, 1, 1, g, "Iterates over members of a set.", parseScanCursor, cmdSScan)
}

// Redis error texts of set commands.
var (
	errSPopCount     = Error("ERR value is out of range, must be positive")
	errNumKeys       = Error("ERR numkeys should be greater than 0")
	errNumKeysArgs   = Error("ERR Number of keys can't be greater than number of args")
	errLimitNegative = Error("ERR LIMIT can't be negative")
	errSRandTooMany  = Error("ERR SRANDMEMBER count is too large: kvorum replies with at most " + strconv.Itoa(randMaxReply) + " members")
)

// setReply is a RESP3 set (an array in RESP2).
func setReply(elems []Reply) Reply { return Reply{Kind: reply.KindSet, Elems: elems} }

func cmdSAdd(x *ctx, args [][]byte) Reply {
	c, err := x.collForWrite(args[1], typeSet)
	if err != nil {
		return errReply(err)
	}
	var added int64
	for _, m := range args[2:] {
		if c.rec.version != 0 {
			had, err := x.hasElem(c, m)
			if err != nil {
				return errReply(err)
			}
			if had {
				continue
			}
		}
		if err := x.materialize(c); err != nil {
			return errReply(err)
		}
		if err := x.setElem(c, m, nil); err != nil {
			return errReply(err)
		}
		added++
	}
	if added > 0 {
		c.setLength(c.length() + added)
		if err := x.saveColl(c); err != nil {
			return errReply(err)
		}
		x.event(notify.Set, "sadd", c.key)
	}
	return Int(added)
}

// cmdSRem is removeElems (shared with HDEL) and SREM's events.
func cmdSRem(x *ctx, args [][]byte) Reply {
	c, _, _ := x.loadColl(args[1], typeSet)
	r := removeElems(x, args, typeSet)
	if c != nil && r.Int > 0 {
		c.setLength(c.length() - r.Int)
		x.collEvent(notify.Set, "srem", c)
	}
	return r
}

// setMembers returns every member of c, in byte order.
func (x *ctx) setMembers(c *coll) ([]Reply, error) {
	out := make([]Reply, 0, min(c.length(), 1<<16))
	err := x.iterElems(c, nil, nil, false, func(m, _ []byte) bool {
		out = append(out, Bulk(bytes.Clone(m)))
		return true
	})
	return out, err
}

func cmdSMembers(x *ctx, args [][]byte) Reply {
	c, ok, err := x.loadColl(args[1], typeSet)
	if err != nil || !ok {
		return errOr(err, setReply(nil))
	}
	out, err := x.setMembers(c)
	if err != nil {
		return errReply(err)
	}
	return setReply(out)
}

func cmdSIsMember(x *ctx, args [][]byte) Reply { return elemExists(x, args, typeSet) }

func cmdSMIsMember(x *ctx, args [][]byte) Reply {
	c, ok, err := x.loadColl(args[1], typeSet)
	if err != nil {
		return errReply(err)
	}
	out := make([]Reply, len(args)-2)
	for i, m := range args[2:] {
		out[i] = Int(0)
		if !ok {
			continue
		}
		had, err := x.hasElem(c, m)
		if err != nil {
			return errReply(err)
		}
		if had {
			out[i] = Int(1)
		}
	}
	return Array(out...)
}

func cmdSCard(x *ctx, args [][]byte) Reply { return collLength(x, args, typeSet) }

// parseSPop reads SPOP's count, -1 without one: a non-negative integer
// (Redis's getPositiveLongFromObjectOrReply gives the same text for both
// faults); more arguments are a syntax error.
func parseSPop(args [][]byte) (int64, Reply, bool) {
	switch len(args) {
	case 2:
		return -1, Reply{}, true
	case 3:
		if n, ok := redisnum.ParseInt(args[2]); ok && n >= 0 {
			return n, Reply{}, true
		}
		return 0, errSPopCount, false
	}
	return 0, errSyntax, false
}

// cmdSPop removes random members chosen with x.rand(), which is seeded by
// the log position: every replica pops the same members.
func cmdSPop(x *ctx, args [][]byte, count int64) Reply {
	c, ok, err := x.loadColl(args[1], typeSet)
	if err != nil {
		return errReply(err)
	}
	if count < 0 {
		if !ok {
			return Nil
		}
		picks, err := x.randomElems(c, x.rand(), 1)
		if err != nil {
			return errReply(err)
		}
		if len(picks) == 0 {
			return Nil
		}
		if r := x.setRemove(c, picks, "spop"); r.IsError() {
			return r
		}
		return Bulk(picks[0].elem)
	}
	if !ok || count == 0 {
		return setReply(nil)
	}
	if count >= c.length() {
		// The whole set: reply with it and delete the key.
		out, err := x.setMembers(c)
		if err != nil {
			return errReply(err)
		}
		c.setLength(0) // saveColl deletes the key
		if r := x.setRemove(c, nil, "spop"); r.IsError() {
			return r
		}
		return setReply(out)
	}
	picks, err := x.randomElems(c, x.rand(), count)
	if err != nil {
		return errReply(err)
	}
	if r := x.setRemove(c, picks, "spop"); r.IsError() {
		return r
	}
	if c.length()*5 <= count {
		if err := x.spopRebuilt(c); err != nil {
			return errReply(err)
		}
	}
	return setReply(elemReplies(picks))
}

// spopRebuilt: Redis's SPOP of a count that leaves at most a fifth of it
// builds a new set of the rest (spopWithCountCommand's third case), an
// intset again if the rest can be one.
func (x *ctx) spopRebuilt(c *coll) error {
	if c.rec.flags&flagBig == 0 || c.length() > x.limits().enc[setEntries] {
		return nil
	}
	ints := true
	err := x.iterElems(c, nil, nil, false, func(m, _ []byte) bool {
		_, ints = redisnum.ParseInt(m)
		return ints
	})
	if err != nil || !ints {
		return err
	}
	c.rec.flags &^= flagBig
	return x.storeOver(c.key, &c.rec)
}

// setRemove deletes the (distinct, present) members picks from c, saves
// it and emits event (and "del" if c is now empty).
func (x *ctx) setRemove(c *coll, picks []elemPair, event string) Reply {
	for _, p := range picks {
		if err := x.delElem(c, p.elem); err != nil {
			return errReply(err)
		}
	}
	c.setLength(c.length() - int64(len(picks)))
	if err := x.saveColl(c); err != nil {
		return errReply(err)
	}
	x.collEvent(notify.Set, event, c)
	return OK
}

// parseSRandMember reads SRANDMEMBER's count, if any.
func parseSRandMember(args [][]byte) (randArgs, Reply, bool) {
	switch len(args) {
	case 2:
		return randArgs{}, Reply{}, true
	case 3:
		n, r, ok := parseRandCount(args[2])
		return randArgs{count: n, has: true}, r, ok
	}
	return randArgs{}, errSyntax, false
}

// cmdSRandMember: without a count one random member (nil if the key is
// absent); with a count, as HRANDFIELD (randomPicks).
func cmdSRandMember(x *ctx, args [][]byte, a randArgs) Reply {
	picks, r, ok := x.randomPicks(args, typeSet, a, errSRandTooMany)
	if !ok {
		return r
	}
	return Array(elemReplies(picks)...)
}

// cmdSMove checks as Redis does: a missing source is 0 whatever the
// destination holds; then the source's type, then the destination's.
func cmdSMove(x *ctx, args [][]byte) Reply {
	src, ok, err := x.loadColl(args[1], typeSet)
	if err != nil || !ok {
		return errOr(err, Int(0))
	}
	dst, err := x.collForWrite(args[2], typeSet)
	if err != nil {
		return errReply(err)
	}
	m := args[3]
	had, err := x.hasElem(src, m)
	if err != nil || !had {
		return errOr(err, Int(0))
	}
	if bytes.Equal(args[1], args[2]) {
		return Int(1) // the same set: nothing moves
	}
	if r := x.setRemove(src, []elemPair{{elem: m}}, "srem"); r.IsError() {
		return r
	}
	inDst := false
	if dst.rec.version != 0 {
		if inDst, err = x.hasElem(dst, m); err != nil {
			return errReply(err)
		}
	}
	if !inDst {
		if err := x.materialize(dst); err != nil {
			return errReply(err)
		}
		if err := x.setElem(dst, m, nil); err != nil {
			return errReply(err)
		}
		dst.setLength(dst.length() + 1)
		if err := x.saveColl(dst); err != nil {
			return errReply(err)
		}
		x.event(notify.Set, "sadd", dst.key)
	}
	return Int(1)
}

// ---------------------------------------------------------------------------
// SINTER, SUNION, SDIFF, their *STORE variants and SINTERCARD.

type sOp uint8

const (
	sInter sOp = iota
	sUnion
	sDiff
)

func sOpOf(name []byte) sOp {
	switch {
	case len(name) >= 6 && eq(name[:6], "sinter"):
		return sInter
	case len(name) >= 6 && eq(name[:6], "sunion"):
		return sUnion
	}
	return sDiff
}

// sProbe tests membership with point reads, reusing one key buffer.
type sProbe struct{ buf []byte }

func (p *sProbe) has(x *ctx, c *coll, m []byte) (bool, error) {
	p.buf = append(appendElemPrefix(p.buf[:0], c.key, c.rec.version), m...)
	return hasKey(x.r, p.buf)
}

// sAlgebra computes op over the sets at keys (a missing key is an empty
// set) and calls emit with each member of the result, in byte order, until
// emit returns false. emit's member is valid only during the call. Every
// key is type-checked before anything is emitted (errTypeMismatch).
func (x *ctx) sAlgebra(op sOp, keys [][]byte, emit func(m []byte) (bool, error)) error {
	sets := make([]*coll, len(keys))
	missing := false
	for i, k := range keys {
		c, ok, err := x.loadColl(k, typeSet)
		if err != nil {
			return err
		}
		if ok {
			sets[i] = c
		} else {
			missing = true
		}
	}
	var p sProbe
	var werr error
	switch op {
	case sInter:
		if missing {
			return nil
		}
		// Iterate the smallest set, probe the others (largest last).
		slices.SortStableFunc(sets, func(a, b *coll) int { return cmp.Compare(a.length(), b.length()) })
		small := sets[0]
		var others []*coll
		for _, c := range sets[1:] {
			if !bytes.Equal(c.key, small.key) {
				others = append(others, c)
			}
		}
		err := x.iterElems(small, nil, nil, false, func(m, _ []byte) bool {
			for _, c := range others {
				ok, err := p.has(x, c, m)
				if err != nil {
					werr = err
					return false
				}
				if !ok {
					return true
				}
			}
			more, err := emit(m)
			werr = err
			return more && err == nil
		})
		return cmp.Or(werr, err)
	case sDiff:
		first := sets[0]
		if first == nil {
			return nil
		}
		var others []*coll
		for i, c := range sets[1:] {
			if c == nil {
				continue
			}
			if bytes.Equal(keys[i+1], keys[0]) {
				return nil // the first set minus itself
			}
			others = append(others, c)
		}
		// Larger sets first: more likely to hold the member.
		slices.SortStableFunc(others, func(a, b *coll) int { return cmp.Compare(b.length(), a.length()) })
		err := x.iterElems(first, nil, nil, false, func(m, _ []byte) bool {
			for _, c := range others {
				ok, err := p.has(x, c, m)
				if err != nil {
					werr = err
					return false
				}
				if ok {
					return true
				}
			}
			more, err := emit(m)
			werr = err
			return more && err == nil
		})
		return cmp.Or(werr, err)
	default:
		return x.sMerge(sets, emit)
	}
}

// sCursor is one set's iterator in a union's merge.
type sCursor struct {
	it   *pebble.Iterator
	base int // length of the element key prefix
}

func (c *sCursor) member() []byte { return c.it.Key()[c.base:] }

type sHeap []*sCursor

func (h sHeap) Len() int           { return len(h) }
func (h sHeap) Less(i, j int) bool { return bytes.Compare(h[i].member(), h[j].member()) < 0 }
func (h sHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *sHeap) Push(v any)        { *h = append(*h, v.(*sCursor)) }
func (h *sHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

// sMerge emits the union of sets (nil entries are empty) in byte order,
// merging their iterators.
func (x *ctx) sMerge(sets []*coll, emit func(m []byte) (bool, error)) (err error) {
	var all []*pebble.Iterator
	defer func() {
		for _, it := range all {
			if cerr := it.Close(); err == nil {
				err = cerr
			}
		}
	}()
	var h sHeap
	for _, c := range sets {
		if c == nil {
			continue
		}
		base := appendElemPrefix(nil, c.key, c.rec.version)
		it, err := x.r.NewIter(&pebble.IterOptions{LowerBound: base, UpperBound: prefixEnd(base)})
		if err != nil {
			return err
		}
		all = append(all, it)
		if it.First() {
			h = append(h, &sCursor{it: it, base: len(base)})
		} else if err := it.Error(); err != nil {
			return err
		}
	}
	heap.Init(&h)
	var prev []byte
	started := false
	for h.Len() > 0 {
		top := h[0]
		m := top.member()
		if !started || !bytes.Equal(m, prev) {
			started = true
			prev = append(prev[:0], m...)
			more, err := emit(m)
			if err != nil || !more {
				return err
			}
		}
		if top.it.Next() {
			heap.Fix(&h, 0)
		} else {
			if err := top.it.Error(); err != nil {
				return err
			}
			heap.Pop(&h)
		}
	}
	return nil
}

func cmdSOp(x *ctx, args [][]byte) Reply {
	var out []Reply
	err := x.sAlgebra(sOpOf(args[0]), args[1:], func(m []byte) (bool, error) {
		out = append(out, Bulk(bytes.Clone(m)))
		return true, nil
	})
	if err != nil {
		return errReply(err)
	}
	return setReply(out)
}

// cmdSOpStore writes the result as it is computed into a new incarnation
// of the destination (whatever the destination held is replaced, with no
// TTL); an empty result deletes the destination.
func cmdSOpStore(x *ctx, args [][]byte) Reply {
	dst := &coll{key: args[1], rec: record{typ: typeSet}}
	dst.setLength(0)
	var n int64
	var buf []byte
	err := x.sAlgebra(sOpOf(args[0]), args[2:], func(m []byte) (bool, error) {
		if err := x.materialize(dst); err != nil {
			return false, err
		}
		x.grow(dst, m, nil)
		buf = append(appendElemPrefix(buf[:0], dst.key, dst.rec.version), m...)
		n++
		return true, x.w.Set(buf, nil, nil)
	})
	if err != nil {
		return errReply(err)
	}
	if n == 0 {
		return x.removeStored(dst.key)
	}
	dst.setLength(n)
	if err := x.saveColl(dst); err != nil {
		return errReply(err)
	}
	x.event(notify.Set, strings.ToLower(string(args[0])), dst.key)
	return Int(n)
}

// removeStored deletes the destination k of a *STORE command whose result
// is empty and replies 0, emitting "del" if k existed (Redis's dbDelete).
func (x *ctx) removeStored(k []byte) Reply {
	if _, had, err := x.rawHeader(k); err != nil || !had {
		return errOr(err, Int(0))
	}
	if err := x.remove(k); err != nil {
		return errReply(err)
	}
	x.event(notify.Generic, "del", k)
	return Int(0)
}

// sInterCard is a parsed SINTERCARD: the number of keys, from args[2],
// and the limit (0: none).
type sInterCard struct{ numKeys, limit int64 }

// parseSInterCard parses SINTERCARD numkeys key... [LIMIT limit] in
// Redis's order.
func parseSInterCard(args [][]byte) (sInterCard, Reply, bool) {
	n, ok := redisnum.ParseInt(args[1])
	if !ok || n < 1 {
		return sInterCard{}, errNumKeys, false
	}
	if n > int64(len(args)-2) {
		return sInterCard{}, errNumKeysArgs, false
	}
	q := sInterCard{numKeys: n}
	for j := 2 + int(n); j < len(args); j++ {
		if !eq(args[j], "limit") || j+1 >= len(args) {
			return sInterCard{}, errSyntax, false
		}
		j++
		l, ok := redisnum.ParseInt(args[j])
		if !ok || l < 0 {
			return sInterCard{}, errLimitNegative, false
		}
		q.limit = l
	}
	return q, Reply{}, true
}

func cmdSInterCard(x *ctx, args [][]byte, q sInterCard) Reply {
	var card int64
	err := x.sAlgebra(sInter, args[2:2+q.numKeys], func([]byte) (bool, error) {
		card++
		return q.limit == 0 || card < q.limit, nil
	})
	if err != nil {
		return errReply(err)
	}
	return Int(card)
}

func cmdSScan(x *ctx, args [][]byte, id uint64) Reply {
	return collScan(x, args, id, typeSet)
}
