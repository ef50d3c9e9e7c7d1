// Package hll is Redis's HyperLogLog encoding, a port of Redis 7.0's
// hyperloglog.c: the bytes a Sketch holds are those redis-server holds
// for the same commands, so a client that GETs an HLL sees Redis's bytes,
// and the estimates are Redis's.
//
//	"HYLL" | encoding (0 dense, 1 sparse) | 3 unused bytes |
//	cached cardinality (8 bytes, little endian; the top bit of the last
//	byte set = stale) | registers
//
// Dense: 16384 registers of 6 bits, packed from the least significant bit
// of each byte. Sparse: the opcodes ZERO (00xxxxxx: 1-64 zero registers),
// XZERO (01xxxxxx xxxxxxxx: 1-16384 zero registers) and VAL (1vvvvvxx: 1-4
// registers of value 1-32). A new HLL is sparse; it is promoted to dense
// when a register needs a value above 32 or when the sparse string would
// grow past SparseMaxBytes (hll-sparse-max-bytes, Redis's default: kvorum
// has no CONFIG SET to change it).
//
// An element hashes (MurmurHash64A) to a register and a run length; Add
// raises that register. The sparse edits are ported operation by
// operation (split an opcode, then merge equal neighbouring VALs over the
// next few opcodes), since the bytes they produce depend on the order of
// the edits, not only on the register values. Raise sets registers one by
// one the same way, which is how PFMERGE fills its destination. Count is
// Otmar Ertl's estimator as Redis computes it.
//
// Corrupted values (clients can SET or SETRANGE any bytes) behave as in
// Redis too, with two details:
//
//   - The C code reads the NUL terminator of the sds string when an XZERO
//     opcode is cut short by the end of the value, and a Sketch keeps one.
//     An edit of such an opcode can make Redis write a non-zero byte there,
//     which stays in its memory (invisible to GET, lost by its replicas and
//     restarts) and changes what later commands on the key read: a Sketch
//     always reads 0 there, as a restarted Redis does.
//   - A VAL opcode that runs past the last register makes the HLL corrupted.
//     Redis 7.0.15's source stops reading there and accepts the HLL if the
//     registers before it add up to 16384; the redis-server kvorum is
//     compared with (Debian's 7.0.15-1~deb12u10) has the fix for
//     CVE-2025-32023, which refuses it, and so does this package.
//
// The package depends on nothing but the standard library.
package hll

import (
	"encoding/binary"
	"errors"
)

// ErrCorrupt is returned for a sparse HLL whose opcodes do not describe
// exactly NumRegisters registers (Redis's "Corrupted HLL object").
var ErrCorrupt = errors.New("hll: corrupted sparse encoding")

// The format's parameters, as Redis's.
const (
	precision    = 14 // register index bits
	patBits      = 64 - precision
	registerBits = 6
	registerMax  = 1<<registerBits - 1
	encDense     = 0
	encSparse    = 1
	maxEncoding  = 1
	hashSeed     = 0xadc83b19
	alphaInf     = 0.721347520444481703680 // 0.5/ln(2)

	sparseValMaxValue = 32
	sparseValMaxLen   = 4
	sparseZeroMaxLen  = 64
)

// Sizes of a value.
const (
	NumRegisters   = 1 << precision
	HeaderSize     = 16
	DenseSize      = HeaderSize + (NumRegisters*registerBits+7)/8
	SparseMaxBytes = 3000 // hll-sparse-max-bytes, Redis's default: above it a sparse HLL turns dense
)

// Sketch is an HLL string being worked on: b[:n] is the value and b[n] is
// 0, as the NUL terminator of a Redis sds string (the C code reads it when
// an opcode is cut short by the end of a corrupted value).
type Sketch struct {
	b []byte
	n int
}

// New is Redis's createHLLObject: sparse, all registers zero, cached
// cardinality 0 (valid).
func New() *Sketch {
	h := &Sketch{b: make([]byte, HeaderSize+2+8), n: HeaderSize + 2}
	copy(h.b, "HYLL")
	h.b[4] = encSparse
	h.b[HeaderSize], h.b[HeaderSize+1] = xZeroOp(NumRegisters)
	return h
}

// Load starts working on a copy of v, a value Valid accepts (a sparse
// one may still be corrupted: the operations report ErrCorrupt).
func Load(v []byte) *Sketch {
	h := &Sketch{b: make([]byte, len(v)+8), n: len(v)}
	copy(h.b, v)
	return h
}

