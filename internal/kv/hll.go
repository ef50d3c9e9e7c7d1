package kv

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// HyperLogLog: PFADD, PFCOUNT, PFMERGE.
//
// This is a port of Redis 7.0's hyperloglog.c. An HLL is a plain string in
// Redis's own format, so clients that GET it see Redis's bytes:
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
// grow past hll-sparse-max-bytes (Redis's default, 3000: kvorum has no
// CONFIG SET to change it).
//
// The sparse edits are ported operation by operation (split an opcode,
// then merge equal neighbouring VALs over the next few opcodes), since the
// bytes they produce depend on the order of the edits, not only on the
// register values. PFMERGE raises the destination's registers one by one
// the same way, so, as in Redis 7.0, merging sparse HLLs gives a sparse
// one unless it outgrows the limit; a dense source makes it dense.
//
// Corrupted values (clients can SET or SETRANGE any bytes) behave as in
// Redis too, with three details:
//
//   - A PFADD that fails half way keeps the registers it already set:
//     Redis edits the value in place before it notices.
//   - The C code reads the NUL terminator of the sds string when an XZERO
//     opcode is cut short by the end of the value, and hllVal keeps one.
//     An edit of such an opcode can make Redis write a non-zero byte there,
//     which stays in its memory (invisible to GET, lost by its replicas and
//     restarts) and changes what later commands on the key read: kvorum
//     always reads 0 there, as a restarted Redis does.
//   - A VAL opcode that runs past the last register makes the HLL corrupted.
//     Redis 7.0.15's source stops reading there and accepts the HLL if the
//     registers before it add up to 16384; the redis-server kvorum is
//     compared with (Debian's 7.0.15-1~deb12u10) has the fix for
//     CVE-2025-32023, which refuses it, and kvorum does the same.
//
// Deliberate difference: PFCOUNT of a single key does not store the
// cardinality it computes. Redis writes it into the value's header although
// PFCOUNT is flagged readonly; kvorum serves readonly commands on the read
// path, which cannot write, and keeps PFCOUNT readonly as COMMAND reports
// it. The count returned is the same (a valid cached count is returned
// as is, as Redis does), only the header bytes differ: after such a PFCOUNT
// Redis's value holds a valid cache and kvorum's still the stale one, which
// GET shows, and so do the cache bytes after a later PFADD or PFMERGE, which
// only set the stale bit. For the same reason such a PFCOUNT does not
// touch WATCHed keys as Redis's does.

func init() {
	def("pfadd", -2, "write denyoom fast", 1, 1, 1, "hyperloglog", "Adds elements to a HyperLogLog key. Creates the key if it doesn't exist.", cmdPFAdd, nil)
	def("pfcount", -2, "readonly", 1, -1, 1, "hyperloglog", "Returns the approximated cardinality of the set(s) observed by the HyperLogLog key(s).", cmdPFCount, nil)
	def("pfmerge", -2, "write denyoom", 1, -1, 1, "hyperloglog", "Merges one or more HyperLogLog values into a single key.", cmdPFMerge, nil)
}

var (
	errNotHLL     = Error("WRONGTYPE Key is not a valid HyperLogLog string value.")
	errCorruptHLL = Error("INVALIDOBJ Corrupted HLL object detected")
)

