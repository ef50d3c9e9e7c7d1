package kv

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/bits"

	"github.com/kvorum/kvorum/internal/redisnum"
)

// Bit commands (Redis's "bitmap" group): GETBIT, SETBIT, BITCOUNT, BITPOS,
// BITOP, BITFIELD and BITFIELD_RO, with Redis 7.0's replies, error texts
// and argument checking order. Bit 0 is the most significant bit of the
// first byte; a missing key reads as an empty string and bits past the end
// of a string read as 0.

var (
	errBitOffset    = Error("ERR bit offset is not an integer or out of range")
	errBitValue     = Error("ERR bit is not an integer or out of range")
	errBitArg       = Error("ERR The bit argument must be 1 or 0.")
	errBitOpNot     = Error("ERR BITOP NOT must be called with a single source key.")
	errBitfieldType = Error("ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.")
	errOverflowType = Error("ERR Invalid OVERFLOW type specified")
	errBitfieldRO   = Error("ERR BITFIELD_RO only supports the GET subcommand")
)

func init() {
	def("getbit", 3, "readonly fast", 1, 1, 1, "bitmap", "Returns a bit value by offset.", cmdGetBit, checkGetBit)
	def("setbit", 4, "write denyoom", 1, 1, 1, "bitmap", "Sets or clears the bit at offset of the string value. Creates the key if it doesn't exist.", cmdSetBit, checkSetBit)
	// BITCOUNT's range arguments are only looked at when the key holds a
	// string (a missing key answers 0 whatever follows), so it has no check.
	def("bitcount", -2, "readonly", 1, 1, 1, "bitmap", "Counts the number of set bits (population counting) in a string.", cmdBitCount, nil)
	def("bitpos", -3, "readonly", 1, 1, 1, "bitmap", "Finds the first set (1) or clear (0) bit in a string.", cmdBitPos, checkBitPos)
	def("bitop", -4, "write denyoom", 2, -1, 1, "bitmap", "Performs bitwise operations on multiple strings, and stores the result.", cmdBitOp, checkBitOp)
	def("bitfield", -2, "write denyoom", 1, 1, 1, "bitmap", "Performs arbitrary bitfield integer operations on strings.", cmdBitField, checkBitField)
	// A BITFIELD made of GET (and OVERFLOW) subcommands only changes
	// nothing: it is served as a read.
	table["bitfield"].readOnly = func(args [][]byte) bool {
		write, r := parseBitfield(args, nil)
		return r == nil && !write
	}
	def("bitfield_ro", -2, "readonly fast", 1, 1, 1, "bitmap", "Performs arbitrary read-only bitfield integer operations on strings.", cmdBitField, checkBitField)
}

// maxBitOffset is the largest bit offset Redis accepts: the bit must lie
// in a string of at most proto-max-bulk-len (512 MB) bytes.
const maxBitOffset = maxStringSize*8 - 1

// parseBitOffset is Redis's getBitOffsetFromArgument: a non-negative
// integer below 2^32. With hash and bits > 0 (BITFIELD), "#N" means N*bits,
// multiplied with 64-bit wrap-around as Redis does.
func parseBitOffset(b []byte, hash bool, width int) (uint64, bool) {
	useHash := hash && width > 0 && len(b) > 0 && b[0] == '#'
	if useHash {
		b = b[1:]
	}
	n, ok := redisnum.ParseInt(b)
	if !ok {
		return 0, false
	}
	if useHash {
		n *= int64(width) // wraps like Redis's long long multiplication
	}
	if n < 0 || n > maxBitOffset {
		return 0, false
	}
	return uint64(n), true
}

// parseBitValue reads SETBIT's value: 0 or 1.
func parseBitValue(b []byte) (byte, bool) {
	n, ok := redisnum.ParseInt(b)
	if !ok || n&^1 != 0 {
		return 0, false
	}
	return byte(n), true
}

// bitAt returns bit off of s, 0 past its end.
func bitAt(s []byte, off uint64) byte {
	i := off >> 3
	if i >= uint64(len(s)) {
		return 0
	}
	return s[i] >> (7 - off&7) & 1
}

