package kv

import (
	"bytes"
	"encoding/binary"
	"math"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/listargs"
	"github.com/kvorum/kvorum/internal/notify"
	"github.com/kvorum/kvorum/internal/redisnum"
	"github.com/kvorum/kvorum/internal/streamargs"
)

// Lists. A list's metadata value holds head and tail (coll.listBounds):
// element i (0-based from the left) is stored at element key
// uint64 BE (head + i), its value the element. A new list starts at
// listOrigin (1<<63) so it can grow both ways; the indices [head, tail) are
// contiguous at all times. LPUSH/RPUSH/LPOP/RPOP cost one point write per
// element, LLEN reads the metadata only, LINDEX/LSET are one point read or
// write, LRANGE and LPOP/RPOP with a count read only the range they return.
// LINSERT and LREM shift the elements of the shorter side of the change;
// LTRIM deletes the trimmed ends (a range deletion when there are many).
//
// The blocking commands (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP) are
// registered here as their non-blocking kernels: they behave as Redis does
// when it may not block (inside MULTI or a script) and reply with a null
// when there is nothing to pop. Waiting for a push is the server layer's
// job; BlockingTimeout tells it the timeout and the keys to watch.

func init() {
	def("lpush", -3, "write denyoom fast", 1, 1, 1, "list", "Prepends one or more elements to a list. Creates the key if it doesn't exist.", cmdLPush, nil)
	def("rpush", -3, "write denyoom fast", 1, 1, 1, "list", "Appends one or more elements to a list. Creates the key if it doesn't exist.", cmdLPush, nil)
	def("lpushx", -3, "write denyoom fast", 1, 1, 1, "list", "Prepends one or more elements to a list only when the list exists.", cmdLPush, nil)
	def("rpushx", -3, "write denyoom fast", 1, 1, 1, "list", "Appends an element to a list only when the list exists.", cmdLPush, nil)
	defParsed("lpop", -2, "write fast", 1, 1, 1, "list", "Returns the first elements in a list after removing it. Deletes the list if the last element was popped.", listargs.ParsePop, cmdLPop)
	defParsed("rpop", -2, "write fast", 1, 1, 1, "list", "Returns and removes the last elements of a list. Deletes the list if the last element was popped.", listargs.ParsePop, cmdLPop)
	def("llen", 2, "readonly fast", 1, 1, 1, "list", "Returns the length of a list.", cmdLLen, nil)
	defParsed("lrange", 4, "readonly", 1, 1, 1, "list", "Returns a range of elements from a list.", parseRange, cmdLRange)
	def("lindex", 3, "readonly", 1, 1, 1, "list", "Returns an element from a list by its index.", cmdLIndex, nil)
	def("lset", 4, "write denyoom", 1, 1, 1, "list", "Sets the value of an element in a list by its index.", cmdLSet, nil)
	defParsed("linsert", 5, "write denyoom", 1, 1, 1, "list", "Inserts an element before or after another element in a list.", listargs.ParseInsert, cmdLInsert)
	defParsed("lrem", 4, "write", 1, 1, 1, "list", "Removes elements from a list. Deletes the list if the last element was removed.", intArg(2), cmdLRem)
	defParsed("ltrim", 4, "write", 1, 1, 1, "list", "Removes elements from both ends a list. Deletes the list if all elements were trimmed.", parseRange, cmdLTrim)
	defParsed("lpos", -3, "readonly", 1, 1, 1, "list", "Returns the index of matching elements in a list.", listargs.ParsePos, cmdLPos)
	defParsed("lmove", 5, "write denyoom", 1, 2, 1, "list", "Returns an element after popping it from one list and pushing it to another. Deletes the list if the last element was moved.", listargs.ParseMove, cmdLMove)
	defParsed("rpoplpush", 3, "write denyoom", 1, 2, 1, "list", "Returns the last element of a list after removing and pushing it to another list. Deletes the list if the last element was popped.", listargs.ParseMove, cmdLMove)
	defParsed("lmpop", -4, "write movablekeys", 0, 0, 0, "list", "Returns multiple elements from a list after removing them. Deletes the list if the last element was popped.", listargs.ParseLMPop, cmdLMPop)
	defParsed("blpop", -3, "write noscript blocking", 1, -2, 1, "list", "Removes and returns the first element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped.", listargs.ParseBlockingPop, cmdBLPop)
	defParsed("brpop", -3, "write noscript blocking", 1, -2, 1, "list", "Removes and returns the last element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped.", listargs.ParseBlockingPop, cmdBLPop)
	defParsed("blmove", 6, "write denyoom noscript blocking", 1, 2, 1, "list", "Pops an element from a list, pushes it to another list and returns it. Blocks until an element is available otherwise. Deletes the list if the last element was moved.", listargs.ParseMove, cmdLMove)
	defParsed("brpoplpush", 4, "write denyoom noscript blocking", 1, 2, 1, "list", "Pops an element from a list, pushes it to another list and returns it. Block until an element is available otherwise. Deletes the list if the last element was popped.", listargs.ParseMove, cmdLMove)
	defParsed("blmpop", -5, "write blocking movablekeys", 0, 0, 0, "list", "Pops the first element from one of multiple lists. Blocks until an element is available otherwise. Deletes the list if the last element was popped.", listargs.ParseLMPop, cmdLMPop)
}

