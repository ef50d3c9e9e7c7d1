package kv

import (
	"encoding/binary"
	"errors"

	"github.com/cockroachdb/pebble/v2"
)

const (
	userPrefix = 0x10
	suffixMeta = 0x00
)

// Type tags of metadata records.
const (
	typeString byte = 1
	typeHash   byte = 2
	typeList   byte = 3
	typeSet    byte = 4
	typeZSet   byte = 5
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
	}
	return "none"
}

// UserSpan returns the storage span [start, end) holding all user data.
func UserSpan() (start, end []byte) { return []byte{userPrefix}, []byte{userPrefix + 1} }

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
func metaKey(k []byte) []byte {
	b := make([]byte, 0, len(k)+4)
	b = append(b, userPrefix)
	b = appendEscaped(b, k)
	return append(b, suffixMeta)
}

// decodeStorageKey returns the user key and suffix of a storage key.
func decodeStorageKey(sk []byte) (user []byte, suffix []byte, ok bool) {
	if len(sk) < 3 || sk[0] != userPrefix {
		return nil, nil, false
	}
	user = make([]byte, 0, len(sk))
	for i := 1; i < len(sk); i++ {
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
	version uint64
	value   []byte // strings only; a copy
}

const recordHeader = 1 + 1 + 8 + 8

var errCorruptRecord = errors.New("kv: corrupt metadata record")

func (r *record) encode() []byte {
	b := make([]byte, recordHeader, recordHeader+len(r.value))
	b[0], b[1] = r.typ, r.flags
	binary.BigEndian.PutUint64(b[2:], uint64(r.expire))
	binary.BigEndian.PutUint64(b[10:], r.version)
	return append(b, r.value...)
}

func decodeRecord(v []byte) (record, error) {
	if len(v) < recordHeader {
		return record{}, errCorruptRecord
	}
	return record{
		typ: v[0], flags: v[1],
		expire:  int64(binary.BigEndian.Uint64(v[2:])),
		version: binary.BigEndian.Uint64(v[10:]),
		value:   append([]byte(nil), v[recordHeader:]...),
	}, nil
}

func (r *record) expired(nowMs int64) bool { return r.expire > 0 && r.expire <= nowMs }

// load returns k's live record; ok is false if absent or expired.
func load(r pebble.Reader, k []byte, nowMs int64) (rec record, ok bool, err error) {
	v, c, err := r.Get(metaKey(k))
	if errors.Is(err, pebble.ErrNotFound) {
		return record{}, false, nil
	}
	if err != nil {
		return record{}, false, err
	}
	rec, err = decodeRecord(v)
	_ = c.Close()
	if err != nil {
		return record{}, false, err
	}
	if rec.expired(nowMs) {
		return record{}, false, nil
	}
	return rec, true, nil
}

// writer is what write commands need: reads that see earlier writes of the
// same batch, and writes.
type writer interface {
	pebble.Reader
	Set(key, value []byte, o *pebble.WriteOptions) error
	Delete(key []byte, o *pebble.WriteOptions) error
	DeleteRange(start, end []byte, o *pebble.WriteOptions) error
}

func store(w writer, k []byte, rec *record) error { return w.Set(metaKey(k), rec.encode(), nil) }

func remove(w writer, k []byte) error { return w.Delete(metaKey(k), nil) }

// iterKeys calls fn for every live key (in storage order) after storage
// key `after` (nil: from the start), until fn returns false.
func iterKeys(r pebble.Reader, after []byte, nowMs int64, fn func(user []byte, sk []byte, rec *record) bool) error {
	return iterKeysImpl(r, after, true, nowMs, fn)
}

// iterKeysFrom is iterKeys starting at storage key from, inclusive.
func iterKeysFrom(r pebble.Reader, from []byte, nowMs int64, fn func(user []byte, sk []byte, rec *record) bool) error {
	return iterKeysImpl(r, from, false, nowMs, fn)
}

func iterKeysImpl(r pebble.Reader, from []byte, exclusive bool, nowMs int64, fn func(user []byte, sk []byte, rec *record) bool) (err error) {
	start, end := UserSpan()
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
	for ; valid; valid = it.Next() {
		user, suffix, ok := decodeStorageKey(it.Key())
		if !ok || len(suffix) != 1 || suffix[0] != suffixMeta {
			continue
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		rec, err := decodeRecord(v)
		if err != nil {
			return err
		}
		if rec.expired(nowMs) {
			continue
		}
		if !fn(user, append([]byte(nil), it.Key()...), &rec) {
			return nil
		}
	}
	return it.Error()
}
