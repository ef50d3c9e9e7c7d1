package kv

import (
	"encoding/binary"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/slot"
	"github.com/kvorum/kvorum/internal/storage"
)

// Deletion tombstones and watch registrations, for WATCH on absent keys
// (watchUnchanged in multi.go).
//
// Every deletion of key k stores the entry's index under k in the
// tombstone epoch of the entry's clock, so a transaction watching k while
// it was absent aborts when k was created and deleted again before EXEC,
// and only then (a deletion of another key does not touch k's
// tombstone).
//
// FLUSHALL deletes every key with one range deletion and leaves no
// tombstone per key. So that it aborts only the transactions watching a
// key it actually deleted (as Redis's touchAllWatchedKeysInDb does), a
// WATCH of an absent key registers it first (KVORUM.WATCHREG, one Raft
// entry, at most once per key and epoch): FLUSHALL writes a tombstone for
// each registered key it deletes. A registration records the index of the
// last FLUSHALL when it was made, so EXEC knows whether it covered every
// FLUSHALL since its WATCH.
//
// Epochs are tombEpochMs long; the leader proposes KVORUM.TOMBGC when its
// clock enters a new epoch, which drops every epoch of tombstones and
// registrations but the last two with one range deletion each, so both
// live one to two epochs. A WATCH of an absent key that spans a collection
// aborts, spuriously, as a conservative answer (the collection may have
// dropped what would have shown a change).
//
// Per slot (hidden.go), in the slot of the key, so they move with it:
//
//	0x11 <slot:2> 0x00 0x00 'd' <epoch:4> <key>   index (8): the key's last deletion
//	0x11 <slot:2> 0x00 0x00 'r' <epoch:4> <key>   index (8): the last FLUSHALL when the key was registered
//
// and per range (replicated range-local 0x02 <range> 'r' 'D'): the first
// epoch kept (4), the index of the collection (8). Format 1 kept them at
// 0x10 0x00 0x00 'd'/'r'/'D', and before that one index per hash bucket
// of keys ('t', dropped by MigrateV2).

// tombEpochMs is the length of a tombstone epoch; tombEpochsRead bounds
// the epochs a lookup reads from the floor on (two are kept; the rest is
// slack for a collection that comes late).
const (
	tombEpochMs    = 10 * 60 * 1000
	tombEpochsRead = 8
)

func tombEpoch(nowMs int64) uint32 { return uint32(max(nowMs, 0) / tombEpochMs) }

func tombKey(epoch uint32, k []byte) []byte { return epochKey(slotTomb, epoch, k) }

func regKey(epoch uint32, k []byte) []byte { return epochKey(slotReg, epoch, k) }

func epochKey(tag byte, epoch uint32, k []byte) []byte {
	b := appendSlotHidden(make([]byte, 0, slotHiddenLen+4+len(k)), slot.Of(k), tag)
	b = binary.BigEndian.AppendUint32(b, epoch)
	return append(b, k...)
}

// slotEpochKey is the first key of slot s's tag keys of epoch.
func slotEpochKey(s uint16, tag byte, epoch uint32) []byte {
	return binary.BigEndian.AppendUint32(appendSlotHidden(make([]byte, 0, slotHiddenLen+4), s, tag), epoch)
}

// setTomb records the deletion of k by this entry.
func (x *ctx) setTomb(k []byte) error {
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], x.index)
	return x.w.Set(tombKey(tombEpoch(x.now), k), v[:], nil)
}

// tombFloor is the first epoch whose tombstones are kept, and the log
// index of the collection that set it (0 before collections recorded it).
func (x *ctx) tombFloor() (uint32, uint64, error) {
	v, ok, err := getCopy(x.r, x.rangeKey(rangeTombFloor))
	if err != nil || !ok || len(v) < 4 {
		return 0, 0, err
	}
	var at uint64
	if len(v) >= 12 {
		at = binary.BigEndian.Uint64(v[4:])
	}
	return binary.BigEndian.Uint32(v), at, nil
}

// epochsRead is the first epoch a lookup of tombstones or registrations
// reads.
func (x *ctx) epochsRead() (uint32, error) {
	floor, _, err := x.tombFloor()
	if err == nil && floor == 0 { // no collection yet: start from the epoch before now
		floor = max(tombEpoch(x.now), 1) - 1
	}
	return floor, err
}

// tomb returns the index of k's last deletion still recorded (0: none).
func (x *ctx) tomb(k []byte) (uint64, error) {
	return x.lastInEpochs(k, tombKey, func(a, b uint64) uint64 { return max(a, b) })
}

// registration returns the smallest FLUSHALL index recorded by a
// registration of k still kept, and whether there is one.
func (x *ctx) registration(k []byte) (uint64, bool, error) {
	found := false
	v, err := x.lastInEpochs(k, regKey, func(a, b uint64) uint64 {
		if !found {
			found = true
			return b
		}
		return min(a, b)
	})
	return v, found, err
}

