package kv

import (
	"encoding/binary"
	"errors"
	"strconv"

	"github.com/cockroachdb/pebble/v2"
)

// nextRangeIDKey holds the last range id handed out by KVORUM.NEXTRANGEID
// (uint64 BE), in range 1's global hidden space (docs/ranges.md §2.3).
var nextRangeIDKey = []byte{userPrefix, 0x00, 0x00, 'R'}

func init() {
	def("kvorum.nextrangeid", 2, "write", 0, 0, 0, "server", "Internal: allocate a range id for a split, greater than floor and every id handed out before.", cmdNextRangeID, nil)
	table["kvorum.nextrangeid"].internal = true
	specList = specList[:len(specList)-1]
}

// NextRangeIDCommand is KVORUM.NEXTRANGEID floor: it replies a range id
// greater than floor (the caller's largest known range id) and than every
// id it replied before. Ids may have gaps (a split that then fails
// wastes one); they never repeat. It must be proposed to range 1.
func NextRangeIDCommand(floor uint64) [][]byte {
	return [][]byte{[]byte("KVORUM.NEXTRANGEID"), strconv.AppendUint(nil, floor, 10)}
}

func cmdNextRangeID(x *ctx, args [][]byte) Reply {
	if x.rangeID() != 1 {
		return Error("ERR KVORUM.NEXTRANGEID runs on range 1 only")
	}
	floor, err := strconv.ParseUint(string(args[1]), 10, 64)
	if err != nil {
		return Error("ERR KVORUM.NEXTRANGEID: floor is not a number")
	}
	var last uint64
	v, c, err := x.r.Get(nextRangeIDKey)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
	case err != nil:
		return errReply(err)
	default:
		if len(v) == 8 {
			last = binary.BigEndian.Uint64(v)
		}
		c.Close()
	}
	next := max(last, floor) + 1
	if err := x.w.Set(nextRangeIDKey, binary.BigEndian.AppendUint64(nil, next), nil); err != nil {
		return errReply(err)
	}
	return Int(int64(next))
}
