package kv

import (
	"encoding/binary"
	"errors"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/notify"
	"github.com/kvorum/kvorum/internal/slot"
)

const (
	// userPrefix starts the hidden keys (below), at the bottom of UserSpan.
	// In storage format 1 it also started every user key (see V2Key).
	userPrefix = 0x10
	// slotPrefix starts every user key in storage format 2:
	// 0x11 <slot:2 BE> <escaped key> <suffix>.
	slotPrefix = 0x11
	suffixMeta = 0x00
	suffixElem = 0x01
)

// Global hidden keys: inside UserSpan (so snapshots carry them) but below
// every user key (they start with 0x10, user keys with 0x11). FLUSHALL
// keeps them. The per-range and per-slot hidden keys are in hidden.go.
var (
	hiddenPrefix = []byte{userPrefix, 0x00, 0x00}
	scriptPrefix = []byte{userPrefix, 0x00, 0x00, 's'} // + sha1 hex: a cached Lua script body
	firstUserKey = []byte{slotPrefix}                  // below every user key, above every global hidden key
)

// Type tags of metadata records.
const (
	typeString byte = 1
	typeHash   byte = 2
	typeList   byte = 3
	typeSet    byte = 4
	typeZSet   byte = 5
	typeStream byte = 6
)

func typeName(t byte) string {
	switch t {
	case typeString:
		return "string"
	case typeHash:
		return "hash"
	case typeList:
		return "list"
	case typeSet:
		return "set"
	case typeZSet:
		return "zset"
	case typeStream:
		return "stream"
	}
	return "none"
}

// UserSpan returns the storage span [start, end) holding all user data:
// the hidden keys [0x10, 0x11) and the user keys [0x11, 0x12).
func UserSpan() (start, end []byte) { return []byte{userPrefix}, []byte{slotPrefix + 1} }

// userKeySpan is the span of every user key (metadata and elements), the
// hidden keys excluded.
func userKeySpan() (start, end []byte) { return []byte{slotPrefix}, []byte{slotPrefix + 1} }

// SlotSpan returns the storage span of the user keys of hash slots
// [lo, hi) (hi may be slot.Count): one contiguous span, since slots are
// big-endian right after the prefix.
func SlotSpan(lo, hi uint16) (start, end []byte) {
	start = []byte{slotPrefix, byte(lo >> 8), byte(lo)}
	if hi >= slot.Count {
		return start, []byte{slotPrefix + 1}
	}
	return start, []byte{slotPrefix, byte(hi >> 8), byte(hi)}
}

// appendKeyHead appends the prefix of every storage key of user key k:
// 0x11 and k's hash slot.
func appendKeyHead(b, k []byte) []byte {
	s := slot.Of(k)
	return append(b, slotPrefix, byte(s>>8), byte(s))
}

// keyHeadLen is the length of appendKeyHead's prefix.
const keyHeadLen = 3

// appendEscaped appends the escaped form of user key k plus its terminator.
func appendEscaped(b, k []byte) []byte {
	for _, c := range k {
		b = append(b, c)
		if c == 0 {
			b = append(b, 0xFF)
		}
	}
	return append(b, 0x00, 0x01)
}

// metaKey returns the storage key of k's metadata record.
func metaKey(k []byte) []byte { return appendMetaKey(make([]byte, 0, len(k)+6), k) }

func appendMetaKey(b, k []byte) []byte {
	b = appendKeyHead(b, k)
	b = appendEscaped(b, k)
	return append(b, suffixMeta)
}

// decodeStorageKey returns the user key and suffix of a storage key.
func decodeStorageKey(sk []byte) (user []byte, suffix []byte, ok bool) {
	return appendDecoded(make([]byte, 0, len(sk)), sk)
}

// appendDecoded appends the user key of storage key sk to dst and returns
// it with sk's suffix (what follows the terminator).
func appendDecoded(dst, sk []byte) (user []byte, suffix []byte, ok bool) {
	if len(sk) < keyHeadLen+2 || sk[0] != slotPrefix {
		return nil, nil, false
	}
	return unescape(dst, sk, keyHeadLen)
}

// unescape appends the user key escaped in sk from sk[from] on to dst and
// returns it with what follows its terminator.
func unescape(dst, sk []byte, from int) (user []byte, suffix []byte, ok bool) {
	user = dst
	for i := from; i < len(sk); i++ {
		c := sk[i]
		if c != 0 {
			user = append(user, c)
			continue
		}
		if i+1 >= len(sk) {
			return nil, nil, false
		}
		switch sk[i+1] {
		case 0xFF:
			user = append(user, 0)
			i++
		case 0x01:
			return user, sk[i+2:], true
		default:
			return nil, nil, false
		}
	}
	return nil, nil, false
}

