package kv

import (
	"bytes"
	"encoding/binary"
	"math"
	"strconv"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/cursor"
	"github.com/kvorum/kvorum/internal/glob"
	"github.com/kvorum/kvorum/internal/redisnum"
)

// Collections (hash, list, set, sorted set) keep one storage key per
// element under 0x11 <slot:2> <escaped key> 0x01 <version> (see doc.go). The
// metadata record's value holds the type's state:
//
//	hash, set, zset: length (uint64 BE)
//	list:            head, tail (uint64 BE each); elements are at indices
//	                 [head, tail), length = tail - head
//
// A collection that becomes empty is deleted, as in Redis.
//
// The record's flags hold the collection's encoding as OBJECT ENCODING
// answers it: Redis's small one (listpack, intset) until flagBig is set, as
// Redis converts a hash, set or sorted set to its big one (hashtable,
// skiplist) for good, until the key is deleted, when a write makes it cross
// a threshold of Settings: grow checks each element written, saveColl the
// length. Both run at apply, with the replicated thresholds, so every
// replica sets the flag at the same log index. Every collection saved has
// flagEncKnown; one without it (written before kvorum tracked encodings)
// counts as big if its length is above the threshold, and keeps that
// answer from its next write on (what its elements were is not known
// without a scan: a short one with a long element counts as small).
const (
	flagEncKnown byte = 1 << iota
	flagBig
)

// coll is a loaded collection: its metadata record and key.
type coll struct {
	key  []byte
	rec  record
	grew bool // an element was added (a hash's: or set): saveColl checks the length
}

// grow notes that c's element elem (a hash's field, set to value) was
// written: c takes the big encoding if either is too long for the small
// one, or, for a set, if elem is not an integer (Redis's string2ll).
func (x *ctx) grow(c *coll, elem, value []byte) {
	c.grew = true
	if c.rec.flags&flagBig != 0 {
		return
	}
	big := false
	switch c.rec.typ {
	case typeHash:
		max := x.limits().enc[hashValue]
		big = int64(len(elem)) > max || int64(len(value)) > max
	case typeSet:
		_, ok := redisnum.ParseInt(elem)
		big = !ok
	case typeZSet:
		big = int64(len(elem)) > x.limits().enc[zsetValue]
	}
	if big {
		c.rec.flags |= flagBig
	}
}

// isBig reports whether collection rec has Redis's big encoding.
func (x *ctx) isBig(rec record) bool {
	if rec.flags&flagEncKnown != 0 {
		return rec.flags&flagBig != 0
	}
	c := coll{rec: rec}
	return c.length() > x.limits().entries(rec.typ)
}

const listOrigin = uint64(1) << 63

// length returns the number of elements.
func (c *coll) length() int64 {
	if c.rec.typ == typeList {
		h, t := c.listBounds()
		return int64(t - h)
	}
	if len(c.rec.value) < 8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(c.rec.value))
}

// setLength sets the length of a hash, set or zset.
func (c *coll) setLength(n int64) {
	if len(c.rec.value) < 8 {
		c.rec.value = make([]byte, 8)
	}
	binary.BigEndian.PutUint64(c.rec.value, uint64(n))
}

// listBounds returns a list's [head, tail).
func (c *coll) listBounds() (head, tail uint64) {
	if len(c.rec.value) < 16 {
		return listOrigin, listOrigin
	}
	return binary.BigEndian.Uint64(c.rec.value), binary.BigEndian.Uint64(c.rec.value[8:])
}

// setListBounds sets a list's [head, tail).
func (c *coll) setListBounds(head, tail uint64) {
	if len(c.rec.value) < 16 {
		c.rec.value = make([]byte, 16)
	}
	binary.BigEndian.PutUint64(c.rec.value, head)
	binary.BigEndian.PutUint64(c.rec.value[8:], tail)
}

// loadColl loads k as a collection of type typ. ok=false: absent (or
// expired). A non-nil error is errTypeMismatch or a storage error (see errReply).
func (x *ctx) loadColl(k []byte, typ byte) (*coll, bool, error) {
	rec, ok, err := x.load(k)
	if err != nil {
		return nil, false, err
	}
	if !ok {
		return nil, false, nil
	}
	if rec.typ != typ {
		return nil, false, errTypeMismatch
	}
	if x.w != nil && rec.flags&flagEncKnown == 0 && x.isBig(rec) {
		rec.flags |= flagBig // an old record: kept as OBJECT ENCODING answered it
	}
	return &coll{key: k, rec: rec}, true, nil
}

// loadOrCreate loads k as a collection of type typ or, if absent, returns
// a new empty one (with a fresh version) that saveColl will create.
func (x *ctx) loadOrCreate(k []byte, typ byte) (*coll, error) {
	c, ok, err := x.loadColl(k, typ)
	if err != nil || ok {
		return c, err
	}
	v, err := x.newVersion()
	if err != nil {
		return nil, err
	}
	c = &coll{key: k, rec: record{typ: typ, version: v}}
	if typ == typeList {
		c.setListBounds(listOrigin, listOrigin)
	} else {
		c.setLength(0)
	}
	return c, nil
}

