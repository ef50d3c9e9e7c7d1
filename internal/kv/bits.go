package kv

import (
	"bytes"

	"github.com/kvorum/kvorum/internal/bitmap"
	"github.com/kvorum/kvorum/internal/redisnum"
)

// Bit commands (Redis's "bitmap" group): GETBIT, SETBIT, BITCOUNT, BITPOS,
// BITOP, BITFIELD and BITFIELD_RO, with Redis 7.0's replies, error texts
// and argument checking order. The bit arithmetic is package bitmap's: bit
// 0 is the most significant bit of the first byte; a missing key reads as
// an empty string and bits past the end of a string read as 0.

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
	defParsed("getbit", 3, "readonly fast", 1, 1, 1, "bitmap", "Returns a bit value by offset.", parseGetBit, cmdGetBit)
	defParsed("setbit", 4, "write denyoom", 1, 1, 1, "bitmap", "Sets or clears the bit at offset of the string value. Creates the key if it doesn't exist.", parseSetBit, cmdSetBit)
	// BITCOUNT's range arguments are only looked at when the key holds a
	// string (a missing key answers 0 whatever follows), so it has no check.
	def("bitcount", -2, "readonly", 1, 1, 1, "bitmap", "Counts the number of set bits (population counting) in a string.", cmdBitCount, nil)
	// BITPOS's bit is checked before the key, its range after.
	defParsed("bitpos", -3, "readonly", 1, 1, 1, "bitmap", "Finds the first set (1) or clear (0) bit in a string.", parseBitPos, cmdBitPos)
	defParsed("bitop", -4, "write denyoom", 2, -1, 1, "bitmap", "Performs bitwise operations on multiple strings, and stores the result.", parseBitOp, cmdBitOp)
	defParsed("bitfield", -2, "write denyoom", 1, 1, 1, "bitmap", "Performs arbitrary bitfield integer operations on strings.", parseBitfield, cmdBitField)
	// A BITFIELD made of GET (and OVERFLOW) subcommands only changes
	// nothing: it is served as a read.
	table["bitfield"].readOnly = func(args [][]byte) bool {
		bf, _, ok := parseBitfield(args)
		return ok && !bf.write
	}
	defParsed("bitfield_ro", -2, "readonly fast", 1, 1, 1, "bitmap", "Performs arbitrary read-only bitfield integer operations on strings.", parseBitfield, cmdBitField)
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

func parseGetBit(args [][]byte) (uint64, Reply, bool) {
	off, ok := parseBitOffset(args[2], false, 0)
	if !ok {
		return 0, errBitOffset, false
	}
	return off, Reply{}, true
}

func cmdGetBit(x *ctx, args [][]byte, off uint64) Reply {
	rec, _, err := getString(x, args[1])
	if err != nil {
		return errReply(err)
	}
	return Int(int64(bitmap.Bit(rec.value, off)))
}

// setBit is a parsed SETBIT: the offset and the value, 0 or 1.
type setBit struct {
	off uint64
	on  byte
}

func parseSetBit(args [][]byte) (setBit, Reply, bool) {
	off, r, ok := parseGetBit(args)
	if !ok {
		return setBit{}, r, false
	}
	n, ok := redisnum.ParseInt(args[3])
	if !ok || n&^1 != 0 {
		return setBit{}, errBitValue, false
	}
	return setBit{off, byte(n)}, Reply{}, true
}

func cmdSetBit(x *ctx, args [][]byte, b setBit) Reply {
	rec, exists, err := getString(x, args[1])
	if err != nil {
		return errReply(err)
	}
	old := bitmap.Bit(rec.value, b.off)
	need := b.off>>3 + 1
	if exists && old == b.on && uint64(len(rec.value)) >= need {
		return Int(int64(old)) // nothing changes: the key is not touched, as in Redis
	}
	v := bitmap.Grow(rec.value, need)
	bitmap.SetBit(v, b.off, b.on)
	if r := putString(x, "setbit", args[1], v, rec.expire); r.IsError() {
		return r
	}
	return Int(int64(old))
}