// Redis error texts of list commands.
var (
	errListIndexRange = Error("ERR index out of range")
	errListFull       = Error("ERR list index space exhausted")
)

// ---------------------------------------------------------------------------
// Storage

// listView is a loaded list: its bounds, changed in memory by the
// operations below, and a buffer holding its element key prefix. save
// writes the bounds back.
type listView struct {
	x          *ctx
	c          *coll
	head, tail uint64
	kb         []byte // element key prefix, then scratch for one index
	pre        int    // length of the prefix
}

// listChunk bounds how many elements a shifting operation reads before it
// writes them back.
const listChunk = 256

func (x *ctx) listView(c *coll) *listView {
	h, t := c.listBounds()
	l := &listView{x: x, c: c, head: h, tail: t}
	l.kb = appendElemPrefix(make([]byte, 0, len(c.key)+24), c.key, c.rec.version)
	l.pre = len(l.kb)
	return l
}

func (l *listView) n() int64 { return int64(l.tail - l.head) }

// key returns the storage key of position pos (0 = head; it may be -1 or
// n while shifting) in a scratch buffer valid until the next call.
func (l *listView) key(pos int64) []byte {
	l.kb = binary.BigEndian.AppendUint64(l.kb[:l.pre], l.head+uint64(pos))
	return l.kb
}

// freshKey is key in a new slice.
func (l *listView) freshKey(pos int64) []byte {
	b := make([]byte, l.pre, l.pre+8)
	copy(b, l.kb[:l.pre])
	return binary.BigEndian.AppendUint64(b, l.head+uint64(pos))
}

// get returns a copy of the element at pos.
func (l *listView) get(pos int64) ([]byte, error) {
	v, cl, err := l.x.r.Get(l.key(pos))
	if err != nil {
		return nil, err
	}
	out := append([]byte{}, v...)
	_ = cl.Close()
	return out, nil
}

func (l *listView) set(pos int64, v []byte) error { return l.x.w.Set(l.key(pos), v, nil) }

// delRange deletes the elements at positions [from, to): point deletions
// for a few, one range deletion for many.
func (l *listView) delRange(from, to int64) error {
	if to-from > 8 {
		return l.x.w.DeleteRange(l.freshKey(from), l.freshKey(to), nil)
	}
	for p := from; p < to; p++ {
		if err := l.x.w.Delete(l.key(p), nil); err != nil {
			return err
		}
	}
	return nil
}

// scan calls fn for the elements at positions [from, to), from the left
// (from the right if rev), until fn returns false. v is valid only during
// the call. No writes may happen during the scan.
func (l *listView) scan(from, to int64, rev bool, fn func(pos int64, v []byte) bool) (err error) {
	if from >= to {
		return nil
	}
	return walkRange(l.x.r, l.freshKey(from), l.freshKey(to), nil, rev, func(it *pebble.Iterator) (bool, error) {
		k := it.Key()
		if len(k) != l.pre+8 {
			return false, errCorruptRecord
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return false, err
		}
		return fn(int64(binary.BigEndian.Uint64(k[l.pre:])-l.head), v), nil
	})
}

// read returns copies of the elements at positions [from, to), left to
// right (right to left if rev).
func (l *listView) read(from, to int64, rev bool) ([][]byte, error) {
	if from >= to {
		return nil, nil
	}
	out := make([][]byte, 0, to-from)
	err := l.scan(from, to, rev, func(_ int64, v []byte) bool {
		out = append(out, append([]byte{}, v...))
		return true
	})
	return out, err
}