// saveColl writes c's metadata record after its elements changed (every
// write to a collection must call it: it also stamps the key for WATCH). An
// empty collection is deleted instead.
func (x *ctx) saveColl(c *coll) error {
	if c.length() <= 0 {
		return x.remove(c.key)
	}
	if (c.grew || c.rec.flags&flagEncKnown == 0) && c.length() > x.limits().entries(c.rec.typ) {
		c.rec.flags |= flagBig
	}
	c.rec.flags |= flagEncKnown
	// store, not storeOver: c may replace an expired record of another
	// incarnation whose elements must go.
	return x.store(c.key, &c.rec)
}

// elemKey returns the storage key of element elem of c. The result is a
// fresh slice.
func (c *coll) elemKey(elem []byte) []byte {
	b := appendElemPrefix(make([]byte, 0, len(c.key)+16+len(elem)), c.key, c.rec.version)
	return append(b, elem...)
}

// getElem returns a copy of element elem's value; ok=false if absent.
func (x *ctx) getElem(c *coll, elem []byte) ([]byte, bool, error) {
	return getCopy(x.r, c.elemKey(elem))
}

// hasElem reports whether element elem exists.
func (x *ctx) hasElem(c *coll, elem []byte) (bool, error) { return hasKey(x.r, c.elemKey(elem)) }

// setElem writes element elem (see grow).
func (x *ctx) setElem(c *coll, elem, value []byte) error {
	x.grow(c, elem, value)
	return x.w.Set(c.elemKey(elem), value, nil)
}

func (x *ctx) delElem(c *coll, elem []byte) error {
	return x.w.Delete(c.elemKey(elem), nil)
}

// iterElems calls fn for the elements of c whose element bytes start with
// prefix (nil: all), in byte order (reverse if rev), starting at element
// `from` (inclusive; nil: the first/last one), until fn returns false.
// elem and value are valid only during the call.
func (x *ctx) iterElems(c *coll, prefix, from []byte, rev bool, fn func(elem, value []byte) bool) error {
	base := appendElemPrefix(nil, c.key, c.rec.version)
	lo := append(append([]byte{}, base...), prefix...)
	var start []byte
	if from != nil {
		start = append(append([]byte{}, base...), from...)
		if rev {
			start = append(start, 0) // the last key <= from: < its successor
		}
	}
	return walkRange(x.r, lo, prefixEnd(lo), start, rev, func(it *pebble.Iterator) (bool, error) {
		v, err := it.ValueAndErr()
		if err != nil {
			return false, err
		}
		return fn(it.Key()[len(base):], v), nil
	})
}

// prefixEnd returns the smallest key greater than every key with prefix p.
func prefixEnd(p []byte) []byte {
	end := append([]byte{}, p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xFF {
			end[i]++
			return end[:i+1]
		}
	}
	return nil // p is all 0xFF: no upper bound
}

// copyElements copies every element of src's incarnation to dst's (RENAME
// and COPY, which keep the encoding, as Redis's do).
func (x *ctx) copyElements(src, dst *coll) error {
	var werr error
	err := x.iterElems(src, nil, nil, false, func(elem, value []byte) bool {
		werr = x.w.Set(dst.elemKey(elem), value, nil)
		return werr == nil
	})
	if werr != nil {
		return werr
	}
	return err
}

// copyColl copies the elements of collection src, whose record is rec, to
// a new incarnation under key dst and returns the record that names it
// (RENAME and COPY: O(N)).
func (x *ctx) copyColl(src, dst []byte, rec record) (record, error) {
	v, err := x.newVersion()
	if err != nil {
		return rec, err
	}
	to := &coll{key: dst, rec: rec}
	to.rec.version = v
	if err := x.copyElements(&coll{key: src, rec: rec}, to); err != nil {
		return rec, err
	}
	return to.rec, nil
}

// removeElems is HDEL and SREM: delete the elements args[2:] of the
// collection args[1] of type typ and reply how many existed.
func removeElems(x *ctx, args [][]byte, typ byte) Reply {
	c, ok, err := x.loadColl(args[1], typ)
	if err != nil || !ok {
		return errOr(err, Int(0))
	}
	var deleted int64
	for _, el := range args[2:] {
		had, err := x.hasElem(c, el)
		if err != nil {
			return errReply(err)
		}
		if !had {
			continue
		}
		if err := x.delElem(c, el); err != nil {
			return errReply(err)
		}
		deleted++
		if c.length()-deleted <= 0 {
			break
		}
	}
	if deleted > 0 {
		c.setLength(c.length() - deleted)
		if err := x.saveColl(c); err != nil {
			return errReply(err)
		}
	}
	return Int(deleted)
}