func (h *Sketch) value() []byte { return h.b[:h.n] }
func (h *Sketch) enc() byte     { return h.b[4] }
func (h *Sketch) regs() []byte  { return h.b[HeaderSize:] }

func (h *Sketch) invalidateCache() { h.b[15] |= 0x80 }

// cached returns the cached cardinality, ok=false if stale.
func (h *Sketch) cached() (uint64, bool) {
	return binary.LittleEndian.Uint64(h.b[8:16]), h.b[15]&0x80 == 0
}

// Valid is Redis's isHLLObjectOrReply for a string value.
func Valid(v []byte) bool {
	if len(v) < HeaderSize || string(v[:4]) != "HYLL" || v[4] > maxEncoding {
		return false
	}
	return v[4] != encDense || len(v) == DenseSize
}

// Registers are the register values of one or more merged HLLs (PFCOUNT
// of several keys, PFMERGE).
type Registers [NumRegisters]uint8

// Count is the cardinality estimate of the registers.
func (r *Registers) Count() uint64 {
	var histo [64]int
	for _, v := range r {
		histo[v]++
	}
	return estimate(&histo)
}

// Bytes returns the value: Redis's string, sharing h's memory until the
// next edit.
func (h *Sketch) Bytes() []byte { return h.value() }

// Dense reports whether h uses the dense encoding.
func (h *Sketch) Dense() bool { return h.enc() == encDense }

// Cached returns the cardinality cached in the header, ok=false if it is
// stale.
func (h *Sketch) Cached() (uint64, bool) { return h.cached() }

// SetCache stores card as the cached cardinality, valid (what Redis's
// PFCOUNT writes back into the header).
func (h *Sketch) SetCache(card uint64) { binary.LittleEndian.PutUint64(h.b[8:16], card&^(1<<63)) }

// InvalidateCache marks the cached cardinality stale, as every write of an
// HLL does.
func (h *Sketch) InvalidateCache() { h.invalidateCache() }

// Add is hllAdd: it hashes ele and raises its register; changed reports
// whether a register grew. A sparse h may turn dense. ErrCorrupt leaves h
// as Redis leaves it: edited in place up to the failure.
func (h *Sketch) Add(ele []byte) (changed bool, err error) {
	switch h.add(ele) {
	case 1:
		return true, nil
	case -1:
		return false, ErrCorrupt
	}
	return false, nil
}

// Raise raises register i to v if it is lower (dense or sparse, as
// PFMERGE's hllDenseSet and hllSparseSet); changed reports whether it grew.
func (h *Sketch) Raise(i int, v uint8) (changed bool, err error) {
	var r int
	if h.enc() == encDense {
		r = denseSet(h.regs(), i, v)
	} else {
		r = h.sparseSet(i, v)
	}
	if r < 0 {
		return false, ErrCorrupt
	}
	return r == 1, nil
}

// Merge raises max to h's registers (hllMerge).
func (h *Sketch) Merge(max *Registers) error {
	if !h.merge(max) {
		return ErrCorrupt
	}
	return nil
}

// ToDense converts a sparse h to the dense encoding
// (hllSparseToDense); a dense h is left alone.
func (h *Sketch) ToDense() error {
	if !h.toDense() {
		return ErrCorrupt
	}
	return nil
}

// Count is hllCount: the cardinality estimate of h's registers (not the
// cached one).
func (h *Sketch) Count() (uint64, error) {
	n, ok := h.count()
	if !ok {
		return 0, ErrCorrupt
	}
	return n, nil
}

// add is hllAdd: 1 if a register changed, 0 if not, -1 if h is corrupted.
func (h *Sketch) add(ele []byte) int {
	index, count := patLen(ele)
	if h.enc() == encDense {
		return denseSet(h.regs(), index, count)
	}
	return h.sparseSet(index, count)
}

// merge raises max to h's registers (hllMerge); false if h is a corrupted
// sparse HLL.
func (h *Sketch) merge(max *Registers) bool {
	if h.enc() == encDense {
		regs := h.regs()
		for i := range max {
			if v := denseGet(regs, i); v > max[i] {
				max[i] = v
			}
		}
		return true
	}
	return h.eachValue(func(idx int, val uint8) {
		if val > max[idx] {
			max[idx] = val
		}
	})
}
