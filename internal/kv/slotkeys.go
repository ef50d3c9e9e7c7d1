package kv

import (
	"bytes"

	"github.com/cockroachdb/pebble/v2"
)

// KeysInSlot returns up to max (all: max < 0) of the live keys of hash
// slot s, in storage order, and how many it counted: CLUSTER
// GETKEYSINSLOT and COUNTKEYSINSLOT. With format 2 a slot's keys are one
// span (SlotSpan), so this reads that span only.
func KeysInSlot(r pebble.Reader, s uint16, max int, nowMs int64) (keys [][]byte, n int, err error) {
	start, end := SlotSpan(s, s+1)
	err = iterKeysFrom(r, start, nowMs, func(user []byte, sk []byte, _ *record) bool {
		if bytes.Compare(sk, end) >= 0 {
			return false
		}
		if max >= 0 && n >= max {
			return false
		}
		n++
		if max != 0 {
			keys = append(keys, bytes.Clone(user))
		}
		return true
	})
	return keys, n, err
}
