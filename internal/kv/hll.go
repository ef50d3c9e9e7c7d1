package kv

import "github.com/kvorum/kvorum/internal/hll"

// HyperLogLog: PFADD, PFCOUNT, PFMERGE, a port of Redis 7.0's
// hyperloglog.c commands. An HLL is a plain string in Redis's own format
// (package hll has the encoding), so clients that GET it see Redis's
// bytes.
//
// PFMERGE raises the destination's registers one by one as Redis does, so,
// as in Redis 7.0, merging sparse HLLs gives a sparse one unless it
// outgrows the limit; a dense source makes it dense. A PFADD that fails
// half way on a corrupted value keeps the registers it already set: Redis
// edits the value in place before it notices.
//
// PFCOUNT of a single key whose cached cardinality is stale writes the
// count back into the value's header, as Redis does (and, as there, it
// touches WATCHed keys and emits no keyspace event). kvorum serves PFCOUNT
// on the read path, which cannot write; the node then proposes
// KVORUM.PFCACHE of the key (PFCountStale says when), which does the
// write-back at apply on every replica. Inside MULTI/EXEC and scripts the
// PFCOUNT itself writes back.

func init() {
	def("pfadd", -2, "write denyoom fast", 1, 1, 1, "hyperloglog", "Adds elements to a HyperLogLog key. Creates the key if it doesn't exist.", cmdPFAdd, nil)
	def("pfcount", -2, "readonly", 1, -1, 1, "hyperloglog", "Returns the approximated cardinality of the set(s) observed by the HyperLogLog key(s).", cmdPFCount, nil)
	def("pfmerge", -2, "write denyoom", 1, -1, 1, "hyperloglog", "Merges one or more HyperLogLog values into a single key.", cmdPFMerge, nil)
	def("kvorum.pfcache", 2, "write", 1, 1, 1, "hyperloglog", "Internal: PFCOUNT's write-back of the cached cardinality.", cmdPFCount, nil)
	table["kvorum.pfcache"].internal = true
	specList = specList[:len(specList)-1]
}

// PFCountStale reports whether args is a PFCOUNT of one key that holds an
// HLL whose cached cardinality is stale in r at nowMs: the node then
// proposes KVORUM.PFCACHE of it.
func PFCountStale(r readerI, args [][]byte, nowMs int64) bool {
	if len(args) != 2 || !eq(args[0], "pfcount") {
		return false
	}
	x := getCtx(r, nil, nowMs)
	defer putCtx(x)
	h, _, err := loadHLLKey(x, args[1])
	if err != nil || h == nil {
		return false
	}
	_, valid := h.Cached()
	return !valid
}

var (
	errNotHLL     = Error("WRONGTYPE Key is not a valid HyperLogLog string value.")
	errCorruptHLL = Error("INVALIDOBJ Corrupted HLL object detected")
)

// loadHLLKey loads k as an HLL: nil if absent, or an error (see errReply; the key
// holds another type, or a string that is not an HLL).
func loadHLLKey(x *ctx, k []byte) (*hll.Sketch, record, error) {
	rec, ok, err := getString(x, k)
	if err != nil {
		return nil, rec, err
	}
	if !ok {
		return nil, rec, nil
	}
	if !hll.Valid(rec.value) {
		return nil, rec, &replyError{errNotHLL}
	}
	return hll.Load(rec.value), rec, nil
}

// cmdPFAdd: PFADD key [element ...]. 1 if the key was created or a
// register changed, else 0. The key keeps its TTL.
func cmdPFAdd(x *ctx, args [][]byte) Reply {
	h, rec, err := loadHLLKey(x, args[1])
	if err != nil {
		return errReply(err)
	}
	updated := 0
	var expire int64
	if h == nil {
		h = hll.New()
		updated++
	} else {
		expire = rec.expire
	}
	for _, ele := range args[2:] {
		changed, err := h.Add(ele)
		switch {
		case changed:
			updated++
		case err != nil:
			// Redis has already changed the value in place for the
			// elements before (and set the stale bit of the cache).
			if updated > 0 {
				if r := putString(x, "pfadd", args[1], h.Bytes(), expire); r.IsError() {
					return r
				}
			}
			return errCorruptHLL
		}
	}
	if updated == 0 {
		return Int(0)
	}
	h.InvalidateCache()
	if r := putString(x, "pfadd", args[1], h.Bytes(), expire); r.IsError() {
		return r
	}
	return Int(1)
}

// cmdPFCount: PFCOUNT key [key ...]. One key: its cached cardinality if
// valid, else computed (and, unlike Redis, not stored: see the top of the
// file). Several: the cardinality of their union, never cached.
func cmdPFCount(x *ctx, args [][]byte) Reply {
	if len(args) > 2 {
		var max hll.Registers
		for _, k := range args[1:] {
			h, _, err := loadHLLKey(x, k)
			if err != nil {
				return errReply(err)
			}
			if h == nil {
				continue
			}
			if h.Merge(&max) != nil {
				return errCorruptHLL
			}
		}
		return Int(int64(max.Count()))
	}
	h, rec, err := loadHLLKey(x, args[1])
	if err != nil {
		return errReply(err)
	}
	if h == nil {
		return Int(0)
	}
	if card, ok := h.Cached(); ok {
		return Int(int64(card))
	}
	card, err := h.Count()
	if err != nil {
		return errCorruptHLL
	}
	if x.w != nil { // a write (KVORUM.PFCACHE, or inside EXEC or a script): cache it
		h.SetCache(card)
		if err := x.store(args[1], &record{typ: typeString, expire: rec.expire, value: h.Bytes()}); err != nil {
			return errReply(err)
		}
	}
	return Int(int64(card))
}

// cmdPFMerge: PFMERGE destkey [sourcekey ...]. The destination is a source
// too; it keeps its TTL and its encoding unless a source is dense (then
// dense) or the registers set promote it, as in Redis 7.0: the merged
// registers are raised one by one in the destination, in register order.
func cmdPFMerge(x *ctx, args [][]byte) Reply {
	var max hll.Registers
	useDense := false
	var dest *hll.Sketch
	var expire int64
	for j, k := range args[1:] {
		h, rec, err := loadHLLKey(x, k)
		if err != nil {
			return errReply(err)
		}
		if h == nil {
			continue
		}
		if j == 0 {
			dest, expire = h, rec.expire
		}
		if h.Dense() {
			useDense = true
		}
		if h.Merge(&max) != nil {
			return errCorruptHLL
		}
	}
	if dest == nil {
		dest = hll.New()
	}
	if useDense && dest.ToDense() != nil {
		return errCorruptHLL
	}
	for j, v := range max {
		if v == 0 {
			continue
		}
		dest.Raise(j, v) // cannot fail: dest merged without error
	}
	dest.InvalidateCache()
	return putString(x, "pfadd", args[1], dest.Bytes(), expire)
}
