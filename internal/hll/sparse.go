package hll

// Sparse opcodes.

func isZeroOp(c byte) bool        { return c&0xc0 == 0 }
func isXZeroOp(c byte) bool       { return c&0xc0 == 0x40 }
func isValOp(c byte) bool         { return c&0x80 != 0 }
func zeroLen(c byte) int          { return int(c&0x3f) + 1 }
func xZeroLen(c, d byte) int      { return (int(c&0x3f)<<8 | int(d)) + 1 }
func valValue(c byte) uint8       { return (c>>2)&0x1f + 1 }
func valLen(c byte) int           { return int(c&0x3) + 1 }
func valOp(val uint8, n int) byte { return byte(int(val-1)<<2|(n-1)) | 0x80 }
func zeroOp(n int) byte           { return byte(n - 1) }
func xZeroOp(n int) (byte, byte) {
	l := n - 1
	return byte(l>>8) | 0x40, byte(l)
}

// room makes sure n free bytes follow the value and its terminator.
func (h *Sketch) room(n int) {
	if len(h.b) < h.n+n+1 {
		b := make([]byte, 2*(h.n+n+1))
		copy(b, h.b)
		h.b = b
	}
}

// setLen is sdsIncrLen: the value's new length, terminated.
func (h *Sketch) setLen(n int) {
	h.n = n
	h.b[n] = 0
}

// toDense is hllSparseToDense: false if the sparse value is corrupted
// (then h is unchanged).
func (h *Sketch) toDense() bool {
	if h.enc() == encDense {
		return true
	}
	d := make([]byte, DenseSize+1)
	copy(d, h.b[:HeaderSize]) // magic, unused bytes and cached cardinality
	d[4] = encDense
	regs := d[HeaderSize:]
	if !h.eachValue(func(idx int, val uint8) { denseSetReg(regs, idx, val) }) {
		return false
	}
	h.b, h.n = d, DenseSize
	return true
}

// promoteSet converts h to dense and raises register index to count.
func (h *Sketch) promoteSet(index int, count uint8) int {
	if !h.toDense() {
		return -1
	}
	// Redis asserts this is 1: a promotion means the register grows.
	return denseSet(h.regs(), index, count)
}

// sparseSet is hllSparseSet: raises register index to count in a sparse
// h, possibly promoting it to dense. 1 if a register changed, 0 if not, -1
// if h is corrupted.
func (h *Sketch) sparseSet(index int, count uint8) int {
	if count > sparseValMaxValue {
		return h.promoteSet(index, count)
	}
	h.room(3)
	b := h.b
	const sparse = HeaderSize
	end := h.n

	// Step 1: find the opcode covering index.
	p, first, span := sparse, 0, 0
	prev := -1
	for p < end {
		oplen := 1
		c := b[p]
		switch {
		case isZeroOp(c):
			span = zeroLen(c)
		case isValOp(c):
			span = valLen(c)
		default:
			span = xZeroLen(c, b[p+1])
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
	if isXZeroOp(b[p]) {
		next = p + 2
	}
	if next >= end {
		next = -1
	}
	c := b[p]
	isZero, isXZero, isVal := isZeroOp(c), isXZeroOp(c), isValOp(c)
	var runlen int
	switch {
	case isZero:
		runlen = zeroLen(c)
	case isXZero:
		runlen = xZeroLen(c, b[p+1])
	default:
		runlen = valLen(c)
	}

	// Step 2: the trivial updates in place, else split the opcode.
	switch {
	case isVal && valValue(c) >= count:
		return 0
	case isVal && runlen == 1, isZero && runlen == 1:
		b[p] = valOp(count, 1)
	default:
		var seqBuf [5]byte
		seq := seqBuf[:0]
		last := first + span - 1
		zeros := func(n int) {
			if n > sparseZeroMaxLen {
				x, y := xZeroOp(n)
				seq = append(seq, x, y)
			} else {
				seq = append(seq, zeroOp(n))
			}
		}
		if isZero || isXZero {
			if index != first {
				zeros(index - first)
			}
			seq = append(seq, valOp(count, 1))
			if index != last {
				zeros(last - index)
			}
		} else {
			cur := valValue(c)
			if index != first {
				seq = append(seq, valOp(cur, index-first))
			}
			seq = append(seq, valOp(count, 1))
			if index != last {
				seq = append(seq, valOp(cur, last-index))
			}
		}

		// Step 3: put the new sequence in place of the opcode.
		oldlen := 1
		if isXZero {
			oldlen = 2
		}
		delta := len(seq) - oldlen
		if delta > 0 && h.n+delta > SparseMaxBytes {
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
		if isXZeroOp(c) {
			p += 2
			continue
		} else if isZeroOp(c) {
			p++
			continue
		}
		if p+1 < end && isValOp(b[p+1]) {
			v1, v2 := valValue(c), valValue(b[p+1])
			if v1 == v2 {
				if n := valLen(c) + valLen(b[p+1]); n <= sparseValMaxLen {
					b[p+1] = valOp(v1, n)
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

// eachValue calls fn for each register a sparse HLL's VAL runs set, in
// order, as hllSparseToDense and hllMerge walk them. It returns false if h
// is corrupted: a run goes past the last register (fn has seen the runs
// before it), or the runs do not cover all the registers.
func (h *Sketch) eachValue(fn func(idx int, val uint8)) bool {
	covered, ok := h.eachRun(func(idx, n int, val uint8, isVal bool) bool {
		if !isVal {
			return true
		}
		if idx+n > NumRegisters {
			return false // overflow: corrupted (see the package comment)
		}
		for ; n > 0; n-- {
			fn(idx, val)
			idx++
		}
		return true
	})
	return ok && covered == NumRegisters
}

// eachRun walks a sparse HLL's opcodes in order, calling fn with each
// run's first register, length and value (0 for ZERO and XZERO runs, with
// isVal false); it stops early when fn returns false. It returns how many
// registers the runs cover (NumRegisters in a well-formed value) and
// whether fn let it finish.
func (h *Sketch) eachRun(fn func(idx, n int, val uint8, isVal bool) bool) (int, bool) {
	idx := 0
	for p, end := HeaderSize, h.n; p < end; {
		c := h.b[p]
		var n int
		var val uint8
		isVal := false
		switch {
		case isZeroOp(c):
			n = zeroLen(c)
			p++
		case isXZeroOp(c):
			n = xZeroLen(c, h.b[p+1])
			p += 2
		default:
			n, val, isVal = valLen(c), valValue(c), true
			p++
		}
		if !fn(idx, n, val, isVal) {
			return idx, false
		}
		idx += n
	}
	return idx, true
}