// each calls fn for the elements at positions [from, to), from the left
// (from the right if rev), reading them in chunks before the calls, so fn
// may overwrite any position it has already been given. Stops at the first
// error.
func (l *listView) each(from, to int64, rev bool, fn func(pos int64, v []byte) error) error {
	for from < to {
		lo, hi := from, to
		if hi-lo > listChunk {
			if rev {
				lo = hi - listChunk
			} else {
				hi = lo + listChunk
			}
		}
		vals, err := l.read(lo, hi, rev)
		if err != nil {
			return err
		}
		if int64(len(vals)) != hi-lo {
			return errCorruptRecord
		}
		for i, v := range vals {
			p := lo + int64(i)
			if rev {
				p = hi - 1 - int64(i)
			}
			if err := fn(p, v); err != nil {
				return err
			}
		}
		if rev {
			to = lo
		} else {
			from = hi
		}
	}
	return nil
}

// move moves the elements at positions [from, to) by delta (-1 or +1),
// leaving the position they vacate (from+delta... to-1 for -1, from for +1)
// to the caller.
func (l *listView) move(from, to, delta int64) error {
	return l.each(from, to, delta > 0, func(p int64, v []byte) error { return l.set(p+delta, v) })
}

// canGrow reports whether n more elements fit on the given side.
func (l *listView) canGrow(left bool, n int) bool {
	if left {
		return l.head >= uint64(n)
	}
	return math.MaxUint64-l.tail >= uint64(n)
}

func (l *listView) push(left bool, v []byte) error {
	if left {
		l.head--
		return l.set(0, v)
	}
	if err := l.set(l.n(), v); err != nil {
		return err
	}
	l.tail++
	return nil
}

// pop removes up to k elements from one end and returns them in pop order.
func (l *listView) pop(left bool, k int64) ([][]byte, error) {
	n := l.n()
	if k > n {
		k = n
	}
	if k == 1 {
		v, err := l.pop1(left)
		return [][]byte{v}, err
	}
	if left {
		vals, err := l.read(0, k, false)
		if err == nil {
			err = l.delRange(0, k)
		}
		l.head += uint64(k)
		return vals, err
	}
	vals, err := l.read(n-k, n, true)
	if err == nil {
		err = l.delRange(n-k, n)
	}
	l.tail -= uint64(k)
	return vals, err
}

// pop1 removes and returns one element of a non-empty list.
func (l *listView) pop1(left bool) ([]byte, error) {
	pos := int64(0)
	if !left {
		pos = l.n() - 1
	}
	v, err := l.get(pos)
	if err != nil {
		return nil, err
	}
	if err := l.x.w.Delete(l.key(pos), nil); err != nil {
		return nil, err
	}
	if left {
		l.head++
	} else {
		l.tail--
	}
	return v, nil
}

// insert inserts v so that it ends up at position pos (0..n), shifting the
// shorter side.
func (l *listView) insert(pos int64, v []byte) error {
	n := l.n()
	if pos < n-pos && l.head > 0 || l.tail == math.MaxUint64 {
		// [0, pos) moves one to the left; the old pos-1 receives v.
		if err := l.move(0, pos, -1); err != nil {
			return err
		}
		l.head--
		return l.set(pos, v)
	}
	if err := l.move(pos, n, +1); err != nil {
		return err
	}
	l.tail++
	return l.set(pos, v)
}

// removeAt removes the elements at the ascending positions ps, shifting the
// survivors of the cheaper side.
func (l *listView) removeAt(ps []int64) error {
	k := int64(len(ps))
	if k == 0 {
		return nil
	}
	n := l.n()
	first, last := ps[0], ps[k-1]
	if n-first-k <= last+1-k {
		// Survivors after first move towards the head.
		w, i := first, 0
		err := l.each(first, n, false, func(p int64, v []byte) error {
			if i < len(ps) && ps[i] == p {
				i++
				return nil
			}
			w++
			if w-1 == p {
				return nil
			}
			return l.set(w-1, v)
		})
		if err != nil {
			return err
		}
		if err := l.delRange(n-k, n); err != nil {
			return err
		}
		l.tail -= uint64(k)
		return nil
	}
	// Survivors before last move towards the tail.
	w, i := last, len(ps)-1
	err := l.each(0, last+1, true, func(p int64, v []byte) error {
		if i >= 0 && ps[i] == p {
			i--
			return nil
		}
		defer func() { w-- }()
		if w == p {
			return nil
		}
		return l.set(w, v)
	})
	if err != nil {
		return err
	}
	if err := l.delRange(0, k); err != nil {
		return err
	}
	l.head += uint64(k)
	return nil
}

