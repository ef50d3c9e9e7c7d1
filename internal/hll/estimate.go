package hll

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// murmurHash64A is Redis's MurmurHash2, 64-bit version (little endian
// reads on every architecture).
func murmurHash64A(key []byte, seed uint64) uint64 {
	const m = 0xc6a4a7935bd1e995
	const r = 47
	h := seed ^ (uint64(len(key)) * m)
	data := key
	for len(data) >= 8 {
		k := binary.LittleEndian.Uint64(data)
		k *= m
		k ^= k >> r
		k *= m
		h ^= k
		h *= m
		data = data[8:]
	}
	if len(data) > 0 { // the 1 to 7 tail bytes, little-endian
		for i := len(data) - 1; i >= 0; i-- {
			h ^= uint64(data[i]) << (8 * i)
		}
		h *= m
	}
	h ^= h >> r
	h *= m
	h ^= h >> r
	return h
}

// patLen returns the register an element hashes to and the length of
// the 000..1 pattern of the rest of its hash (1 to patBits+1).
func patLen(ele []byte) (index int, count uint8) {
	hash := murmurHash64A(ele, hashSeed)
	index = int(hash & (NumRegisters - 1))
	hash >>= precision
	hash |= 1 << patBits
	return index, uint8(bits.TrailingZeros64(hash) + 1)
}

// histogram counts registers by value; false if h is a corrupted sparse
// HLL (hllDenseRegHisto, hllSparseRegHisto).
func (h *Sketch) histogram(histo *[64]int) bool {
	if h.enc() == encDense {
		regs := h.regs()
		for i := 0; i < NumRegisters; i++ {
			histo[denseGet(regs, i)]++
		}
		return true
	}
	covered, _ := h.eachRun(func(_, n int, val uint8, _ bool) bool {
		histo[val] += n
		return true
	})
	return covered == NumRegisters
}

// sigma and tau are the helper functions of Otmar Ertl's "New
// cardinality estimation algorithms for HyperLogLog sketches"
// (arXiv:1702.01284), as Redis computes them. The float64 conversions keep
// the compiler from fusing a multiply and an add (Redis's x86-64 build
// does not).
func sigma(x float64) float64 {
	if x == 1 {
		return math.Inf(1)
	}
	y, z := 1.0, x
	for {
		x *= x
		zPrime := z
		z += float64(x * y)
		y += y
		if zPrime == z {
			return z
		}
	}
}

func tau(x float64) float64 {
	if x == 0 || x == 1 {
		return 0
	}
	y, z := 1.0, 1-x
	for {
		x = math.Sqrt(x)
		zPrime := z
		y *= 0.5
		d := 1 - x
		z -= float64(float64(d*d) * y)
		if zPrime == z {
			return z / 3
		}
	}
}

// estimate is the cardinality estimate of hllCount from a register
// histogram.
func estimate(histo *[64]int) uint64 {
	m := float64(NumRegisters)
	z := float64(m * tau((m-float64(histo[patBits+1]))/m))
	for j := patBits; j >= 1; j-- {
		z += float64(histo[j])
		z *= 0.5
	}
	z += float64(m * sigma(float64(histo[0])/m))
	return uint64(math.Round(alphaInf * m * m / z))
}

// count is hllCount for one HLL; ok=false if it is a corrupted sparse one.
func (h *Sketch) count() (uint64, bool) {
	var histo [64]int
	if !h.histogram(&histo) {
		return 0, false
	}
	return estimate(&histo), true
}