// lastInEpochs folds the 8-byte values stored for k in the epochs kept
// (key(epoch, k)) with fold, from 0.
func (x *ctx) lastInEpochs(k []byte, key func(uint32, []byte) []byte, fold func(acc, v uint64) uint64) (uint64, error) {
	floor, err := x.epochsRead()
	if err != nil {
		return 0, err
	}
	var acc uint64
	for e := floor; e < floor+tombEpochsRead; e++ {
		v, ok, err := getCopy(x.r, key(e, k))
		if err != nil {
			return 0, err
		}
		if ok && len(v) == 8 {
			acc = fold(acc, binary.BigEndian.Uint64(v))
		}
	}
	return acc, nil
}

// WatchRegistered reports whether absent key k is registered for FLUSHALL
// in the epoch of nowMs (so that the registration outlives the next
// collection): a WATCH of k needs no KVORUM.WATCHREG then.
func WatchRegistered(r readerI, k []byte, nowMs int64) (bool, error) {
	return hasKey(r, regKey(tombEpoch(nowMs), k))
}

// tombFlushed writes, for FLUSHALL, the tombstone of every registered key
// that has a record (expired or not): the keys FLUSHALL is about to
// delete that a transaction may be watching.
func (x *ctx) tombFlushed() error {
	floor, err := x.epochsRead()
	if err != nil {
		return err
	}
	slots, err := x.hiddenSlots()
	if err != nil {
		return err
	}
	var keys [][]byte
	for _, s := range slots {
		err = walkRange(x.r, slotEpochKey(s, slotReg, floor), prefixEnd(appendSlotHidden(nil, s, slotReg)), nil, false, func(it *pebble.Iterator) (bool, error) {
			if k := it.Key(); len(k) > slotHiddenLen+4 {
				keys = append(keys, append([]byte(nil), k[slotHiddenLen+4:]...))
			}
			return true, nil
		})
		if err != nil {
			return err
		}
	}
	for _, k := range keys {
		if _, had, err := x.raw(k, false); err != nil {
			return err
		} else if had {
			if err := x.setTomb(k); err != nil {
				return err
			}
		}
	}
	return nil
}

// TombGCDue is TombGCDueIn for range 1.
func TombGCDue(r readerI, nowMs int64) (bool, error) { return TombGCDueIn(r, 1, nowMs) }

// TombGCDueIn reports whether range id's leader should propose
// KVORUM.TOMBGC to it at nowMs: its clock is two epochs past the range's
// floor (its replicated range-local 'D').
func TombGCDueIn(r readerI, id storage.RangeID, nowMs int64) (bool, error) {
	x := getCtx(r, nil, nowMs)
	defer putCtx(x)
	x.desc = &storage.Descriptor{RangeID: id}
	floor, _, err := x.tombFloor()
	return tombEpoch(nowMs) >= floor+2, err
}

func init() {
	def("kvorum.tombgc", 1, "write", 0, 0, 0, "transactions", "Internal: drops the deletion tombstones of old epochs.", cmdTombGC, nil)
	table["kvorum.tombgc"].internal = true
	specList = specList[:len(specList)-1]
}

// cmdTombGC keeps the tombstones and registrations of the entry's epoch
// and the one before (and later ones), in every slot of the range (one
// range deletion per slot and tag that has older ones). It replies the
// new floor.
func cmdTombGC(x *ctx, _ [][]byte) Reply {
	floor := max(tombEpoch(x.now), 1) - 1
	slots, err := x.hiddenSlots()
	if err != nil {
		return errReply(err)
	}
	for _, s := range slots {
		for _, tag := range []byte{slotTomb, slotReg} {
			lo, hi := appendSlotHidden(nil, s, tag), slotEpochKey(s, tag, floor)
			if has, err := spanHasKeys(x.r, lo, hi); err != nil {
				return errReply(err)
			} else if !has {
				continue
			}
			if err := x.w.DeleteRange(lo, hi, nil); err != nil {
				return errReply(err)
			}
		}
	}
	v := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint32(nil, floor), x.index)
	if err := x.w.Set(x.rangeKey(rangeTombFloor), v, nil); err != nil {
		return errReply(err)
	}
	return Int(int64(floor))
}

func init() {
	def("kvorum.watchreg", -2, "write", 0, 0, 0, "transactions", "Internal: registers absent watched keys for FLUSHALL.", cmdWatchReg, nil)
	table["kvorum.watchreg"].internal = true
	specList = specList[:len(specList)-1]
}

// cmdWatchReg registers each key in the entry's epoch, keeping a
// registration already there (it covers more FLUSHALLs). It replies the
// number of keys newly registered.
func cmdWatchReg(x *ctx, args [][]byte) Reply {
	flush, err := x.indexKey(x.rangeKey(rangeFlush))
	if err != nil {
		return errReply(err)
	}
	if x.ranged {
		// Its keys are not declared (the command is internal): check them
		// all before writing, since a registration lives in its key's slot.
		for _, k := range args[1:] {
			x.checkKey(k)
		}
	}
	var n int64
	for _, k := range args[1:] {
		rk := regKey(tombEpoch(x.now), k)
		if had, err := hasKey(x.r, rk); err != nil {
			return errReply(err)
		} else if had {
			continue
		}
		if err := x.w.Set(rk, binary.BigEndian.AppendUint64(nil, flush), nil); err != nil {
			return errReply(err)
		}
		n++
	}
	return Int(n)
}
