package kv

import (
	"encoding/binary"
)

// Deletion tombstones, for WATCH on absent keys (watchStamp): every
// deletion of key k stores the entry's index under k in the tombstone
// epoch of the entry's clock, so a transaction watching k while it was
// absent aborts when k was created and deleted again before EXEC, and
// only then (a deletion of another key does not touch k's tombstone).
// Epochs are tombEpochMs long; the leader proposes KVORUM.TOMBGC when its
// clock enters a new epoch, which drops every epoch but the last two with
// one range deletion, so a tombstone lives one to two epochs. A WATCH
// that spans the collection of its key's tombstone (a deletion at least
// an epoch old) aborts once, spuriously, as a conservative answer.
//
//	'd' <epoch:4> <key>   index (8)
//	'D'                   the first epoch kept (4)

var (
	tombPrefix   = []byte{userPrefix, 0x00, 0x00, 'd'}
	tombFloorKey = []byte{userPrefix, 0x00, 0x00, 'D'}
	bucketPrefix = []byte{userPrefix, 0x00, 0x00, 't'} // before: one index per hash bucket of keys
)

// tombEpochMs is the length of a tombstone epoch; tombEpochsRead bounds
// the epochs a lookup reads from the floor on (two are kept; the rest is
// slack for a collection that comes late).
const (
	tombEpochMs    = 10 * 60 * 1000
	tombEpochsRead = 8
)

func tombEpoch(nowMs int64) uint32 { return uint32(max(nowMs, 0) / tombEpochMs) }

func tombKey(epoch uint32, k []byte) []byte {
	b := binary.BigEndian.AppendUint32(append(make([]byte, 0, len(tombPrefix)+4+len(k)), tombPrefix...), epoch)
	return append(b, k...)
}

// setTomb records the deletion of k by this entry.
func (x *ctx) setTomb(k []byte) error {
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], x.index)
	return x.w.Set(tombKey(tombEpoch(x.now), k), v[:], nil)
}

// tombFloor is the first epoch whose tombstones are kept.
func (x *ctx) tombFloor() (uint32, error) {
	v, ok, err := getCopy(x.r, tombFloorKey)
	if err != nil || !ok || len(v) != 4 {
		return 0, err
	}
	return binary.BigEndian.Uint32(v), nil
}

// tomb returns the index of k's last deletion still recorded (0: none).
func (x *ctx) tomb(k []byte) (uint64, error) {
	floor, err := x.tombFloor()
	if err != nil {
		return 0, err
	}
	if floor == 0 { // no collection yet: start from the epoch before now
		floor = max(tombEpoch(x.now), 1) - 1
	}
	var last uint64
	for e := floor; e < floor+tombEpochsRead; e++ {
		v, ok, err := getCopy(x.r, tombKey(e, k))
		if err != nil {
			return 0, err
		}
		if ok && len(v) == 8 {
			last = max(last, binary.BigEndian.Uint64(v))
		}
	}
	return last, nil
}

// TombGCDue reports whether the leader should propose KVORUM.TOMBGC at
// nowMs: its clock is two epochs past the floor.
func TombGCDue(r readerI, nowMs int64) (bool, error) {
	x := getCtx(r, nil, nowMs)
	defer putCtx(x)
	floor, err := x.tombFloor()
	return tombEpoch(nowMs) >= floor+2, err
}

func init() {
	def("kvorum.tombgc", 1, "write", 0, 0, 0, "transactions", "Internal: drops the deletion tombstones of old epochs.", cmdTombGC, nil)
	table["kvorum.tombgc"].internal = true
	specList = specList[:len(specList)-1]
}

// cmdTombGC keeps the tombstones of the entry's epoch and the one before
// (and later ones); it also drops the deletion buckets of stores written
// before tombstones existed. It replies the new floor.
func cmdTombGC(x *ctx, _ [][]byte) Reply {
	floor := max(tombEpoch(x.now), 1) - 1
	for _, r := range [][2][]byte{{bucketPrefix, prefixEnd(bucketPrefix)}, {tombPrefix, tombKey(floor, nil)}} {
		if err := x.w.DeleteRange(r[0], r[1], nil); err != nil {
			return errReply(err)
		}
	}
	if err := x.w.Set(tombFloorKey, binary.BigEndian.AppendUint32(nil, floor), nil); err != nil {
		return errReply(err)
	}
	return Int(int64(floor))
}
