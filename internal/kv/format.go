package kv

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/slot"
	"github.com/kvorum/kvorum/internal/storage"
)

// Storage formats (docs/ranges.md §2.2). Format 1 stored user key k under
// 0x10 <escaped k> <suffix>; format 2 stores it under 0x11 <slot:2 BE>
// <escaped k> <suffix>, so that each hash slot's keys are one span. The
// hidden keys 0x10 0x00 0x00 … are the same in both. The store records its
// format under storage's 0x01 'i' 'f' (absent: 1).

// StoreFormat is the storage format this package reads and writes.
const StoreFormat = 2

// v1UserSpan is the span of format 1's user keys: above the hidden keys,
// below format 2's.
var v1UserStart, v1UserEnd = []byte{userPrefix, 0x00, 0x01}, []byte{slotPrefix}

func isV1User(k []byte) bool {
	return bytes.Compare(k, v1UserStart) >= 0 && bytes.Compare(k, v1UserEnd) < 0
}

// V2Key returns the format 2 storage key of format 1 storage key k (of
// range 1, the one range of a format 1 store): a user key (metadata
// record or collection element) gains its hash slot; a hidden key that
// format 2 keeps per slot (WATCH tombstones and registrations, wait
// queues, expiry index entries) goes to its key's slot, one it keeps per range (version
// counter, FLUSHALL index, tombstone floor) to range 1's replicated
// range-local span (hidden.go); any other key is returned as is. It
// returns nil for a key that does not decode (corrupt) and for one format
// 2 drops (the legacy 't' buckets, the expiry index build state 'E').
// Pure: every replica converts the same bytes the same way.
func V2Key(k []byte) []byte { return appendV2Key(nil, k) }

func appendV2Key(dst, k []byte) []byte {
	nk, _ := appendV2KeyIn(dst, k, 1)
	return nk
}

// appendV2KeyIn is appendV2Key for a key of range id's data: format 1's
// hidden keys that format 2 keeps per range or per slot move there
// (hidden.go). It returns nil for a key that does not decode, and nil with
// drop set for a key format 2 does not keep.
func appendV2KeyIn(dst, k []byte, id storage.RangeID) (nk []byte, drop bool) {
	if bytes.HasPrefix(k, hiddenPrefix) {
		nk, drop, ok := appendV2Hidden(dst, k, id)
		if !ok {
			return nil, false
		}
		return nk, drop
	}
	if !isV1User(k) {
		return append(dst, k...), false
	}
	n := len(dst)
	dst = append(dst, slotPrefix, 0, 0)
	user, _, ok := unescape(dst[len(dst):], k, 1)
	if !ok {
		return nil, false
	}
	s := slot.Of(user)
	dst[n+1], dst[n+2] = byte(s>>8), byte(s)
	return append(dst[:n+keyHeadLen], k[1:]...), false
}

// V1Key returns the format 1 storage key of format 2 storage key k (the
// inverse of V2Key): a user key loses its slot; any other key is returned
// as is. Pure.
func V1Key(k []byte) []byte { return appendV1Key(nil, k) }

func appendV1Key(dst, k []byte) []byte {
	if nk, ok := appendV1Hidden(dst, k); ok {
		return nk
	}
	if len(k) < keyHeadLen || k[0] != slotPrefix {
		return append(dst, k...)
	}
	// A user key, or a per-slot hidden key 0x11 <slot> 0x00 0x00 <tag> …,
	// which was 0x10 0x00 0x00 <tag> … in format 1.
	return append(append(dst, userPrefix), k[keyHeadLen:]...)
}

func init() {
	// Snapshot streams and backups carry format 1 keys (KVSNAP1) so that
	// nodes of the previous release read them; see storage.LegacyKeys and
	// docs/architecture.md (rolling upgrade).
	storage.SetLegacyKeys(storage.LegacyKeys{
		ToV1: appendV1Key,
		FromV1: func(dst, k []byte, id storage.RangeID) ([]byte, error) {
			nk, drop := appendV2KeyIn(dst, k, id)
			if nk != nil || drop {
				return nk, nil
			}
			return nil, fmt.Errorf("%w: undecodable format 1 key %q", storage.ErrCorrupt, k)
		},
	})
}

// Migration knobs, small in tests.
var (
	migrateBatchBytes    = 4 << 20
	migrateProgressEvery = 5 * time.Second
	// migrateStep, if set, is called at each step of MigrateV2 (tests
	// inject crashes there); an error stops the migration with it.
	migrateStep func(step string) error
)

func migrateHook(step string) error {
	if migrateStep == nil {
		return nil
	}
	return migrateStep(step)
}