// bitRange is the range of bits of a string of n bytes that BITCOUNT's and
// BITPOS's start and end select (GETRANGE's clamping, in bytes, or in bits
// with BIT); empty if from > to.
func bitRange(n int64, q indexRange, isBit bool) (from, to int64) {
	if isBit {
		return q.clamp(n * 8)
	}
	from, to = q.clamp(n)
	if from > to {
		return 0, -1
	}
	return from * 8, to*8 + 7
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
	rec, ok, err := getString(x, args[1])
	if err != nil || !ok {
		return errOr(err, Int(0))
	}
	p := rec.value
	from, to := int64(0), int64(len(p))*8-1
	switch len(args) {
	case 2:
	case 4, 5:
		q, r, ok := parseRange(args)
		if !ok {
			return r
		}
		if q.start < 0 && q.end < 0 && q.start > q.end {
			return Int(0) // before the unit is looked at, as in Redis
		}
		isBit := false
		if len(args) == 5 {
			if isBit, ok = parseUnit(args[4]); !ok {
				return errSyntax
			}
		}
		from, to = bitRange(int64(len(p)), q, isBit)
	default:
		return errSyntax
	}
	return Int(bitmap.Count(p, from, to))
}

// parseBitPos reads the bit BITPOS looks for, 0 or 1.
func parseBitPos(args [][]byte) (byte, Reply, bool) {
	n, ok := redisnum.ParseInt(args[2])
	if !ok {
		return 0, errNotInt, false
	}
	if n != 0 && n != 1 {
		return 0, errBitArg, false
	}
	return byte(n), Reply{}, true
}

// cmdBitPos: BITPOS key bit [start [end [BYTE|BIT]]]. Without an end, the
// string is taken as zero-padded on the right: looking for a 0 in a string
// of ones answers the bit just past it.
func cmdBitPos(x *ctx, args [][]byte, bit byte) Reply {
	rec, exists, err := getString(x, args[1])
	if err != nil {
		return errReply(err)
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
		q := indexRange{end: n - 1}
		var ok bool
		if q.start, ok = redisnum.ParseInt(args[3]); !ok {
			return errNotInt
		}
		isBit := false
		if len(args) == 6 {
			if isBit, ok = parseUnit(args[5]); !ok {
				return errSyntax
			}
		}
		if len(args) >= 5 {
			if q.end, ok = redisnum.ParseInt(args[4]); !ok {
				return errNotInt
			}
			endGiven = true
		}
		from, to = bitRange(n, q, isBit)
	default:
		return errSyntax
	}
	if from > to {
		return Int(-1) // an empty range holds neither 0 nor 1
	}
	pos := bitmap.Find(p, from, to, bit)
	if pos < 0 && bit == 0 && !endGiven {
		return Int(n * 8)
	}
	return Int(pos)
}

func parseBitOp(args [][]byte) (bitmap.Op, Reply, bool) {
	var op bitmap.Op
	switch a := args[1]; {
	case eq(a, "AND"):
		op = bitmap.And
	case eq(a, "OR"):
		op = bitmap.Or
	case eq(a, "XOR"):
		op = bitmap.Xor
	case eq(a, "NOT"):
		if len(args) != 4 {
			return 0, errBitOpNot, false
		}
		op = bitmap.Not
	default:
		return 0, errSyntax, false
	}
	return op, Reply{}, true
}

// cmdBitOp: BITOP AND|OR|XOR|NOT destkey key [key ...]. Missing keys are
// empty strings, shorter strings are zero-padded; the result replaces the
// destination (any type, without TTL), or deletes it if empty.
func cmdBitOp(x *ctx, args [][]byte, op bitmap.Op) Reply {
	srcs := make([][]byte, 0, len(args)-3)
	for _, k := range args[3:] {
		rec, _, err := getString(x, k)
		if err != nil {
			return errReply(err)
		}
		srcs = append(srcs, rec.value)
	}
	res := bitmap.Combine(op, srcs)
	dest := args[2]
	if len(res) == 0 {
		if err := x.del(dest); err != nil {
			return errReply(err)
		}
		return Int(0)
	}
	if r := putString(x, "set", dest, res, 0); r.IsError() {
		return r
	}
	return Int(int64(len(res)))
}

