package kv

import (
	"bytes"
	"encoding/binary"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/slot"
	"github.com/kvorum/kvorum/internal/storage"
)

// Homes of the hidden keys (docs/ranges.md §2.3). Once the keyspace has
// many ranges, each range's replicas apply its log on their own, so a
// hidden key written by commands of two ranges would be written in
// different orders on different nodes. So:
//
//   - per range, replicated range-local: 0x02 <range:8> 'r' <name>
//     (storage.ReplicatedRangeKey): the collection version counter 'v',
//     the last FLUSHALL's index 'f', the tombstone floor 'D';
//   - per slot, inside the slot's span: 0x11 <slot:2> 0x00 0x00 <tag> …:
//     WATCH tombstones 'd' and registrations 'r' (tomb.go), the expiry
//     index 'e' (expiry.go), blocked-pop queues 'w' (blockq.go). 0x00
//     0x00 never starts an escaped user key
//     (a 0x00 byte of a key is escaped as 0x00 0xFF, the terminator is
//     0x00 0x01), so these sort before every user key of the slot, and an
//     iterator over user keys skips them with one seek per slot that has
//     any (skipHidden);
//   - global, in range 1's 0x10 0x00 0x00 space: everything else (leases,
//     locks, config, ACL, scripts, functions, node liveness).

// Names of the replicated range-local keys.
const (
	rangeVersion   = 'v' // uint64 BE: the last collection version handed out
	rangeFlush     = 'f' // uint64 BE: the log index of the last FLUSHALL
	rangeTombFloor = 'D' // the tombstone floor (tomb.go)
)

// Tags of the per-slot hidden keys.
const (
	slotTomb = 'd'
	slotReg  = 'r'
	slotWait = 'w'
	// slotTTL ('e', expiry.go) sorts between them.
)

// slotHiddenLen is the length of a per-slot hidden key's head:
// 0x11 <slot:2> 0x00 0x00 <tag>.
const slotHiddenLen = keyHeadLen + 3

// appendSlotHidden appends the head of slot s's hidden keys of tag.
func appendSlotHidden(b []byte, s uint16, tag byte) []byte {
	return append(b, slotPrefix, byte(s>>8), byte(s), 0x00, 0x00, tag)
}

// isSlotHidden reports whether storage key k (in [0x11, 0x12)) is a
// per-slot hidden key.
func isSlotHidden(k []byte) bool {
	return len(k) >= keyHeadLen+2 && k[keyHeadLen] == 0 && k[keyHeadLen+1] == 0
}

// slotUserStart is the first user key of the slot of storage key k
// (0x11 <slot> 0x00 0x01: the empty key's records), above its hidden keys.
func appendSlotUserStart(b, k []byte) []byte {
	return append(append(b, k[:keyHeadLen]...), 0x00, 0x01)
}

// rangeID is the range applying the entry (1 without a descriptor).
func (x *ctx) rangeID() storage.RangeID {
	if x.desc == nil || x.desc.RangeID == 0 {
		return 1
	}
	return x.desc.RangeID
}

// rangeKey returns the entry's range's replicated range-local key name,
// in x's scratch buffer: valid until the next call (Pebble copies the key
// of a Set and keeps none of a Get's).
func (x *ctx) rangeKey(name byte) []byte {
	b := storage.AppendReplicatedRangeKey(x.rbuf[:0], x.rangeID(), nil)
	return append(b, name)
}

// slotBounds is the slot interval of the entry's range.
func (x *ctx) slotBounds() (lo, hi uint16) {
	if !x.ranged {
		return 0, slot.Count
	}
	return x.desc.StartSlot, x.desc.EndSlot
}

// hiddenSlots is hiddenSlots over the entry's range's slots.
func (x *ctx) hiddenSlots() ([]uint16, error) {
	lo, hi := x.slotBounds()
	return hiddenSlots(x.r, lo, hi)
}

// hiddenSlots returns the slots in [lo, hi) that hold per-slot hidden keys
// other than expiry index entries (which FLUSHALL deletes with the user
// keys and TOMBGC does not look at), in order, with one seek per slot that
// holds any key, and one more per slot with index entries.
func hiddenSlots(r pebble.Reader, lo, hi uint16) (slots []uint16, err error) {
	start, end := SlotSpan(lo, hi)
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: start, UpperBound: end})
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := it.Close(); err == nil {
			err = cerr
		}
	}()
	seek := make([]byte, 0, 5)
	for s := uint32(lo); s < uint32(hi); {
		seek = append(seek[:0], slotPrefix, byte(s>>8), byte(s), 0, 0)
		if !it.SeekGE(seek) {
			break
		}
		k := it.Key()
		if len(k) < keyHeadLen {
			break
		}
		ks := binary.BigEndian.Uint16(k[1:])
		if isSlotHidden(k) && len(k) > keyHeadLen+2 && k[keyHeadLen+2] == slotTTL {
			// Expiry index entries only, so far: past them.
			seek = appendSlotHidden(seek[:0], ks, slotTTL+1)
			if !it.SeekGE(seek) {
				break
			}
			if k = it.Key(); len(k) < keyHeadLen {
				break
			}
			if next := binary.BigEndian.Uint16(k[1:]); next != ks {
				// No user key after them (not written so): look at
				// the next slot from its start.
				s = uint32(next)
				continue
			}
		}
		if isSlotHidden(k) {
			slots = append(slots, ks)
		}
		s = uint32(ks) + 1
	}
	return slots, it.Error()
}