// MigrateV2 converts a format 1 store to format 2 at open, before anything
// reads it; it does nothing to a format 2 store, and only records the
// format in a store without format 1 user keys (a new one). Crash-safe:
//
//  1. Without the format marker, keys in [0x11, 0x12) can only be the
//     output of an interrupted earlier run (format 1 wrote nothing there):
//     they are deleted.
//     So are range 1's replicated range-local keys (0x02 <1> 'r'), which
//     format 1 did not have either.
//  2. Every format 1 user pair, and every hidden pair that format 2 keeps
//     per slot or per range (hidden.go) but the expiry index, is written
//     under its V2Key, with an index entry per record with a deadline, in
//     batches of bounded size (not synced: the last batch's sync covers
//     them, one write-ahead log).
//  3. One synced batch deletes [0x10 0x00 0x01, 0x11) (the format 1 user
//     keys) and the moved hidden keys (and the legacy 't' buckets), and
//     sets the marker to 2.
//
// A crash before 3 leaves the format 1 keys and no marker: the next open
// starts over at 1. After 3, the store is format 2. The expiry index is
// not moved but written whole from the metadata records in step 2 (per
// slot, expiry.go), whether format 1's global index was built, being
// built (KVORUM.TTLINDEX) or absent; step 3 deletes the global index and
// its build state 'E', which format 2 does not have.
func MigrateV2(db *pebble.DB, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f, err := storage.LoadStoreFormat(db)
	if err != nil || f >= StoreFormat {
		return err
	}
	if f != 1 {
		return fmt.Errorf("kv: unknown store format %d", f)
	}
	has, err := spanHasKeys(db, v1UserStart, v1UserEnd)
	if err != nil {
		return err
	}
	if !has {
		if has, err = spanHasLegacyHidden(db); err != nil {
			return err
		}
	}
	if !has {
		// A new store (or an empty one): nothing to convert. Keys in
		// [0x11, 0x12) without format 1 keys beside them cannot be an
		// interrupted migration's (step 3 removes both at once).
		b := db.NewBatch()
		defer b.Close()
		if err := storage.SetStoreFormat(b, StoreFormat); err != nil {
			return err
		}
		return storage.Commit(b, pebble.Sync)
	}
	started := time.Now()
	log.Info("converting the store to storage format 2 (user keys by hash slot); this runs once")
	start, end := userKeySpan()
	if err := db.DeleteRange(start, end, pebble.NoSync); err != nil {
		return err
	}
	// Format 1 wrote no replicated range-local keys either.
	rs, re := storage.ReplicatedRangeSpan(1)
	if err := db.DeleteRange(rs, re, pebble.NoSync); err != nil {
		return err
	}
	if err := migrateHook("cleared"); err != nil {
		return err
	}
	b := db.NewBatch()
	defer func() { b.Close() }()
	// The hidden keys that moved: few (the WATCH tombstones of the last
	// two epochs, the wait queues, three counters), one batch.
	err = walkRange(db, hiddenPrefix, v1UserStart, nil, false, func(it *pebble.Iterator) (bool, error) {
		k := it.Key()
		if len(k) < 4 || bytes.IndexByte(legacyHidden, k[3]) < 0 || k[3] == slotTTL {
			// The expiry index is written again from the records, below.
			return true, nil
		}
		nk, drop := appendV2KeyIn(nil, k, 1)
		if drop {
			return true, nil
		}
		if nk == nil {
			return false, fmt.Errorf("%w: undecodable format 1 hidden key %q", storage.ErrCorrupt, k)
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return false, err
		}
		return true, b.Set(nk, v, nil)
	})
	if err != nil {
		return err
	}
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: v1UserStart, UpperBound: v1UserEnd})
	if err != nil {
		return err
	}
	defer it.Close()
	var pairs, bytesDone int64
	lastLog := started
	var kbuf, ubuf []byte
	for valid := it.First(); valid; valid = it.Next() {
		k := it.Key()
		v, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		if kbuf = appendV2Key(kbuf[:0], k); kbuf == nil {
			return fmt.Errorf("%w: undecodable format 1 user key %q", storage.ErrCorrupt, k)
		}
		if err := b.Set(kbuf, v, nil); err != nil {
			return err
		}
		if user, suffix, ok := unescape(ubuf[:0], k, 1); ok && len(suffix) == 1 && suffix[0] == suffixMeta {
			ubuf = user
			if rec, err := decodeHeader(v); err == nil && rec.expire > 0 {
				if err := b.Set(appendTTLKey(nil, rec.expire, user), nil, nil); err != nil {
					return err
				}
			}
		}
		pairs++
		bytesDone += int64(len(k) + len(v))
		if b.Len() < migrateBatchBytes {
			continue
		}
		if err := storage.Commit(b, pebble.NoSync); err != nil {
			return err
		}
		b.Close()
		b = db.NewBatch()
		if err := migrateHook("batch"); err != nil {
			return err
		}
		if time.Since(lastLog) >= migrateProgressEvery {
			lastLog = time.Now()
			log.Info("converting the store to storage format 2", "pairs", pairs, "bytes", bytesDone, "elapsed", time.Since(started).Round(time.Millisecond))
		}
	}
	if err := it.Error(); err != nil {
		return err
	}
	if err := b.DeleteRange(v1UserStart, v1UserEnd, nil); err != nil {
		return err
	}
	for _, tag := range legacyHidden {
		p := append(append([]byte{}, hiddenPrefix...), tag)
		if err := b.DeleteRange(p, prefixEnd(p), nil); err != nil {
			return err
		}
	}
	if err := storage.SetStoreFormat(b, StoreFormat); err != nil {
		return err
	}
	if err := migrateHook("final"); err != nil {
		return err
	}
	if err := storage.Commit(b, pebble.Sync); err != nil {
		return err
	}
	log.Info("converted the store to storage format 2", "pairs", pairs, "bytes", bytesDone, "elapsed", time.Since(started).Round(time.Millisecond))
	return migrateHook("done")
}

// spanHasKeys reports whether r holds a key in [start, end).
func spanHasKeys(r pebble.Reader, start, end []byte) (bool, error) {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: start, UpperBound: end})
	if err != nil {
		return false, err
	}
	has := it.First()
	return has, errors.Join(it.Error(), it.Close())
}