// elemExists is HEXISTS and SISMEMBER: 1 if element args[2] is in the
// collection args[1] of type typ, else 0.
func elemExists(x *ctx, args [][]byte, typ byte) Reply {
	c, ok, err := x.loadColl(args[1], typ)
	if err != nil || !ok {
		return errOr(err, Int(0))
	}
	had, err := x.hasElem(c, args[2])
	if err != nil {
		return errReply(err)
	}
	if had {
		return Int(1)
	}
	return Int(0)
}

// collLength is HLEN, SCARD and ZCARD: the number of elements of the collection
// args[1] of type typ, 0 if absent.
func collLength(x *ctx, args [][]byte, typ byte) Reply {
	c, ok, err := x.loadColl(args[1], typ)
	if err != nil || !ok {
		return errOr(err, Int(0))
	}
	return Int(c.length())
}

// ---------------------------------------------------------------------------
// HSCAN, SSCAN and ZSCAN.
//
// A collection scan pages through the elements in the order of their
// position: a hash's fields and a set's members in byte order, a sorted
// set's index elements ('s', sortable score, member) in score order, with
// the cursors of package cursor (the position's head is 's' for a sorted
// set, nothing otherwise), remembered with the key and its incarnation in
// SCAN's table. So every element present for the whole scan is returned at
// least once, and the scan ends with cursor 0. A collection of up to
// scanWhole elements is returned whole by any call (cursor 0), as Redis does
// for its small encodings (listpack, intset). COUNT is the number of
// elements visited per call, matching MATCH or not.

const scanWhole = 128

// parseScanCursor reads the cursor of HSCAN, SSCAN or ZSCAN, which Redis
// parses before it looks at the key; the options are parsed after (HSCAN
// of a missing key with bad options is an empty page, not an error).
func parseScanCursor(args [][]byte) (uint64, Reply, bool) {
	id, ok := parseCursor(args[2])
	if !ok {
		return 0, errInvalidCurs, false
	}
	return id, Reply{}, true
}

// parseCollScan parses the options (from args[3]) of HSCAN, SSCAN or ZSCAN
// like Redis's scanGenericCommand: COUNT (>= 1) and MATCH, each possibly
// repeated.
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

// emptyScan is the reply of a scan of a missing key.
func emptyScan() Reply { return Array(BulkString("0"), Array()) }

// scanPage is one call of HSCAN, SSCAN or ZSCAN over collection c. The
// caller walks the elements from the position newScanPage returns: for
// each one, next says whether it still belongs to the page, the caller
// sets last to its position and replies it if matches says so.
type scanPage struct {
	c           *coll
	head        []byte // what every position starts with
	count, seen int64  // elements to visit, visited
	match       []byte // nil: every element
	last        []byte // the position of the last element visited
	more        bool   // the page ended before the collection
}

// newScanPage parses the options of a scan of c with cursor id (after c
// was found, as Redis does) and returns the page and the position its walk
// starts at (nil: the first).
func newScanPage(c *coll, args [][]byte, id uint64, head []byte) (p *scanPage, from []byte, r Reply, ok bool) {
	count, match, r, ok := parseCollScan(args)
	if !ok {
		return nil, nil, r, false
	}
	p = &scanPage{c: c, head: head, count: count, match: match}
	switch {
	case c.length() <= scanWhole:
		p.count = math.MaxInt64
	case id != 0:
		if after, ok := cursors.Resume(id, c.key, c.rec.version); ok {
			from = append(after, 0) // the successor of after
		} else {
			from = append(bytes.Clone(head), cursor.Fallback(id)...)
		}
	}
	return p, from, Reply{}, true
}

// next reports whether the walk's next element belongs to the page: false
// once count elements were visited.
func (p *scanPage) next() bool {
	if p.seen >= p.count {
		p.more = true
		return false
	}
	p.seen++
	return true
}

// matches reports whether MATCH takes member.
func (p *scanPage) matches(member []byte) bool {
	return p.match == nil || glob.Match(p.match, member, false)
}

// reply replies the cursor of the next call (0: the scan is done) and out.
func (p *scanPage) reply(out []Reply) Reply {
	next := uint64(0)
	if p.more {
		next = cursors.Remember(cursor.Prefix(p.last[len(p.head):]), p.c.key, p.c.rec.version, p.last)
	}
	return Array(BulkString(strconv.FormatUint(next, 10)), Array(out...))
}

// collScan serves HSCAN (field, value pairs) and SSCAN (members).
func collScan(x *ctx, args [][]byte, id uint64, typ byte) Reply {
	c, ok, err := x.loadColl(args[1], typ)
	if err != nil || !ok {
		return errOr(err, emptyScan())
	}
	p, from, r, ok := newScanPage(c, args, id, nil)
	if !ok {
		return r
	}
	out := []Reply{}
	err = x.iterElems(c, nil, from, false, func(elem, value []byte) bool {
		if !p.next() {
			return false
		}
		p.last = append(p.last[:0], elem...)
		if p.matches(elem) {
			out = append(out, Bulk(bytes.Clone(elem)))
			if typ == typeHash {
				out = append(out, Bulk(bytes.Clone(value)))
			}
		}
		return true
	})
	if err != nil {
		return errReply(err)
	}
	return p.reply(out)
}