// save writes the bounds back (deleting the key if the list is empty).
func (l *listView) save() error {
	l.c.setListBounds(l.head, l.tail)
	return l.x.saveColl(l.c)
}

// loadList loads k as a list; see loadColl.
func (x *ctx) loadList(k []byte) (*listView, bool, error) {
	c, ok, err := x.loadColl(k, typeList)
	if !ok || err != nil {
		return nil, false, err
	}
	return x.listView(c), true, nil
}

// popFirst pops up to count elements from one end of the first of keys
// that exists (which must be a list) and saves it; key is nil if none
// exists.
func (x *ctx) popFirst(keys [][]byte, left bool, count int64) (key []byte, vals [][]byte, err error) {
	for _, k := range keys {
		l, ok, err := x.loadList(k)
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			continue
		}
		if vals, err = l.pop(left, count); err == nil {
			err = l.save()
		}
		if err == nil {
			x.collEvent(notify.List, listEvent(left, "pop"), l.c)
		}
		return bytes.Clone(k), vals, err
	}
	return nil, nil, nil
}

func bulks(vals [][]byte) Reply {
	out := make([]Reply, len(vals))
	for i, v := range vals {
		out[i] = Bulk(v)
	}
	return Array(out...)
}

// listEvent is the event of a push or pop (op) at the left or right end.
func listEvent(left bool, op string) string {
	if left {
		return "l" + op
	}
	return "r" + op
}

// ---------------------------------------------------------------------------
// Commands

func cmdLPush(x *ctx, args [][]byte) Reply {
	left := args[0][0]|0x20 == 'l'
	var c *coll
	var err error
	if len(args[0]) == 6 { // LPUSHX, RPUSHX
		var ok bool
		if c, ok, err = x.loadColl(args[1], typeList); err == nil && !ok {
			return Int(0)
		}
	} else {
		c, err = x.loadOrCreate(args[1], typeList)
	}
	if err != nil {
		return errReply(err)
	}
	l := x.listView(c)
	vals := args[2:]
	if !l.canGrow(left, len(vals)) {
		return errListFull
	}
	for _, v := range vals {
		if err := l.push(left, v); err != nil {
			return errReply(err)
		}
	}
	if err := l.save(); err != nil {
		return errReply(err)
	}
	x.event(notify.List, listEvent(left, "push"), c.key)
	return Int(l.n())
}

func cmdLPop(x *ctx, args [][]byte, count int64) Reply {
	left := args[0][0]|0x20 == 'l'
	l, ok, err := x.loadList(args[1])
	switch {
	case err != nil:
		return errReply(err)
	case !ok && count < 0:
		return Nil
	case !ok:
		return NilArray
	case count == 0:
		return Array()
	}
	vals, err := l.pop(left, max(count, 1))
	if err == nil {
		err = l.save()
	}
	if err != nil {
		return errReply(err)
	}
	x.collEvent(notify.List, listEvent(left, "pop"), l.c)
	if count < 0 {
		return Bulk(vals[0])
	}
	return bulks(vals)
}

func cmdLLen(x *ctx, args [][]byte) Reply {
	l, ok, err := x.loadList(args[1])
	if err != nil || !ok {
		return errOr(err, Int(0))
	}
	return Int(l.n())
}

// span is the positions [from, to) of the elements of a list (or the
// ranks of a sorted set) of n elements that the range selects, as LRANGE,
// LTRIM, ZRANGE and ZREMRANGEBYRANK compute them (negative indexes count
// from the end; unlike GETRANGE's clamp, an end before the first element
// selects nothing); empty if from >= to.
func (q indexRange) span(n int64) (from, to int64) {
	start, end := q.start, q.end
	if start < 0 {
		start += n
	}
	if end < 0 {
		end += n
	}
	start = max(start, 0)
	if start > end || start >= n {
		return 0, 0
	}
	return start, min(end, n-1) + 1
}

func cmdLRange(x *ctx, args [][]byte, q indexRange) Reply {
	l, ok, err := x.loadList(args[1])
	if err != nil || !ok {
		return errOr(err, Array())
	}
	from, to := q.span(l.n())
	vals, err := l.read(from, to, false)
	if err != nil {
		return errReply(err)
	}
	return bulks(vals)
}