// record is a decoded metadata record.
type record struct {
	typ     byte
	flags   byte
	expire  int64
	version uint64 // collections: the incarnation; its elements are keyed by it
	mod     uint64 // log index of the last write to the key (WATCH compares it)
	// strings: the value; collections: the type's state (length, list
	// head/tail; see coll.go). A copy, safe to keep.
	value []byte
}

const recordHeader = 1 + 1 + 8 + 8 + 8

var errCorruptRecord = errors.New("kv: corrupt metadata record")

func (r *record) encode() []byte { return r.appendTo(make([]byte, 0, recordHeader+len(r.value))) }

// appendTo appends the encoded record to b.
func (r *record) appendTo(b []byte) []byte {
	n := len(b)
	b = append(b, make([]byte, recordHeader)...)
	h := b[n:]
	h[0], h[1] = r.typ, r.flags
	binary.BigEndian.PutUint64(h[2:], uint64(r.expire))
	binary.BigEndian.PutUint64(h[10:], r.version)
	binary.BigEndian.PutUint64(h[18:], r.mod)
	return append(b, r.value...)
}

func decodeRecord(v []byte) (record, error) {
	rec, err := decodeHeader(v)
	if err == nil {
		rec.value = append([]byte(nil), v[recordHeader:]...)
	}
	return rec, err
}

// decodeHeader decodes a record without its value.
func decodeHeader(v []byte) (record, error) {
	if len(v) < recordHeader {
		return record{}, errCorruptRecord
	}
	return record{
		typ: v[0], flags: v[1],
		expire:  int64(binary.BigEndian.Uint64(v[2:])),
		version: binary.BigEndian.Uint64(v[10:]),
		mod:     binary.BigEndian.Uint64(v[18:]),
	}, nil
}

func (r *record) expired(nowMs int64) bool { return r.expire > 0 && r.expire <= nowMs }

// writer is what write commands need: reads that see earlier writes of the
// same batch, and writes.
type writer interface {
	pebble.Reader
	Set(key, value []byte, o *pebble.WriteOptions) error
	Delete(key []byte, o *pebble.WriteOptions) error
	DeleteRange(start, end []byte, o *pebble.WriteOptions) error
}

// Record access for commands. The ctx's scratch buffers hold storage keys
// and encoded records: pebble copies both on Set/Delete and does not keep
// the key of a Get, so no command pays an allocation for them.

func (x *ctx) metaKey(k []byte) []byte {
	if x.ranged {
		x.checkKey(k) // rangecheck.go: k must be in the range's slot interval
	}
	x.kbuf = appendMetaKey(x.kbuf[:0], k)
	return x.kbuf
}

// walkRange calls fn at the keys of r in [lo, hi), in order (from the
// last one down if rev), from start: forward, the first key >= start;
// reverse, the last key < start (nil: the first / last key); until fn
// returns false or an error. fn reads the key and value from it, valid
// only during the call, and leaves it where it is.
func walkRange(r pebble.Reader, lo, hi, start []byte, rev bool, fn func(it *pebble.Iterator) (bool, error)) (err error) {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
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
		valid = it.SeekGE(start)
	default:
		valid = it.SeekLT(start)
	}
	for valid {
		if more, err := fn(it); err != nil || !more {
			return err
		}
		if rev {
			valid = it.Prev()
		} else {
			valid = it.Next()
		}
	}
	return it.Error()
}

// getCopy returns a copy of the value of storage key k; ok=false if absent.
func getCopy(r pebble.Reader, k []byte) (v []byte, ok bool, err error) {
	b, c, err := r.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	v = append([]byte{}, b...)
	_ = c.Close()
	return v, true, nil
}

// hasKey reports whether storage key k exists.
func hasKey(r pebble.Reader, k []byte) (bool, error) {
	_, c, err := r.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	_ = c.Close()
	return true, nil
}

// load returns k's live record, value included (a fresh copy, safe to
// return in a reply); ok is false if absent or expired.
func (x *ctx) load(k []byte) (record, bool, error) { return x.get(k, true) }

// loadHeader is load without the value.
func (x *ctx) loadHeader(k []byte) (record, bool, error) { return x.get(k, false) }

// get counts the lookup in x.looked (reads report it: ReadCounted).
func (x *ctx) get(k []byte, withValue bool) (record, bool, error) {
	rec, ok, err := x.raw(k, withValue)
	if err != nil || !ok || rec.expired(x.now) {
		if err == nil {
			x.looked.Misses++
			if x.missOn {
				x.keyMissed(k)
			}
		}
		return record{}, false, err
	}
	x.looked.Hits++
	return rec, true, nil
}

