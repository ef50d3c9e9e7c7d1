// Package bitmap is the bit arithmetic of Redis 7.0's bitmap commands
// (GETBIT, SETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD) on byte strings:
// bit 0 is the most significant bit of the first byte, and bits past the
// end of a string read as 0. The integer fields of BITFIELD, with Redis's
// overflow arithmetic, are in field.go.
//
// It also parses the commands' arguments as Redis does, with Redis's
// error replies (args.go). It knows nothing of keys: package kv looks the
// strings up and stores them.
package bitmap

import (
	"encoding/binary"
	"math/bits"
)

// Bit returns bit off of s, 0 past its end.
func Bit(s []byte, off uint64) byte {
	i := off >> 3
	if i >= uint64(len(s)) {
		return 0
	}
	return s[i] >> (7 - off&7) & 1
}

// SetBit sets bit off of s, which must hold it, to on (0 or 1).
func SetBit(s []byte, off uint64, on byte) {
	shift := 7 - off&7
	s[off>>3] = s[off>>3]&^(1<<shift) | on<<shift
}

// Grow returns s zero-padded to n bytes (s itself if long enough).
func Grow(s []byte, n uint64) []byte {
	if uint64(len(s)) >= n {
		return s
	}
	if uint64(cap(s)) >= n {
		old := len(s)
		s = s[:n]
		clear(s[old:])
		return s
	}
	t := make([]byte, n)
	copy(t, s)
	return t
}

// Count returns the number of set bits among bits from..to of p (both
// within p; none if from > to).
func Count(p []byte, from, to int64) int64 {
	if from > to {
		return 0
	}
	first, last := from>>3, to>>3
	n := popcount(p[first : last+1])
	// Take off the bits of the edge bytes that are outside the range.
	n -= int64(bits.OnesCount8(p[first] &^ (0xff >> (from & 7))))
	n -= int64(bits.OnesCount8(p[last] &^ (0xff << (7 - to&7))))
	return n
}

// popcount counts the set bits of s.
func popcount(s []byte) int64 {
	var n int
	for len(s) >= 8 {
		n += bits.OnesCount64(binary.LittleEndian.Uint64(s))
		s = s[8:]
	}
	for _, c := range s {
		n += bits.OnesCount8(c)
	}
	return int64(n)
}

// Find returns the position of the first bit equal to bit among bits
// from..to of p (both within p), -1 if there is none.
func Find(p []byte, from, to int64, bit byte) int64 {
	var flip byte // XORed in so that the bits looked for are ones
	if bit == 0 {
		flip = 0xff
	}
	first, last := from>>3, to>>3
	for i := first; i <= last; i++ {
		c := p[i] ^ flip
		if i == first {
			c &= 0xff >> (from & 7)
		}
		if i == last {
			c &= 0xff << (7 - to&7)
		}
		if c != 0 {
			return i<<3 + int64(bits.LeadingZeros8(c))
		}
	}
	return -1
}

// Op is a BITOP operation.
type Op int

// The BITOP operations.
const (
	And Op = iota
	Or
	Xor
	Not
)

// Combine returns op of srcs (NOT: of srcs[0] alone) over the length of the
// longest source, the shorter ones zero-padded.
func Combine(op Op, srcs [][]byte) []byte {
	n := 0
	for _, s := range srcs {
		n = max(n, len(s))
	}
	res := make([]byte, n)
	copy(res, srcs[0])
	switch op {
	case Not:
		for i := range res {
			res[i] = ^res[i]
		}
	case And:
		for _, s := range srcs[1:] {
			for i := range res {
				if i >= len(s) {
					clear(res[i:])
					break
				}
				res[i] &= s[i]
			}
		}
	case Or:
		for _, s := range srcs[1:] {
			for i, c := range s {
				res[i] |= c
			}
		}
	case Xor:
		for _, s := range srcs[1:] {
			for i, c := range s {
				res[i] ^= c
			}
		}
	}
	return res
}