const (
	hllP              = 14
	hllQ              = 64 - hllP
	hllRegisters      = 1 << hllP
	hllPMask          = hllRegisters - 1
	hllBits           = 6
	hllRegisterMax    = 1<<hllBits - 1
	hllHdrSize        = 16
	hllDenseSize      = hllHdrSize + (hllRegisters*hllBits+7)/8
	hllEncDense       = 0
	hllEncSparse      = 1
	hllMaxEncoding    = 1
	hllSparseMaxBytes = 3000 // hll-sparse-max-bytes, Redis's default
	hllSeed           = 0xadc83b19
	hllAlphaInf       = 0.721347520444481703680 // 0.5/ln(2)

	hllSparseValMaxValue = 32
	hllSparseValMaxLen   = 4
	hllSparseZeroMaxLen  = 64
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

// hllPatLen returns the register an element hashes to and the length of
// the 000..1 pattern of the rest of its hash (1 to hllQ+1).
func hllPatLen(ele []byte) (index int, count uint8) {
	hash := murmurHash64A(ele, hllSeed)
	index = int(hash & hllPMask)
	hash >>= hllP
	hash |= 1 << hllQ
	return index, uint8(bits.TrailingZeros64(hash) + 1)
}

// Dense registers. regs starts at the first register byte and, like the
// sds string in Redis, has one byte (the terminator) past the last one:
// the last register reads and writes it (without effect).

func hllDenseGet(regs []byte, i int) uint8 {
	b := i * hllBits / 8
	fb := uint(i * hllBits & 7)
	b0, b1 := uint(regs[b]), uint(regs[b+1])
	return uint8((b0>>fb | b1<<(8-fb)) & hllRegisterMax)
}

func hllDenseSetReg(regs []byte, i int, val uint8) {
	b := i * hllBits / 8
	fb := uint(i * hllBits & 7)
	fb8 := 8 - fb
	v := uint(val)
	regs[b] &^= byte(hllRegisterMax << fb)
	regs[b] |= byte(v << fb)
	regs[b+1] &^= byte(hllRegisterMax >> fb8)
	regs[b+1] |= byte(v >> fb8)
}

// hllDenseSet raises register i to count: 1 if it changed, else 0.
func hllDenseSet(regs []byte, i int, count uint8) int {
	if count > hllDenseGet(regs, i) {
		hllDenseSetReg(regs, i, count)
		return 1
	}
	return 0
}

// Sparse opcodes.

func hllIsZero(c byte) bool          { return c&0xc0 == 0 }
func hllIsXZero(c byte) bool         { return c&0xc0 == 0x40 }
func hllIsVal(c byte) bool           { return c&0x80 != 0 }
func hllZeroLen(c byte) int          { return int(c&0x3f) + 1 }
func hllXZeroLen(c, d byte) int      { return (int(c&0x3f)<<8 | int(d)) + 1 }
func hllValValue(c byte) uint8       { return (c>>2)&0x1f + 1 }
func hllValLen(c byte) int           { return int(c&0x3) + 1 }
func hllValOp(val uint8, n int) byte { return byte(int(val-1)<<2|(n-1)) | 0x80 }
func hllZeroOp(n int) byte           { return byte(n - 1) }
func hllXZeroOp(n int) (byte, byte) {
	l := n - 1
	return byte(l>>8) | 0x40, byte(l)
}

// hllVal is an HLL string being worked on: b[:n] is the value and b[n] is
// 0, as the NUL terminator of a Redis sds string (the C code reads it when
// an opcode is cut short by the end of a corrupted value).
type hllVal struct {
	b []byte
	n int
}

// newHLL is Redis's createHLLObject: sparse, all registers zero, cached
// cardinality 0 (valid).
func newHLL() *hllVal {
	h := &hllVal{b: make([]byte, hllHdrSize+2+8), n: hllHdrSize + 2}
	copy(h.b, "HYLL")
	h.b[4] = hllEncSparse
	h.b[hllHdrSize], h.b[hllHdrSize+1] = hllXZeroOp(hllRegisters)
	return h
}

func loadHLL(v []byte) *hllVal {
	h := &hllVal{b: make([]byte, len(v)+8), n: len(v)}
	copy(h.b, v)
	return h
}

func (h *hllVal) value() []byte { return h.b[:h.n] }
func (h *hllVal) enc() byte     { return h.b[4] }
func (h *hllVal) regs() []byte  { return h.b[hllHdrSize:] }

func (h *hllVal) invalidateCache() { h.b[15] |= 0x80 }

// cached returns the cached cardinality, ok=false if stale.
func (h *hllVal) cached() (uint64, bool) {
	return binary.LittleEndian.Uint64(h.b[8:16]), h.b[15]&0x80 == 0
}

// isHLL is Redis's isHLLObjectOrReply for a string value.
func isHLL(v []byte) bool {
	if len(v) < hllHdrSize || string(v[:4]) != "HYLL" || v[4] > hllMaxEncoding {
		return false
	}
	return v[4] != hllEncDense || len(v) == hllDenseSize
}

// room makes sure n free bytes follow the value and its terminator.
func (h *hllVal) room(n int) {
	if len(h.b) < h.n+n+1 {
		b := make([]byte, 2*(h.n+n+1))
		copy(b, h.b)
		h.b = b
	}
}

// setLen is sdsIncrLen: the value's new length, terminated.
func (h *hllVal) setLen(n int) {
	h.n = n
	h.b[n] = 0
}

// toDense is hllSparseToDense: false if the sparse value is corrupted
// (then h is unchanged).
func (h *hllVal) toDense() bool {
	if h.enc() == hllEncDense {
		return true
	}
	d := make([]byte, hllDenseSize+1)
	copy(d, h.b[:hllHdrSize]) // magic, unused bytes and cached cardinality
	d[4] = hllEncDense
	regs := d[hllHdrSize:]
	covered, ok := h.eachRun(func(idx, n int, val uint8, isVal bool) bool {
		if !isVal {
			return true
		}
		if idx+n > hllRegisters {
			return false // overflow: corrupted (see the top of the file)
		}
		for ; n > 0; n-- {
			hllDenseSetReg(regs, idx, val)
			idx++
		}
		return true
	})
	if !ok || covered != hllRegisters {
		return false
	}
	h.b, h.n = d, hllDenseSize
	return true
}

// promoteSet converts h to dense and raises register index to count.
func (h *hllVal) promoteSet(index int, count uint8) int {
	if !h.toDense() {
		return -1
	}
	// Redis asserts this is 1: a promotion means the register grows.
	return hllDenseSet(h.regs(), index, count)
}

// sparseSet is hllSparseSet: raises register index to count in a sparse
// h, possibly promoting it to dense. 1 if a register changed, 0 if not, -1
// if h is corrupted.
func (h *hllVal) sparseSet(index int, count uint8) int {
	if count > hllSparseValMaxValue {
		return h.promoteSet(index, count)
	}
	h.room(3)
	b := h.b
	const sparse = hllHdrSize
	end := h.n

	// Step 1: find the opcode covering index.
	p, first, span := sparse, 0, 0
	prev := -1
	for p < end {
		oplen := 1
		c := b[p]
		switch {
		case hllIsZero(c):
			span = hllZeroLen(c)
		case hllIsVal(c):
			span = hllValLen(c)
		default:
			span = hllXZeroLen(c, b[p+1])
			oplen = 2
		}
		if index <= first+span-1 {
			break
		}
		prev = p
		p += oplen
		first += span
	}
	if span == 0 || p >= end {
		return -1
	}
	next := p + 1
	if hllIsXZero(b[p]) {
		next = p + 2
	}
	if next >= end {
		next = -1
	}
	c := b[p]
	isZero, isXZero, isVal := hllIsZero(c), hllIsXZero(c), hllIsVal(c)
	var runlen int
	switch {
	case isZero:
		runlen = hllZeroLen(c)
	case isXZero:
		runlen = hllXZeroLen(c, b[p+1])
	default:
		runlen = hllValLen(c)
	}

	// Step 2: the trivial updates in place, else split the opcode.
	switch {
	case isVal && hllValValue(c) >= count:
		return 0
	case isVal && runlen == 1, isZero && runlen == 1:
		b[p] = hllValOp(count, 1)
	default:
		var seqBuf [5]byte
		seq := seqBuf[:0]
		last := first + span - 1
		zeros := func(n int) {
			if n > hllSparseZeroMaxLen {
				x, y := hllXZeroOp(n)
				seq = append(seq, x, y)
			} else {
				seq = append(seq, hllZeroOp(n))
			}
		}
		if isZero || isXZero {
			if index != first {
				zeros(index - first)
			}
			seq = append(seq, hllValOp(count, 1))
			if index != last {
				zeros(last - index)
			}
		} else {
			cur := hllValValue(c)
			if index != first {
				seq = append(seq, hllValOp(cur, index-first))
			}
			seq = append(seq, hllValOp(count, 1))
			if index != last {
				seq = append(seq, hllValOp(cur, last-index))
			}
		}

		// Step 3: put the new sequence in place of the opcode.
		oldlen := 1
		if isXZero {
			oldlen = 2
		}
		delta := len(seq) - oldlen
		if delta > 0 && h.n+delta > hllSparseMaxBytes {
			return h.promoteSet(index, count)
		}
		if delta != 0 && next >= 0 {
			copy(b[next+delta:], b[next:end])
		}
		h.setLen(h.n + delta)
		copy(b[p:], seq)
		end += delta
	}

	// Step 4: merge adjacent VALs of equal value, over up to 5 opcodes
	// from the one before the edit.
	p = sparse
	if prev >= 0 {
		p = prev
	}
	for scan := 5; p < end && scan > 0; scan-- {
		c := b[p]
		if hllIsXZero(c) {
			p += 2
			continue
		} else if hllIsZero(c) {
			p++
			continue
		}
		if p+1 < end && hllIsVal(b[p+1]) {
			v1, v2 := hllValValue(c), hllValValue(b[p+1])
			if v1 == v2 {
				if n := hllValLen(c) + hllValLen(b[p+1]); n <= hllSparseValMaxLen {
					b[p+1] = hllValOp(v1, n)
					copy(b[p:], b[p+1:end+1])
					h.setLen(h.n - 1)
					end--
					continue // try to merge the result with its right neighbour
				}
			}
		}
		p++
	}
	h.invalidateCache()
	return 1
}

// add is hllAdd: 1 if a register changed, 0 if not, -1 if h is corrupted.
func (h *hllVal) add(ele []byte) int {
	index, count := hllPatLen(ele)
	if h.enc() == hllEncDense {
		return hllDenseSet(h.regs(), index, count)
	}
	return h.sparseSet(index, count)
}

// histogram counts registers by value; false if h is a corrupted sparse
// HLL (hllDenseRegHisto, hllSparseRegHisto).
func (h *hllVal) histogram(histo *[64]int) bool {
	if h.enc() == hllEncDense {
		regs := h.regs()
		for i := 0; i < hllRegisters; i++ {
			histo[hllDenseGet(regs, i)]++
		}
		return true
	}
	covered, _ := h.eachRun(func(_, n int, val uint8, _ bool) bool {
		histo[val] += n
		return true
	})
	return covered == hllRegisters
}

// merge raises max to h's registers (hllMerge); false if h is a corrupted
// sparse HLL.
func (h *hllVal) merge(max *[hllRegisters]uint8) bool {
	if h.enc() == hllEncDense {
		regs := h.regs()
		for i := range max {
			if v := hllDenseGet(regs, i); v > max[i] {
				max[i] = v
			}
		}
		return true
	}
	covered, ok := h.eachRun(func(idx, n int, val uint8, isVal bool) bool {
		if !isVal {
			return true
		}
		if idx+n > hllRegisters {
			return false // overflow: corrupted (see the top of the file)
		}
		for ; n > 0; n-- {
			if val > max[idx] {
				max[idx] = val
			}
			idx++
		}
		return true
	})
	return ok && covered == hllRegisters
}

// eachRun walks a sparse HLL's opcodes in order, calling fn with each
// run's first register, length and value (0 for ZERO and XZERO runs, with
// isVal false); it stops early when fn returns false. It returns how many
// registers the runs cover (hllRegisters in a well-formed value) and
// whether fn let it finish.
func (h *hllVal) eachRun(fn func(idx, n int, val uint8, isVal bool) bool) (int, bool) {
	idx := 0
	for p, end := hllHdrSize, h.n; p < end; {
		c := h.b[p]
		var n int
		var val uint8
		isVal := false
		switch {
		case hllIsZero(c):
			n = hllZeroLen(c)
			p++
		case hllIsXZero(c):
			n = hllXZeroLen(c, h.b[p+1])
			p += 2
		default:
			n, val, isVal = hllValLen(c), hllValValue(c), true
			p++
		}
		if !fn(idx, n, val, isVal) {
			return idx, false
		}
		idx += n
	}
	return idx, true
}

// hllSigma and hllTau are the helper functions of Otmar Ertl's "New
// cardinality estimation algorithms for HyperLogLog sketches"
// (arXiv:1702.01284), as Redis computes them. The float64 conversions keep
// the compiler from fusing a multiply and an add (Redis's x86-64 build
// does not).
func hllSigma(x float64) float64 {
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

func hllTau(x float64) float64 {
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

// hllEstimate is the cardinality estimate of hllCount from a register
// histogram.
func hllEstimate(histo *[64]int) uint64 {
	m := float64(hllRegisters)
	z := float64(m * hllTau((m-float64(histo[hllQ+1]))/m))
	for j := hllQ; j >= 1; j-- {
		z += float64(histo[j])
		z *= 0.5
	}
	z += float64(m * hllSigma(float64(histo[0])/m))
	return uint64(math.Round(hllAlphaInf * m * m / z))
}

// count is hllCount for one HLL; ok=false if it is a corrupted sparse one.
func (h *hllVal) count() (uint64, bool) {
	var histo [64]int
	if !h.histogram(&histo) {
		return 0, false
	}
	return hllEstimate(&histo), true
}

// loadHLLKey loads k as an HLL: nil if absent, or an error reply (the key
// holds another type, or a string that is not an HLL).
func loadHLLKey(x *ctx, k []byte) (*hllVal, record, *Reply) {
	rec, ok, e := getString(x, k)
	if e != nil {
		return nil, rec, e
	}
	if !ok {
		return nil, rec, nil
	}
	if !isHLL(rec.value) {
		r := errNotHLL
		return nil, rec, &r
	}
	return loadHLL(rec.value), rec, nil
}

// cmdPFAdd: PFADD key [element ...]. 1 if the key was created or a
// register changed, else 0. The key keeps its TTL.
func cmdPFAdd(x *ctx, args [][]byte) Reply {
	h, rec, e := loadHLLKey(x, args[1])
	if e != nil {
		return *e
	}
	updated := 0
	var expire int64
	if h == nil {
		h = newHLL()
		updated++
	} else {
		expire = rec.expire
	}
	for _, ele := range args[2:] {
		switch h.add(ele) {
		case 1:
			updated++
		case -1:
			// Redis has already changed the value in place for the
			// elements before (and set the stale bit of the cache).
			if updated > 0 {
				if r := putString(x, args[1], h.value(), expire); r.IsError() {
					return r
				}
			}
			return errCorruptHLL
		}
	}
	if updated == 0 {
		return Int(0)
	}
	h.invalidateCache()
	if r := putString(x, args[1], h.value(), expire); r.IsError() {
		return r
	}
	return Int(1)
}

// cmdPFCount: PFCOUNT key [key ...]. One key: its cached cardinality if
// valid, else computed (and, unlike Redis, not stored: see the top of the
// file). Several: the cardinality of their union, never cached.
func cmdPFCount(x *ctx, args [][]byte) Reply {
	if len(args) > 2 {
		var max [hllRegisters]uint8
		for _, k := range args[1:] {
			h, _, e := loadHLLKey(x, k)
			if e != nil {
				return *e
			}
			if h == nil {
				continue
			}
			if !h.merge(&max) {
				return errCorruptHLL
			}
		}
		var histo [64]int
		for _, v := range max {
			histo[v]++
		}
		return Int(int64(hllEstimate(&histo)))
	}
	h, _, e := loadHLLKey(x, args[1])
	if e != nil {
		return *e
	}
	if h == nil {
		return Int(0)
	}
	if card, ok := h.cached(); ok {
		return Int(int64(card))
	}
	card, ok := h.count()
	if !ok {
		return errCorruptHLL
	}
	return Int(int64(card))
}

// cmdPFMerge: PFMERGE destkey [sourcekey ...]. The destination is a source
// too; it keeps its TTL and its encoding unless a source is dense (then
// dense) or the registers set promote it, as in Redis 7.0: the merged
// registers are raised one by one in the destination, in register order.
func cmdPFMerge(x *ctx, args [][]byte) Reply {
	var max [hllRegisters]uint8
	useDense := false
	var dest *hllVal
	var expire int64
	for j, k := range args[1:] {
		h, rec, e := loadHLLKey(x, k)
		if e != nil {
			return *e
		}
		if h == nil {
			continue
		}
		if j == 0 {
			dest, expire = h, rec.expire
		}
		if h.enc() == hllEncDense {
			useDense = true
		}
		if !h.merge(&max) {
			return errCorruptHLL
		}
	}
	if dest == nil {
		dest = newHLL()
	}
	if useDense && !dest.toDense() {
		return errCorruptHLL
	}
	for j, v := range max {
		if v == 0 {
			continue
		}
		if dest.enc() == hllEncDense {
			hllDenseSet(dest.regs(), j, v)
		} else {
			dest.sparseSet(j, v)
		}
	}
	dest.invalidateCache()
	return putString(x, args[1], dest.value(), expire)
}