// raw returns k's metadata record (with the value if withValue) even if
// expired; ok=false if absent.
func (x *ctx) raw(k []byte, withValue bool) (record, bool, error) {
	mk := x.metaKey(k)
	if x.shared != nil {
		return x.rawShared(mk, withValue)
	}
	if x.cache != nil {
		if enc, full, ok := x.cache.Get(mk); ok && (full || !withValue) {
			if enc == nil {
				return record{}, false, nil
			}
			return decodeCached(enc, withValue)
		}
	}
	v, c, err := x.r.Get(mk)
	if errors.Is(err, pebble.ErrNotFound) {
		if x.cache != nil {
			x.cache.PutAbsent(mk)
		}
		return record{}, false, nil
	}
	if err != nil {
		return record{}, false, err
	}
	if x.cache != nil {
		x.cache.Put(mk, v, recordHeader)
	}
	var rec record
	if withValue {
		rec, err = decodeRecord(v)
	} else {
		rec, err = decodeHeader(v)
	}
	_ = c.Close()
	return rec, err == nil, err
}

// rawShared is raw through the read cache (reccache.Shared), filled on a miss.
func (x *ctx) rawShared(mk []byte, withValue bool) (record, bool, error) {
	enc, ok, gen := x.shared.Get(mk)
	if ok && enc == nil {
		return record{}, false, nil
	} else if ok {
		return decodeCached(enc, withValue)
	}
	v, c, err := x.r.Get(mk)
	if errors.Is(err, pebble.ErrNotFound) {
		x.shared.Fill(mk, nil, gen)
		return record{}, false, nil
	} else if err != nil {
		return record{}, false, err
	}
	defer c.Close()
	x.shared.Fill(mk, v, gen)
	return decodeCached(v, withValue)
}

// decodeCached decodes a record from the record cache (reccache.Cache).
func decodeCached(enc []byte, withValue bool) (record, bool, error) {
	if withValue {
		rec, err := decodeRecord(enc)
		return rec, err == nil, err
	}
	rec, err := decodeHeader(enc)
	return rec, err == nil, err
}

// rawHeader returns k's metadata header even if expired; ok=false if absent.
func (x *ctx) rawHeader(k []byte) (record, bool, error) { return x.raw(k, false) }

// store writes k's metadata record, stamping it with the entry's index. If
// it replaces a different incarnation of a collection (another version),
// that incarnation's elements are dropped.
func (x *ctx) store(k []byte, rec *record) error {
	old, had, err := x.rawHeader(k)
	if err != nil {
		return err
	}
	return x.replace(k, old, had, rec)
}

// replace is store for a caller that has just read k's raw header (old,
// had: as rawHeader returned them), so that k is looked up once per write.
func (x *ctx) replace(k []byte, old record, had bool, rec *record) error {
	if had && isCollection(old.typ) && (old.version != rec.version || !isCollection(rec.typ)) {
		if err := x.dropElements(k, old.version); err != nil {
			return err
		}
	}
	var oldExpire int64
	if had {
		oldExpire = old.expire
	}
	if !had || old.expired(x.now) { // as Redis's lookup and dbAdd: "expired", then "new"
		if had {
			x.event(notify.Expired, "expired", k)
		}
		x.event(notify.New, "new", k)
	}
	if err := x.indexTTL(k, oldExpire, rec.expire); err != nil {
		return err
	}
	return x.storeOver(k, rec)
}

// storeOver is store for a caller that knows k holds no other collection
// incarnation (it just loaded k's record, or removed it).
func (x *ctx) storeOver(k []byte, rec *record) error {
	rec.mod = x.index
	x.vbuf = rec.appendTo(x.vbuf[:0])
	mk := x.metaKey(k)
	if err := x.w.Set(mk, x.vbuf, nil); err != nil {
		return err
	}
	if x.cache != nil {
		x.cache.Wrote(mk, x.vbuf, recordHeader)
	}
	x.touched(k)
	return nil
}

// remove deletes k, a collection's elements included (one range deletion,
// whatever the size: Pebble reclaims the space in the background).
func (x *ctx) remove(k []byte) error {
	old, had, err := x.rawHeader(k)
	if err != nil || !had {
		return err
	}
	if isCollection(old.typ) {
		if err := x.dropElements(k, old.version); err != nil {
			return err
		}
	}
	if err := x.indexTTL(k, old.expire, 0); err != nil {
		return err
	}
	mk := x.metaKey(k)
	if err := x.w.Delete(mk, nil); err != nil {
		return err
	}
	if x.cache != nil {
		x.cache.Deleted(mk)
	}
	if err := x.setTomb(k); err != nil {
		return err
	}
	x.touched(k)
	return nil
}

// setIndexKey stores the entry's log index under hidden key hk.
func (x *ctx) setIndexKey(hk []byte) error {
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], x.index)
	return x.w.Set(hk, buf[:], nil)
}