// legacyHidden are the tags of format 1's hidden keys that moved (or, 't'
// and 'E', went away) in format 2.
var legacyHidden = []byte{rangeVersion, rangeFlush, rangeTombFloor, slotTomb, slotReg, slotWait, slotTTL, legacyTTLBuild, 't'}

// appendV2Hidden appends the format 2 key of format 1 hidden key k
// (0x10 0x00 0x00 <tag> …) of range id. drop: the key is not kept (the
// legacy 't' buckets, the expiry index's build state 'E'); ok=false: it
// does not decode.
func appendV2Hidden(dst, k []byte, id storage.RangeID) (out []byte, drop, ok bool) {
	if len(k) < 4 {
		return append(dst, k...), false, true
	}
	tag, rest := k[3], k[4:]
	var user []byte
	switch tag {
	case rangeVersion, rangeFlush, rangeTombFloor:
		if len(rest) != 0 {
			return append(dst, k...), false, true
		}
		return storage.AppendReplicatedRangeKey(dst, id, []byte{tag}), false, true
	case rangeConfig, rangeFunctions: // a range's config or function copy (configcopy.go, fncopy.go), as snapshots carry it
		return storage.AppendReplicatedRangeKey(dst, id, k[3:]), false, true
	case 't', legacyTTLBuild:
		return nil, true, true
	case slotTTL: // <deadline:8> <key>
		if len(rest) < 8 {
			return nil, false, false
		}
		user = rest[8:]
	case slotTomb, slotReg: // <epoch:4> <key>
		if len(rest) < 4 {
			return nil, false, false
		}
		user = rest[4:]
	case slotWait: // <len:4> <key> [<group>] <seq:8>
		if len(rest) < 4 {
			return nil, false, false
		}
		n := binary.BigEndian.Uint32(rest)
		if uint64(len(rest)) < 4+uint64(n) {
			return nil, false, false
		}
		user = rest[4 : 4+n]
	default:
		return append(dst, k...), false, true
	}
	return append(appendSlotHidden(dst, slot.Of(user), tag), rest...), false, true
}

// appendV1Hidden appends the format 1 key of replicated range-local key k
// (0x10 0x00 0x00 <name>); ok=false for any other key.
func appendV1Hidden(dst, k []byte) ([]byte, bool) {
	_, name, ok := storage.ParseReplicatedRangeKey(k)
	if !ok {
		return dst, false
	}
	return append(append(dst, hiddenPrefix...), name...), true
}

// spanHasLegacyHidden reports whether r holds a format 1 hidden key that
// format 2 keeps elsewhere.
func spanHasLegacyHidden(r pebble.Reader) (bool, error) {
	for _, tag := range legacyHidden {
		p := append(append([]byte{}, hiddenPrefix...), tag)
		if has, err := spanHasKeys(r, p, prefixEnd(p)); err != nil || has {
			return has, err
		}
	}
	return false, nil
}

// walkReplicatedRangeKeys calls fn for every replicated range-local key
// of every range in r, in order, with one seek per range.
func walkReplicatedRangeKeys(r pebble.Reader, fn func(k, v []byte)) (err error) {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: []byte{0x02}, UpperBound: []byte{0x03}})
	if err != nil {
		return err
	}
	defer func() {
		if cerr := it.Close(); err == nil {
			err = cerr
		}
	}()
	valid := it.First()
	for valid {
		k := it.Key()
		if len(k) < 10 {
			valid = it.Next()
			continue
		}
		id := storage.RangeID(binary.BigEndian.Uint64(k[1:9]))
		rs, re := storage.ReplicatedRangeSpan(id)
		switch {
		case bytes.Compare(k, rs) < 0:
			valid = it.SeekGE(rs)
		case bytes.Compare(k, re) < 0:
			v, err := it.ValueAndErr()
			if err != nil {
				return err
			}
			fn(k, v)
			valid = it.Next()
		default:
			if id == ^storage.RangeID(0) {
				return it.Error()
			}
			next, _ := storage.RangeLocalSpan(id + 1)
			valid = it.SeekGE(next)
		}
	}
	return it.Error()
}

// flushUserKeys deletes every user key of the entry's range's slots and
// their expiry index entries, and keeps their other hidden keys: one range
// deletion from each slot that has such keys to the next (the slots
// between, without any or with index entries only, go in one), and one of
// the index entries of each slot that has such keys.
// It reads x.r, which sees the batch's earlier writes (tombFlushed's
// tombstones, in slots that already have registrations).
func (x *ctx) flushUserKeys() error {
	lo, hi := x.slotBounds()
	slots, err := hiddenSlots(x.r, lo, hi)
	if err != nil {
		return err
	}
	from, end := SlotSpan(lo, hi)
	for _, s := range slots {
		h, _ := SlotSpan(s, s+1)
		if to := append(h, 0x00, 0x00); bytes.Compare(from, to) < 0 {
			if err := x.w.DeleteRange(from, to, nil); err != nil {
				return err
			}
		}
		// The slot's expiry index entries go with its keys.
		if err := x.w.DeleteRange(appendSlotHidden(nil, s, slotTTL), appendSlotHidden(nil, s, slotTTL+1), nil); err != nil {
			return err
		}
		from = append(h[:keyHeadLen:keyHeadLen], 0x00, 0x01)
	}
	return x.w.DeleteRange(from, end, nil)
}
