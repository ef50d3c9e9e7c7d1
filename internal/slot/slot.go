// Package slot maps keys to Redis Cluster's hash slots: CRC16 (XMODEM) of
// the key, or of its hash tag, modulo 16384. It is the key-to-range mapping
// of docs/ranges.md (issue 18): a range owns a contiguous interval of
// slots, so keys with the same hash tag ({user1000}.following,
// {user1000}.followers) always share a range, as they share a node in a
// Redis Cluster.
package slot

// Count is the number of hash slots.
const Count = 16384

// table is CRC16-XMODEM (polynomial 0x1021, initial value 0, no
// reflection), one entry per byte value.
var table = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for j := 0; j < 8; j++ {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()

// CRC16 is the checksum Redis Cluster hashes keys with.
func CRC16(b []byte) uint16 {
	var c uint16
	for _, x := range b {
		c = c<<8 ^ table[byte(c>>8)^x]
	}
	return c
}

// Tag returns the part of key that is hashed: the bytes between the first
// '{' and the first '}' after it when there is at least one, else the
// whole key (Redis's keyHashSlot).
func Tag(key []byte) []byte {
	for i, c := range key {
		if c != '{' {
			continue
		}
		for j := i + 1; j < len(key); j++ {
			if key[j] == '}' {
				if j == i+1 {
					return key // "{}": the whole key
				}
				return key[i+1 : j]
			}
		}
		return key // no '}' after the first '{'
	}
	return key
}

// Of returns key's hash slot, in [0, Count).
func Of(key []byte) uint16 { return CRC16(Tag(key)) & (Count - 1) }