// listIndex loads the list args[1] and resolves the index args[2] in it
// (negative from the end), in Redis's order for LINDEX and LSET: the key,
// then the index. l is nil when the command ends with r: absent if there is
// no such key, outside if the index is out of range.
func (x *ctx) listIndex(args [][]byte, absent, outside Reply) (l *listView, pos int64, r Reply) {
	l, ok, err := x.loadList(args[1])
	if err != nil {
		return nil, 0, errReply(err)
	}
	if !ok {
		return nil, 0, absent
	}
	i, ok := redisnum.ParseInt(args[2])
	if !ok {
		return nil, 0, errNotInt
	}
	if i < 0 {
		i += l.n()
	}
	if i < 0 || i >= l.n() {
		return nil, 0, outside
	}
	return l, i, Reply{}
}

func cmdLIndex(x *ctx, args [][]byte) Reply {
	l, pos, r := x.listIndex(args, Nil, Nil)
	if l == nil {
		return r
	}
	v, err := l.get(pos)
	if err != nil {
		return errReply(err)
	}
	return Bulk(v)
}

func cmdLSet(x *ctx, args [][]byte) Reply {
	l, pos, r := x.listIndex(args, errNoSuchKey, errListIndexRange)
	if l == nil {
		return r
	}
	if err := l.set(pos, args[3]); err != nil {
		return errReply(err)
	}
	if err := l.save(); err != nil {
		return errReply(err)
	}
	x.event(notify.List, "lset", l.c.key)
	return OK
}

func cmdLInsert(x *ctx, args [][]byte, after bool) Reply {
	l, ok, err := x.loadList(args[1])
	if err != nil || !ok {
		return errOr(err, Int(0))
	}
	pivot := int64(-1)
	err = l.scan(0, l.n(), false, func(p int64, v []byte) bool {
		if bytes.Equal(v, args[3]) {
			pivot = p
			return false
		}
		return true
	})
	if err != nil {
		return errReply(err)
	}
	if pivot < 0 {
		return Int(-1)
	}
	if after {
		pivot++
	}
	if !l.canGrow(true, 1) && !l.canGrow(false, 1) {
		return errListFull
	}
	if err := l.insert(pivot, args[4]); err != nil {
		return errReply(err)
	}
	if err := l.save(); err != nil {
		return errReply(err)
	}
	x.event(notify.List, "linsert", l.c.key)
	return Int(l.n())
}

func cmdLRem(x *ctx, args [][]byte, count int64) Reply {
	l, ok, err := x.loadList(args[1])
	if err != nil || !ok {
		return errOr(err, Int(0))
	}
	rev := count < 0
	limit := uint64(count) // 0: all
	if rev {
		limit = uint64(-(count + 1)) + 1
	}
	var ps []int64
	err = l.scan(0, l.n(), rev, func(p int64, v []byte) bool {
		if bytes.Equal(v, args[3]) {
			ps = append(ps, p)
			return limit == 0 || uint64(len(ps)) < limit
		}
		return true
	})
	if err != nil {
		return errReply(err)
	}
	if len(ps) == 0 {
		return Int(0)
	}
	if rev {
		slices.Reverse(ps)
	}
	if err := l.removeAt(ps); err != nil {
		return errReply(err)
	}
	if err := l.save(); err != nil {
		return errReply(err)
	}
	x.collEvent(notify.List, "lrem", l.c)
	return Int(int64(len(ps)))
}

func cmdLTrim(x *ctx, args [][]byte, q indexRange) Reply {
	l, ok, err := x.loadList(args[1])
	if err != nil || !ok {
		return errOr(err, OK)
	}
	n := l.n()
	from, to := q.span(n)
	if from >= to {
		from, to = n, n // everything goes
	}
	if err := l.delRange(0, from); err != nil {
		return errReply(err)
	}
	if err := l.delRange(to, n); err != nil {
		return errReply(err)
	}
	l.tail = l.head + uint64(to)
	l.head += uint64(from)
	if err := l.save(); err != nil {
		return errReply(err)
	}
	x.collEvent(notify.List, "ltrim", l.c)
	return OK
}