// indexKey reads a log index stored by setIndexKey (0 if none).
func (x *ctx) indexKey(hk []byte) (uint64, error) {
	v, c, err := x.r.Get(hk)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer c.Close()
	if len(v) != 8 {
		return 0, nil
	}
	return binary.BigEndian.Uint64(v), nil
}

func (x *ctx) touched(k []byte) { x.fx.wrote(k) }

func isCollection(t byte) bool { return t >= typeHash && t <= typeStream }

// Element keys: 0x11 <slot:2> <escaped key> 0x01 <version:8 BE> <element>.

func appendElemPrefix(b, k []byte, version uint64) []byte {
	b = appendKeyHead(b, k)
	b = appendEscaped(b, k)
	b = append(b, suffixElem)
	return binary.BigEndian.AppendUint64(b, version)
}

// elemSpan returns the storage span of all elements of k's incarnation version.
func elemSpan(k []byte, version uint64) (start, end []byte) {
	start = appendElemPrefix(make([]byte, 0, len(k)+18), k, version)
	end = appendElemPrefix(make([]byte, 0, len(k)+18), k, version+1)
	if version == ^uint64(0) {
		end = append(appendEscaped(appendKeyHead(nil, k), k), suffixElem+1)
	}
	return start, end
}

func (x *ctx) dropElements(k []byte, version uint64) error {
	start, end := elemSpan(k, version)
	return x.w.DeleteRange(start, end, nil)
}

// newVersion hands out the next collection incarnation number. The counter
// is replicated state of the range (range-local 'r' 'v'), so every replica
// of the range hands out the same numbers; versions only have to grow per
// key, and a key never leaves its slot's range but by a split, which
// copies the counter.
func (x *ctx) newVersion() (uint64, error) {
	var n uint64
	vk := x.rangeKey(rangeVersion)
	v, c, err := x.r.Get(vk)
	switch {
	case err == nil:
		if len(v) == 8 {
			n = binary.BigEndian.Uint64(v)
		}
		_ = c.Close()
	case !errors.Is(err, pebble.ErrNotFound):
		return 0, err
	}
	n++
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], n)
	return n, x.w.Set(vk, buf[:], nil)
}

// iterKeys calls fn for every live key (in storage order) after storage
// key `after` (nil: from the start), until fn returns false. fn's user and
// sk (the key's metadata storage key) are only valid during the call: copy
// what you keep. Element keys of collections are skipped with one seek per
// user key.
func iterKeys(r pebble.Reader, after []byte, nowMs int64, fn func(user []byte, sk []byte, rec *record) bool) error {
	return iterKeysImpl(r, after, true, nowMs, fn)
}

// iterKeysFrom is iterKeys starting at storage key from, inclusive.
func iterKeysFrom(r pebble.Reader, from []byte, nowMs int64, fn func(user []byte, sk []byte, rec *record) bool) error {
	return iterKeysImpl(r, from, false, nowMs, fn)
}

func iterKeysImpl(r pebble.Reader, from []byte, exclusive bool, nowMs int64, fn func(user []byte, sk []byte, rec *record) bool) (err error) {
	// Hidden keys are not keys: the iterator starts above the global ones
	// (below firstUserKey) and seeks past each slot's (skipHidden).
	start, end := userKeySpan()
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: start, UpperBound: end})
	if err != nil {
		return err
	}
	defer func() {
		if cerr := it.Close(); err == nil {
			err = cerr
		}
	}()
	valid := it.First()
	if from != nil {
		valid = it.SeekGE(from)
		if exclusive && valid && string(it.Key()) == string(from) {
			valid = it.Next()
		}
	}
	var ubuf, seek []byte
	for valid {
		sk := it.Key()
		if isSlotHidden(sk) {
			// The slot's hidden keys (tombstones, wait queues): one seek
			// to the slot's first user key.
			seek = appendSlotUserStart(seek[:0], sk)
			valid = it.SeekGE(seek)
			continue
		}
		user, suffix, ok := appendDecoded(ubuf[:0], sk)
		if !ok {
			valid = it.Next()
			continue
		}
		ubuf = user
		if len(suffix) != 1 || suffix[0] != suffixMeta {
			// An element key: skip the rest of this user key's span, which
			// ends where the terminator 0x00 0x01 would be 0x00 0x02.
			n := len(sk) - len(suffix)
			seek = append(append(seek[:0], sk[:n-1]...), 0x02)
			valid = it.SeekGE(seek)
			continue
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		rec, err := decodeHeader(v)
		if err != nil {
			return err
		}
		if !rec.expired(nowMs) && !fn(user, sk, &rec) {
			return nil
		}
		valid = it.Next()
	}
	return it.Error()
}
