package kv

import (
	"bytes"

	"github.com/kvorum/kvorum/internal/notify"
	"github.com/kvorum/kvorum/internal/redisnum"
	"github.com/kvorum/kvorum/internal/sortargs"
)

// SORT and SORT_RO, a port of Redis 7.0's sortCommandGeneric.
//
// SORT with STORE is a write; without it, it is served as a read
// (cmdDef.readOnly). With STORE the result depends only on the data, so
// every replica stores the same list: elements are loaded in a fixed order
// (list order, set members in byte order, sorted set members in score
// order) and sorted with a stable sort, so elements that compare equal
// keep that order.
//
// Ordering rules, as in Redis:
//   - numeric (default): by the value strtod reads from the element or
//     from the BY key (a missing BY key counts as 0); equal scores are
//     ordered by the element's bytes. A value strtod does not take whole
//     (or NaN, or out of range) fails the command.
//   - ALPHA: by the element or BY value; a missing BY value sorts first.
//     With STORE, values compare as bytes; without, Redis uses strcoll,
//     which kvorum implements as the C/C.UTF-8 locale does: byte order up
//     to the first NUL byte.
//   - BY a pattern without '*' (BY nosort) does not sort: lists and sorted
//     sets keep their order (reversed by DESC). A set is sorted ALPHA with
//     STORE and in scripts, as Redis does; kvorum cannot tell a script from
//     a transaction (both run nested), so a set is sorted ALPHA inside
//     MULTI too, where Redis's order is unspecified. Otherwise Redis
//     returns the set in its iteration order, which kvorum emulates for a
//     set of integers (Redis's intset: ascending numbers) and replaces by
//     byte order for other sets (hash-table order). DESC does not apply.
//
// Not copied: Redis tests errno == ERANGE after strtod without clearing
// errno first, so a stale ERANGE (from an earlier command) can fail a
// SORT whose values are all valid numbers.

func init() {
	defParsed("sort", -2, "write denyoom movablekeys", 1, 1, 1, "generic", "Sorts the elements in a list, a set, or a sorted set, optionally storing the result.", sortargs.Parse, cmdSort)
	table["sort"].readOnly = func(args [][]byte) bool {
		o, _, ok := sortargs.Parse(args)
		return ok && o.Store == nil
	}
	defParsed("sort_ro", -2, "readonly movablekeys", 1, 1, 1, "generic", "Returns the sorted elements of a list, a set, or a sorted set.", sortargs.Parse, cmdSort)
}

var errSortScore = Error("ERR One or more scores can't be converted into double")

func cmdSort(x *ctx, args [][]byte, o sortargs.Opts) Reply {
	if o.Store != nil && x.w == nil {
		return Error("ERR internal: SORT ... STORE sent to Read")
	}
	rec, exists, err := x.load(args[1])
	if err != nil {
		return errReply(err)
	}
	typ := typeList // a missing key sorts as an empty list
	if exists {
		typ = rec.typ
		if typ != typeList && typ != typeSet && typ != typeZSet {
			return errWrongType
		}
	}
	var c *coll
	var n int64
	if exists {
		c = &coll{key: args[1], rec: rec}
		n = c.length()
	}
	alpha, by, dontSort := o.Alpha, o.By, o.DontSort
	hashOrder := false // a set returned in (emulated) hash-table order
	if dontSort && typ == typeSet {
		if o.Store != nil || x.nested {
			// Redis sorts ALPHA here so that the result is the same on
			// replicas (STORE) and in scripts.
			dontSort, alpha, by = false, true, nil
		} else {
			hashOrder = true
		}
	}

	start, end := o.Window(n)

	// elems is the result: the elements of positions [start, end] of the
	// sorted (or native) order.
	var elems [][]byte
	switch {
	case !exists:
	case dontSort && typ == typeList:
		if end >= start {
			l := x.listView(c)
			if o.Desc {
				elems, err = l.read(n-1-end, n-start, true)
			} else {
				elems, err = l.read(start, end+1, false)
			}
		}
	case dontSort && typ == typeZSet:
		if end >= start {
			var ents []zent
			if o.Desc {
				ents, err = x.zview(c).byRank(n-1-end, n-1-start, true)
			} else {
				ents, err = x.zview(c).byRank(start, end, false)
			}
			for _, e := range ents {
				elems = append(elems, e.member)
			}
		}
	default:
		// Everything is loaded and, unless in hash order, scored (a value
		// that is not a number fails the command even if LIMIT leaves it
		// out of the result).
		var all [][]byte
		if all, err = x.sortLoad(c); err != nil {
			break
		}
		if int64(len(all)) != n {
			err = errCorruptRecord
			break
		}
		if hashOrder {
			sortargs.HashOrder(all)
		} else {
			items := make([]sortargs.Item, len(all))
			for i, e := range all {
				items[i].Elem = e
			}
			if r, ok := x.sortKeys(items, by, alpha); !ok {
				return r
			}
			sortargs.Sort(items, alpha, by != nil, o.Store != nil, o.Desc)
			for i, it := range items {
				all[i] = it.Elem
			}
		}
		if end >= start {
			elems = all[start : end+1]
		}
	}
	if err != nil {
		return errReply(err)
	}

	// The output: the elements, or for each one the value of each GET
	// pattern (missing: a null, or with STORE an empty string).
	if len(o.Gets) == 0 {
		if o.Store != nil {
			return x.sortStore(o.Store, elems)
		}
		return bulks(elems)
	}
	out := make([]Reply, 0, len(elems)*len(o.Gets))
	for _, e := range elems {
		for _, p := range o.Gets {
			v, found, err := x.sortLookup(p, e)
			if err != nil {
				return errReply(err)
			}
			switch {
			case found:
				out = append(out, Bulk(v))
			case o.Store != nil:
				out = append(out, Bulk([]byte{}))
			default:
				out = append(out, Nil)
			}
		}
	}
	if o.Store != nil {
		vals := make([][]byte, len(out))
		for i := range out {
			vals[i] = out[i].Str
		}
		return x.sortStore(o.Store, vals)
	}
	return Array(out...)
}

