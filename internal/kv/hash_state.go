package kv

import (
	"crypto/sha256"
	"encoding/binary"

	"github.com/cockroachdb/pebble/v2"
)

// StateHash returns a SHA-256 over every storage key and value of the
// replicated range-local spans (version counter, FLUSHALL index) and the
// user span (user keys, collection elements, the per-slot and global
// hidden keys such as the script cache) and the number of keys hashed. Replicas
// that applied the same log prefix have the same hash: tests compare it
// across nodes at the same applied index.
func StateHash(r pebble.Reader) (sum [32]byte, keys int, err error) {
	start, end := UserSpan()
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	// The replicated range-local keys of every range first (version
	// counter, FLUSHALL index, tombstone floor: hidden.go).
	err = walkReplicatedRangeKeys(r, func(k, v []byte) {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(k)))])
		h.Write(k)
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(v)))])
		h.Write(v)
		keys++
	})
	if err != nil {
		return sum, 0, err
	}
	err = walkRange(r, start, end, nil, false, func(it *pebble.Iterator) (bool, error) {
		v, err := it.ValueAndErr()
		if err != nil {
			return false, err
		}
		k := it.Key()
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(k)))])
		h.Write(k)
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(v)))])
		h.Write(v)
		keys++
		return true, nil
	})
	if err != nil {
		return sum, 0, err
	}
	copy(sum[:], h.Sum(nil))
	return sum, keys, nil
}