// BITFIELD subcommands.
const (
	bfGet = iota
	bfSet
	bfIncrBy
)

type bfOp struct {
	op       int
	overflow bitmap.Overflow
	typ      bitmap.Type
	offset   uint64
	arg      int64 // SET's value, INCRBY's increment
}

// bitfieldArgs is a parsed BITFIELD or BITFIELD_RO.
type bitfieldArgs struct {
	ops   []bfOp
	write bool // a SET or INCRBY among them
}

// parseBitfield parses BITFIELD's subcommands the way Redis does, failing
// at the first error; BITFIELD_RO takes GETs only.
func parseBitfield(args [][]byte) (bitfieldArgs, Reply, bool) {
	var bf bitfieldArgs
	overflow := bitmap.Wrap
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
				overflow = bitmap.Wrap
			case eq(t, "SAT"):
				overflow = bitmap.Sat
			case eq(t, "FAIL"):
				overflow = bitmap.Fail
			default:
				return bf, errOverflowType, false
			}
			continue
		default:
			return bf, errSyntax, false
		}
		typ, ok := parseBitfieldType(args[j+1])
		if !ok {
			return bf, errBitfieldType, false
		}
		off, ok := parseBitOffset(args[j+2], true, int(typ.Width))
		if !ok {
			return bf, errBitOffset, false
		}
		var arg int64
		if op != bfGet {
			bf.write = true
			if arg, ok = redisnum.ParseInt(args[j+3]); !ok {
				return bf, errNotInt, false
			}
			j += 3
		} else {
			j += 2
		}
		bf.ops = append(bf.ops, bfOp{op: op, overflow: overflow, typ: typ, offset: off, arg: arg})
	}
	if bf.write && eq(args[0], "BITFIELD_RO") {
		return bf, errBitfieldRO, false
	}
	return bf, Reply{}, true
}

// parseBitfieldType reads i1..i64 or u1..u63. Redis reads the width as a
// C string: it stops at a NUL byte.
func parseBitfieldType(b []byte) (bitmap.Type, bool) {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	if len(b) == 0 || (b[0] != 'i' && b[0] != 'u') {
		return bitmap.Type{}, false
	}
	signed := b[0] == 'i'
	n, ok := redisnum.ParseInt(b[1:])
	if !ok || n < 1 || (signed && n > 64) || (!signed && n > 63) {
		return bitmap.Type{}, false
	}
	return bitmap.Type{Signed: signed, Width: uint(n)}, true
}

// cmdBitField: BITFIELD key [GET type offset | SET type offset value |
// INCRBY type offset increment | OVERFLOW WRAP|SAT|FAIL ...], and
// BITFIELD_RO key [GET type offset ...]. Writes first grow the string to
// hold the farthest field written (even if an OVERFLOW FAIL then writes
// nothing, as in Redis), keeping its TTL.
func cmdBitField(x *ctx, args [][]byte, bf bitfieldArgs) Reply {
	if bf.write && x.w == nil {
		return Error("ERR internal: write command sent to Read")
	}
	rec, exists, err := getString(x, args[1])
	if err != nil {
		return errReply(err)
	}
	v := rec.value
	dirty := false
	if bf.write {
		var need uint64
		for _, o := range bf.ops {
			if o.op != bfGet {
				need = max(need, (o.offset+uint64(o.typ.Width)-1)>>3+1)
			}
		}
		dirty = !exists || uint64(len(v)) < need
		v = bitmap.Grow(v, need)
	}
	out := make([]Reply, len(bf.ops))
	for i, o := range bf.ops {
		old := bitmap.Field(v, o.offset, o.typ.Width)
		if o.op == bfGet {
			out[i] = Int(o.typ.Value(old))
			continue
		}
		bits, ret, ok := o.typ.Update(old, o.op == bfIncrBy, o.arg, o.overflow)
		if !ok {
			out[i] = Nil
			continue
		}
		out[i] = Int(ret)
		if bits != old {
			bitmap.SetField(v, o.offset, o.typ.Width, bits)
			dirty = true
		}
	}
	if dirty {
		if r := putString(x, "setbit", args[1], v, rec.expire); r.IsError() {
			return r
		}
	}
	return Array(out...)
}