// sortLoad returns copies of every element of c: a list in order, a set in
// byte order, a sorted set in score order.
func (x *ctx) sortLoad(c *coll) ([][]byte, error) {
	n := c.length()
	switch c.rec.typ {
	case typeList:
		return x.listView(c).read(0, n, false)
	case typeZSet:
		out := make([][]byte, 0, min(n, 1<<16))
		err := x.zview(c).walk(nil, false, func(_ uint64, m []byte) bool {
			out = append(out, bytes.Clone(m))
			return true
		})
		return out, err
	default:
		out := make([][]byte, 0, min(n, 1<<16))
		err := x.iterElems(c, nil, nil, false, func(elem, _ []byte) bool {
			out = append(out, bytes.Clone(elem))
			return true
		})
		return out, err
	}
}

// sortKeys fills in the sort keys of items: the BY value (or the element
// itself) as a score, or for ALPHA BY the value looked up. ok=false: the
// reply is an error to return.
func (x *ctx) sortKeys(items []sortargs.Item, by []byte, alpha bool) (Reply, bool) {
	if alpha && by == nil {
		return Reply{}, true // the elements themselves are compared
	}
	for i := range items {
		it := &items[i]
		v := it.Elem
		if by != nil {
			var found bool
			var err error
			v, found, err = x.sortLookup(by, it.Elem)
			if err != nil {
				return errReply(err), false
			}
			if !found {
				continue // score 0, or for ALPHA "missing" (sorts first)
			}
		}
		if alpha {
			it.Cmp, it.Has = v, true
			continue
		}
		f, ok := redisnum.ParseStrtod(v)
		if !ok {
			return errSortScore, false
		}
		it.Score = f
	}
	return Reply{}, true
}

// sortLookup is Redis's lookupKeyByPattern: "#" is the element itself;
// otherwise the first '*' of the pattern is replaced by the element and
// the result names a string key, or, with "->field" after the '*', a hash
// field. found=false: no '*', no such key or field, or the wrong type. As
// in Redis, the pattern is searched as a C string (up to its first NUL)
// while the parts copied keep their bytes.
func (x *ctx) sortLookup(pat, elem []byte) (v []byte, found bool, err error) {
	cp := sortargs.CString(pat)
	if len(cp) == 1 && cp[0] == '#' {
		return elem, true, nil
	}
	star := bytes.IndexByte(cp, '*')
	if star < 0 {
		return nil, false, nil
	}
	keyEnd := len(pat)
	var field []byte
	if f := bytes.Index(cp[star+1:], []byte("->")); f >= 0 {
		f += star + 1
		if f+2 < len(cp) {
			field = pat[f+2:]
			keyEnd = f
		}
	}
	key := make([]byte, 0, keyEnd-1+len(elem))
	key = append(append(append(key, pat[:star]...), elem...), pat[star+1:keyEnd]...)
	rec, ok, err := x.load(key)
	if err != nil || !ok {
		return nil, false, err
	}
	if field == nil {
		if rec.typ != typeString {
			return nil, false, nil
		}
		return rec.value, true, nil
	}
	if rec.typ != typeHash {
		return nil, false, nil
	}
	return x.getElem(&coll{key: key, rec: rec}, field)
}

// sortStore replaces dst with a list of vals, or deletes it if vals is
// empty, and replies the length. Like any SET, the new list has no TTL.
func (x *ctx) sortStore(dst []byte, vals [][]byte) Reply {
	if len(vals) == 0 {
		return x.removeStored(dst)
	}
	v, err := x.newVersion()
	if err != nil {
		return errReply(err)
	}
	c := &coll{key: dst, rec: record{typ: typeList, version: v}}
	c.setListBounds(listOrigin, listOrigin)
	l := x.listView(c)
	for _, val := range vals {
		if err := l.push(false, val); err != nil {
			return errReply(err)
		}
	}
	if err := l.save(); err != nil {
		return errReply(err)
	}
	x.event(notify.List, "sortstore", dst)
	return Int(int64(len(vals)))
}
