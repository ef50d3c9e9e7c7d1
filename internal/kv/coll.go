package kv

import (
	"encoding/binary"
	"errors"

	"github.com/cockroachdb/pebble/v2"
)

// Collections (hash, list, set, sorted set) keep one storage key per
// element under 0x10 <escaped key> 0x01 <version> (see doc.go). The
// metadata record's value holds the type's state:
//
//	hash, set, zset: length (uint64 BE)
//	list:            head, tail (uint64 BE each); elements are at indices
//	                 [head, tail), length = tail - head
//
// A collection that becomes empty is deleted, as in Redis.

// coll is a loaded collection: its metadata record and key.
type coll struct {
	key []byte
	rec record
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
	return &coll{key: k, rec: rec}, true, nil
}

// loadOrCreate loads k as a collection of type typ or, if absent, returns
// a new empty one (with a fresh version) that saveColl will create.
func (x *ctx) loadOrCreate(k []byte, typ byte) (*coll, error) {
	c, ok, e := x.loadColl(k, typ)
	if e != nil || ok {
		return c, e
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
	v, cl, err := x.r.Get(c.elemKey(elem))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	out := append([]byte{}, v...)
	_ = cl.Close()
	return out, true, nil
}

// hasElem reports whether element elem exists.
func (x *ctx) hasElem(c *coll, elem []byte) (bool, error) {
	_, cl, err := x.r.Get(c.elemKey(elem))
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	_ = cl.Close()
	return true, nil
}

func (x *ctx) setElem(c *coll, elem, value []byte) error {
	return x.w.Set(c.elemKey(elem), value, nil)
}

func (x *ctx) delElem(c *coll, elem []byte) error {
	return x.w.Delete(c.elemKey(elem), nil)
}

// iterElems calls fn for the elements of c whose element bytes start with
// prefix (nil: all), in byte order (reverse if rev), starting at element
// `from` (inclusive; nil: the first/last one), until fn returns false.
// elem and value are valid only during the call.
func (x *ctx) iterElems(c *coll, prefix, from []byte, rev bool, fn func(elem, value []byte) bool) (err error) {
	base := appendElemPrefix(nil, c.key, c.rec.version)
	lo := append(append([]byte{}, base...), prefix...)
	hi := prefixEnd(lo)
	it, err := x.r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
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
	case from == nil && !rev:
		valid = it.First()
	case from == nil:
		valid = it.Last()
	case !rev:
		valid = it.SeekGE(append(append([]byte{}, base...), from...))
	default:
		// The last key <= from: SeekLT of from's immediate successor.
		valid = it.SeekLT(append(append(append([]byte{}, base...), from...), 0))
	}
	for valid {
		v, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		if !fn(it.Key()[len(base):], v) {
			return nil
		}
		if rev {
			valid = it.Prev()
		} else {
			valid = it.Next()
		}
	}
	return it.Error()
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

// copyElements copies every element of src's incarnation to dst's (used by
// RENAME and the *STORE commands that copy a whole collection).
func (x *ctx) copyElements(src, dst *coll) error {
	var werr error
	err := x.iterElems(src, nil, nil, false, func(elem, value []byte) bool {
		werr = x.setElem(dst, elem, value)
		return werr == nil
	})
	if werr != nil {
		return werr
	}
	return err
}

// removeElems is HDEL and SREM: delete the elements args[2:] of the
// collection args[1] of type typ and reply how many existed.
func removeElems(x *ctx, args [][]byte, typ byte) Reply {
	c, ok, e := x.loadColl(args[1], typ)
	if e != nil {
		return errReply(e)
	}
	if !ok {
		return Int(0)
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
	c, ok, e := x.loadColl(args[1], typ)
	if e != nil {
		return errReply(e)
	}
	if !ok {
		return Int(0)
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