// growZero returns s zero-padded to n bytes (s itself if long enough).
func growZero(s []byte, n uint64) []byte {
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

func checkGetBit(args [][]byte) (Reply, bool) {
	if _, ok := parseBitOffset(args[2], false, 0); !ok {
		return errBitOffset, false
	}
	return Reply{}, true
}

func cmdGetBit(x *ctx, args [][]byte) Reply {
	off, ok := parseBitOffset(args[2], false, 0)
	if !ok {
		return errBitOffset
	}
	rec, _, e := getString(x, args[1])
	if e != nil {
		return errReply(e)
	}
	return Int(int64(bitAt(rec.value, off)))
}

func checkSetBit(args [][]byte) (Reply, bool) {
	if _, ok := parseBitOffset(args[2], false, 0); !ok {
		return errBitOffset, false
	}
	if _, ok := parseBitValue(args[3]); !ok {
		return errBitValue, false
	}
	return Reply{}, true
}

func cmdSetBit(x *ctx, args [][]byte) Reply {
	off, ok := parseBitOffset(args[2], false, 0)
	if !ok {
		return errBitOffset
	}
	on, ok := parseBitValue(args[3])
	if !ok {
		return errBitValue
	}
	rec, exists, e := getString(x, args[1])
	if e != nil {
		return errReply(e)
	}
	old := bitAt(rec.value, off)
	need := off>>3 + 1
	if exists && old == on && uint64(len(rec.value)) >= need {
		return Int(int64(old)) // nothing changes: the key is not touched, as in Redis
	}
	v := growZero(rec.value, need)
	shift := 7 - off&7
	v[off>>3] = v[off>>3]&^(1<<shift) | on<<shift
	if r := putString(x, args[1], v, rec.expire); r.IsError() {
		return r
	}
	return Int(int64(old))
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

// bitRange is the range argument handling BITCOUNT and BITPOS share:
// negative indexes count from the end, then the range is clamped to the
// string (in bytes, or in bits with BIT). It returns the range in bits,
// empty if from > to.
func bitRange(n, start, end int64, isBit bool) (from, to int64) {
	total := n
	if isBit {
		total <<= 3
	}
	if start < 0 {
		start += total
	}
	if end < 0 {
		end += total
	}
	start = max(start, 0)
	end = max(end, 0)
	if end >= total {
		end = total - 1
	}
	if start > end {
		return 0, -1
	}
	if isBit {
		return start, end
	}
	return start << 3, end<<3 + 7
}

// parseUnit reads the optional BYTE|BIT argument.
func parseUnit(b []byte) (isBit, ok bool) {
	switch {
	case eq(b, "BIT"):
		return true, true
	case eq(b, "BYTE"):
		return false, true
	}
	return false, false
}

// cmdBitCount: BITCOUNT key [start end [BYTE|BIT]]. As in Redis, the key
// is looked at before the arguments: a missing key counts 0 whatever they
// are.
func cmdBitCount(x *ctx, args [][]byte) Reply {
	rec, ok, e := getString(x, args[1])
	if e != nil {
		return errReply(e)
	}
	if !ok {
		return Int(0)
	}
	p := rec.value
	from, to := int64(0), int64(len(p))*8-1
	switch len(args) {
	case 2:
	case 4, 5:
		start, ok1 := redisnum.ParseInt(args[2])
		if !ok1 {
			return errNotInt
		}
		end, ok2 := redisnum.ParseInt(args[3])
		if !ok2 {
			return errNotInt
		}
		if start < 0 && end < 0 && start > end {
			return Int(0) // before the unit is looked at, as in Redis
		}
		isBit := false
		if len(args) == 5 {
			var ok bool
			if isBit, ok = parseUnit(args[4]); !ok {
				return errSyntax
			}
		}
		from, to = bitRange(int64(len(p)), start, end, isBit)
	default:
		return errSyntax
	}
	if from > to {
		return Int(0)
	}
	first, last := from>>3, to>>3
	n := popcount(p[first : last+1])
	// Take off the bits of the edge bytes that are outside the range.
	n -= int64(bits.OnesCount8(p[first] &^ (0xff >> (from & 7))))
	n -= int64(bits.OnesCount8(p[last] &^ (0xff << (7 - to&7))))
	return Int(n)
}

func checkBitPos(args [][]byte) (Reply, bool) {
	if r, ok := bitPosBit(args[2]); !ok {
		return r, false
	}
	return Reply{}, true
}

func bitPosBit(b []byte) (Reply, bool) {
	n, ok := redisnum.ParseInt(b)
	if !ok {
		return errNotInt, false
	}
	if n != 0 && n != 1 {
		return errBitArg, false
	}
	return Int(n), true
}

// findBit returns the position of the first bit equal to bit in bits
// from..to of p (both within p), -1 if there is none.
func findBit(p []byte, from, to int64, bit byte) int64 {
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

// cmdBitPos: BITPOS key bit [start [end [BYTE|BIT]]]. Without an end, the
// string is taken as zero-padded on the right: looking for a 0 in a string
// of ones answers the bit just past it.
func cmdBitPos(x *ctx, args [][]byte) Reply {
	r, ok := bitPosBit(args[2])
	if !ok {
		return r
	}
	bit := byte(r.Int)
	rec, exists, e := getString(x, args[1])
	if e != nil {
		return errReply(e)
	}
	if !exists {
		if bit == 1 {
			return Int(-1)
		}
		return Int(0)
	}
	p := rec.value
	n := int64(len(p))
	from, to := int64(0), n*8-1
	endGiven := false
	switch len(args) {
	case 3:
	case 4, 5, 6:
		start, ok := redisnum.ParseInt(args[3])
		if !ok {
			return errNotInt
		}
		isBit := false
		if len(args) == 6 {
			if isBit, ok = parseUnit(args[5]); !ok {
				return errSyntax
			}
		}
		end := n - 1
		if len(args) >= 5 {
			if end, ok = redisnum.ParseInt(args[4]); !ok {
				return errNotInt
			}
			endGiven = true
		}
		from, to = bitRange(n, start, end, isBit)
	default:
		return errSyntax
	}
	if from > to {
		return Int(-1) // an empty range holds neither 0 nor 1
	}
	pos := findBit(p, from, to, bit)
	if pos < 0 && bit == 0 && !endGiven {
		return Int(n * 8)
	}
	return Int(pos)
}

const (
	bitAnd = iota
	bitOr
	bitXor
	bitNot
)

func parseBitOp(b []byte) (int, bool) {
	switch {
	case eq(b, "AND"):
		return bitAnd, true
	case eq(b, "OR"):
		return bitOr, true
	case eq(b, "XOR"):
		return bitXor, true
	case eq(b, "NOT"):
		return bitNot, true
	}
	return 0, false
}

func checkBitOp(args [][]byte) (Reply, bool) {
	op, ok := parseBitOp(args[1])
	if !ok {
		return errSyntax, false
	}
	if op == bitNot && len(args) != 4 {
		return errBitOpNot, false
	}
	return Reply{}, true
}

// cmdBitOp: BITOP AND|OR|XOR|NOT destkey key [key ...]. Missing keys are
// empty strings, shorter strings are zero-padded; the result replaces the
// destination (any type, without TTL), or deletes it if empty.
func cmdBitOp(x *ctx, args [][]byte) Reply {
	if r, ok := checkBitOp(args); !ok {
		return r
	}
	op, _ := parseBitOp(args[1])
	srcs := make([][]byte, 0, len(args)-3)
	maxLen := 0
	for _, k := range args[3:] {
		rec, _, e := getString(x, k)
		if e != nil {
			return errReply(e)
		}
		srcs = append(srcs, rec.value)
		maxLen = max(maxLen, len(rec.value))
	}
	dest := args[2]
	if maxLen == 0 {
		if err := x.remove(dest); err != nil {
			return errReply(err)
		}
		return Int(0)
	}
	res := make([]byte, maxLen)
	copy(res, srcs[0])
	switch op {
	case bitNot:
		for i := range res {
			res[i] = ^res[i]
		}
	case bitAnd:
		for _, s := range srcs[1:] {
			for i := range res {
				if i < len(s) {
					res[i] &= s[i]
				} else {
					clear(res[i:])
					break
				}
			}
		}
	case bitOr:
		for _, s := range srcs[1:] {
			for i, c := range s {
				res[i] |= c
			}
		}
	case bitXor:
		for _, s := range srcs[1:] {
			for i, c := range s {
				res[i] ^= c
			}
		}
	}
	if r := putString(x, dest, res, 0); r.IsError() {
		return r
	}
	return Int(int64(maxLen))
}

// BITFIELD subcommands and overflow behaviours.
const (
	bfGet = iota
	bfSet
	bfIncrBy
)

const (
	bfWrap = iota
	bfSat
	bfFail
)

type bfOp struct {
	op, overflow int
	signed       bool
	width        uint // bits, 1..64 signed, 1..63 unsigned
	offset       uint64
	arg          int64 // SET's value, INCRBY's increment
}

// parseBitfieldType reads i1..i64 or u1..u63. Redis reads the width as a C
// string: it stops at a NUL byte.
func parseBitfieldType(b []byte) (signed bool, width uint, ok bool) {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	if len(b) == 0 || (b[0] != 'i' && b[0] != 'u') {
		return false, 0, false
	}
	signed = b[0] == 'i'
	n, ok := redisnum.ParseInt(b[1:])
	if !ok || n < 1 || (signed && n > 64) || (!signed && n > 63) {
		return false, 0, false
	}
	return signed, uint(n), true
}

// parseBitfield parses BITFIELD's subcommands the way Redis does, failing
// at the first error; ops, if not nil, receives them. write says whether
// there is a SET or INCRBY.
func parseBitfield(args [][]byte, ops *[]bfOp) (write bool, errReply *Reply) {
	fail := func(r Reply) (bool, *Reply) { return false, &r }
	overflow := bfWrap
	for j := 2; j < len(args); j++ {
		rem := len(args) - j - 1
		var op int
		switch sub := args[j]; {
		case eq(sub, "GET") && rem >= 2:
			op = bfGet
		case eq(sub, "SET") && rem >= 3:
			op = bfSet
		case eq(sub, "INCRBY") && rem >= 3:
			op = bfIncrBy
		case eq(sub, "OVERFLOW") && rem >= 1:
			j++
			switch t := args[j]; {
			case eq(t, "WRAP"):
				overflow = bfWrap
			case eq(t, "SAT"):
				overflow = bfSat
			case eq(t, "FAIL"):
				overflow = bfFail
			default:
				return fail(errOverflowType)
			}
			continue
		default:
			return fail(errSyntax)
		}
		signed, width, ok := parseBitfieldType(args[j+1])
		if !ok {
			return fail(errBitfieldType)
		}
		off, ok := parseBitOffset(args[j+2], true, int(width))
		if !ok {
			return fail(errBitOffset)
		}
		var arg int64
		if op != bfGet {
			write = true
			if arg, ok = redisnum.ParseInt(args[j+3]); !ok {
				return fail(errNotInt)
			}
			j += 3
		} else {
			j += 2
		}
		if ops != nil {
			*ops = append(*ops, bfOp{op: op, overflow: overflow, signed: signed, width: width, offset: off, arg: arg})
		}
	}
	return write, nil
}

func checkBitField(args [][]byte) (Reply, bool) {
	write, r := parseBitfield(args, nil)
	if r != nil {
		return *r, false
	}
	if write && eq(args[0], "BITFIELD_RO") {
		return errBitfieldRO, false
	}
	return Reply{}, true
}

// getField reads width bits at off of s as an unsigned number (bits past
// the end of s are 0).
func getField(s []byte, off uint64, width uint) uint64 {
	var v uint64
	for i := uint64(0); i < uint64(width); i++ {
		v = v<<1 | uint64(bitAt(s, off+i))
	}
	return v
}

// setField writes the low width bits of v at off of s (long enough).
func setField(s []byte, off uint64, width uint, v uint64) {
	for i := uint64(0); i < uint64(width); i++ {
		b := byte(v >> (uint64(width) - 1 - i) & 1)
		p := off + i
		shift := 7 - p&7
		s[p>>3] = s[p>>3]&^(1<<shift) | b<<shift
	}
}

// signExtend interprets the low width bits of v as a two's complement
// number (the higher bits of v are ignored).
func signExtend(v uint64, width uint) int64 {
	if width < 64 {
		if v&(1<<(width-1)) != 0 {
			v |= math.MaxUint64 << width
		} else {
			v &^= math.MaxUint64 << width
		}
	}
	return int64(v)
}

// signedOverflow is Redis's checkSignedBitfieldOverflow: whether value+incr
// fits a signed field of width bits and, if not, the value to store for
// WRAP or SAT. Its comparisons are Redis's own, with the same 64-bit
// wrap-around in the intermediate differences (so that SET i8 -2^63 SAT
// gives 127, as it does in Redis).
func signedOverflow(value, incr int64, width uint, mode int) (int64, bool) {
	maxV := int64(math.MaxInt64)
	if width < 64 {
		maxV = 1<<(width-1) - 1
	}
	minV := -maxV - 1
	maxIncr := int64(uint64(maxV) - uint64(value))
	minIncr := minV - value
	var limit int64
	switch {
	case value > maxV || (width != 64 && incr > maxIncr) || (value >= 0 && incr > 0 && incr > maxIncr):
		limit = maxV
	case value < minV || (width != 64 && incr < minIncr) || (value < 0 && incr < 0 && incr < minIncr):
		limit = minV
	default:
		return 0, false
	}
	if mode == bfWrap {
		limit = signExtend(uint64(value)+uint64(incr), width)
	}
	return limit, true
}

// unsignedOverflow is Redis's checkUnsignedBitfieldOverflow (width <= 63).
func unsignedOverflow(value uint64, incr int64, width uint, mode int) (uint64, bool) {
	maxV := uint64(1)<<width - 1
	maxIncr := int64(maxV - value)
	minIncr := -int64(value)
	var limit uint64
	switch {
	case value > maxV || (incr > 0 && incr > maxIncr):
		limit = maxV
	case incr < 0 && incr < minIncr:
		limit = 0
	default:
		return 0, false
	}
	if mode == bfWrap {
		limit = (value + uint64(incr)) & maxV
	}
	return limit, true
}

// cmdBitField: BITFIELD key [GET type offset | SET type offset value |
// INCRBY type offset increment | OVERFLOW WRAP|SAT|FAIL ...], and
// BITFIELD_RO key [GET type offset ...]. Writes first grow the string to
// hold the farthest field written (even if an OVERFLOW FAIL then writes
// nothing, as in Redis), keeping its TTL.
func cmdBitField(x *ctx, args [][]byte) Reply {
	var ops []bfOp
	write, errR := parseBitfield(args, &ops)
	if errR != nil {
		return *errR
	}
	if write && eq(args[0], "BITFIELD_RO") {
		return errBitfieldRO
	}
	if write && x.w == nil {
		return Error("ERR internal: write command sent to Read")
	}
	rec, exists, e := getString(x, args[1])
	if e != nil {
		return errReply(e)
	}
	v := rec.value
	dirty := false
	if write {
		var need uint64
		for _, o := range ops {
			if o.op != bfGet {
				need = max(need, (o.offset+uint64(o.width)-1)>>3+1)
			}
		}
		dirty = !exists || uint64(len(v)) < need
		v = growZero(v, need)
	}
	out := make([]Reply, len(ops))
	for i, o := range ops {
		old := getField(v, o.offset, o.width)
		if o.op == bfGet {
			if o.signed {
				out[i] = Int(signExtend(old, o.width))
			} else {
				out[i] = Int(int64(old))
			}
			continue
		}
		var newV uint64
		var ret int64
		var over bool
		if o.signed {
			oldS := signExtend(old, o.width)
			var lim int64
			if o.op == bfIncrBy {
				lim, over = signedOverflow(oldS, o.arg, o.width, o.overflow)
				if !over {
					lim = oldS + o.arg
				}
				ret = lim
			} else {
				lim, over = signedOverflow(o.arg, 0, o.width, o.overflow)
				if !over {
					lim = o.arg
				}
				ret = oldS
			}
			newV = uint64(lim)
		} else {
			if o.op == bfIncrBy {
				newV, over = unsignedOverflow(old, o.arg, o.width, o.overflow)
				if !over {
					newV = old + uint64(o.arg)
				}
				ret = int64(newV)
			} else {
				newV, over = unsignedOverflow(uint64(o.arg), 0, o.width, o.overflow)
				if !over {
					newV = uint64(o.arg)
				}
				ret = int64(old)
			}
		}
		if over && o.overflow == bfFail {
			out[i] = Nil
			continue
		}
		out[i] = Int(ret)
		if mask := uint64(math.MaxUint64) >> (64 - o.width); newV&mask != old {
			setField(v, o.offset, o.width, newV)
			dirty = true
		}
	}
	if dirty {
		if r := putString(x, args[1], v, rec.expire); r.IsError() {
			return r
		}
	}
	return Array(out...)
}