func cmdLPos(x *ctx, args [][]byte, o listargs.Pos) Reply {
	// A port of Redis's loop, its int64 wrap-around (RANK of -2^63) included.
	rank, rev := o.Rank, false
	if rank < 0 {
		rank, rev = -rank, true
	}
	l, ok, err := x.loadList(args[1])
	if err != nil {
		return errReply(err)
	}
	if !ok {
		if o.Count != -1 {
			return Array()
		}
		return Nil
	}
	n := l.n()
	var out []Reply
	var index, matches int64
	matchIndex := int64(-1)
	err = l.scan(0, n, rev, func(p int64, v []byte) bool {
		if o.MaxLen != 0 && index >= o.MaxLen {
			return false
		}
		if bytes.Equal(v, args[2]) {
			matches++
			matchIndex = p
			if matches >= rank {
				if o.Count == -1 {
					return false
				}
				out = append(out, Int(p))
				if o.Count != 0 && matches-rank+1 >= o.Count {
					return false
				}
			}
		}
		index++
		matchIndex = -1
		return true
	})
	if err != nil {
		return errReply(err)
	}
	if o.Count != -1 {
		return Array(out...)
	}
	if matchIndex == -1 {
		return Nil
	}
	return Int(matchIndex)
}

// cmdLMove is LMOVE, RPOPLPUSH and the kernels of BLMOVE and BRPOPLPUSH.
func cmdLMove(x *ctx, args [][]byte, a listargs.Move) Reply {
	src, ok, err := x.loadList(args[1])
	if err != nil || !ok {
		return errOr(err, Nil)
	}
	dst := src
	if !bytes.Equal(args[1], args[2]) {
		c, err := x.loadOrCreate(args[2], typeList)
		if err != nil {
			return errReply(err)
		}
		dst = x.listView(c)
	}
	if (dst != src || a.From != a.To) && !dst.canGrow(a.To, 1) {
		return errListFull
	}
	v, err := src.pop1(a.From)
	if err == nil {
		err = dst.push(a.To, v)
	}
	if err == nil && dst != src {
		err = src.save()
	}
	if err == nil {
		err = dst.save()
	}
	if err != nil {
		return errReply(err)
	}
	x.event(notify.List, listEvent(a.To, "push"), dst.c.key)
	x.collEvent(notify.List, listEvent(a.From, "pop"), src.c)
	return Bulk(v)
}

// cmdBLPop is the kernel of BLPOP and BRPOP: pop from the first non-empty
// list, or a null array.
func cmdBLPop(x *ctx, args [][]byte, _ int64) Reply {
	k, vals, err := x.popFirst(args[1:len(args)-1], args[0][1]|0x20 == 'l', 1)
	if err != nil {
		return errReply(err)
	}
	if vals == nil {
		return NilArray
	}
	return Array(Bulk(k), Bulk(vals[0]))
}

// cmdLMPop is LMPOP and the kernel of BLMPOP.
func cmdLMPop(x *ctx, args [][]byte, a listargs.MPop) Reply {
	k, vals, err := x.popFirst(a.Keys, a.Head, a.Count)
	if err != nil {
		return errReply(err)
	}
	if vals == nil {
		return NilArray
	}
	return Array(Bulk(k), bulks(vals))
}

// BlockingTimeout reports whether args is a blocking write with valid
// syntax (the list and sorted set pops, XREADGROUP BLOCK) and, if so, its
// timeout (0 = forever) and the keys a write to which can wake it.
func BlockingTimeout(args [][]byte) (timeout time.Duration, keys [][]byte, ok bool) {
	if len(args) == 0 {
		return 0, nil, false
	}
	d := lookup(args[0])
	if d == nil || d.internal || !arityOK(&d.spec, args) {
		return 0, nil, false
	}
	var ms int64
	switch d.spec.Name {
	case "blpop", "brpop", "bzpopmin", "bzpopmax":
		ms, _, ok = listargs.ParseBlockingPop(args)
		keys = args[1 : len(args)-1]
	case "blmove", "brpoplpush":
		var a listargs.Move
		a, _, ok = listargs.ParseMove(args)
		ms, keys = a.Timeout, args[1:2]
	case "blmpop", "bzmpop":
		parse := listargs.ParseLMPop
		if d.spec.Name == "bzmpop" {
			parse = listargs.ParseZMPop
		}
		var a listargs.MPop
		a, _, ok = parse(args)
		ms, keys = a.Timeout, a.Keys
	case "xreadgroup":
		a, _, valid := streamargs.ParseXReadGroup(args)
		if ok = valid && a.Block; ok {
			ms, keys = a.Timeout, args[a.Streams:a.Streams+a.NKeys]
		}
	}
	if !ok {
		return 0, nil, false
	}
	return blockDuration(ms), keys, true
}

// blockDuration converts a timeout in milliseconds, capped at the longest
// Duration.
func blockDuration(ms int64) time.Duration {
	if ms > math.MaxInt64/int64(time.Millisecond) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(ms) * time.Millisecond
}
