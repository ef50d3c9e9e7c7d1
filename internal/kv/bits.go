package kv

import (
	"github.com/kvorum/kvorum/internal/bitmap"
	"github.com/kvorum/kvorum/internal/redisnum"
)

// Bit commands (Redis's "bitmap" group): GETBIT, SETBIT, BITCOUNT, BITPOS,
// BITOP, BITFIELD and BITFIELD_RO, with Redis 7.0's replies, error texts
// and argument checking order. The bit arithmetic, and the parsing of the
// arguments that are read before the key, are package bitmap's: bit 0 is
// the most significant bit of the first byte; a missing key reads as an
// empty string and bits past the end of a string read as 0.

func init() {
	defParsed("getbit", 3, "readonly fast", 1, 1, 1, "bitmap", "Returns a bit value by offset.", bitmap.ParseGetBit, cmdGetBit)
	defParsed("setbit", 4, "write denyoom", 1, 1, 1, "bitmap", "Sets or clears the bit at offset of the string value. Creates the key if it doesn't exist.", bitmap.ParseSetBit, cmdSetBit)
	// BITCOUNT's range arguments are only looked at when the key holds a
	// string (a missing key answers 0 whatever follows), so it has no check.
	def("bitcount", -2, "readonly", 1, 1, 1, "bitmap", "Counts the number of set bits (population counting) in a string.", cmdBitCount, nil)
	// BITPOS's bit is checked before the key, its range after.
	defParsed("bitpos", -3, "readonly", 1, 1, 1, "bitmap", "Finds the first set (1) or clear (0) bit in a string.", bitmap.ParseBitPos, cmdBitPos)
	defParsed("bitop", -4, "write denyoom", 2, -1, 1, "bitmap", "Performs bitwise operations on multiple strings, and stores the result.", bitmap.ParseBitOp, cmdBitOp)
	defParsed("bitfield", -2, "write denyoom", 1, 1, 1, "bitmap", "Performs arbitrary bitfield integer operations on strings.", bitmap.ParseBitfield, cmdBitField)
	// A BITFIELD made of GET (and OVERFLOW) subcommands only changes
	// nothing: it is served as a read.
	table["bitfield"].readOnly = func(args [][]byte) bool {
		bf, _, ok := bitmap.ParseBitfield(args)
		return ok && !bf.Write
	}
	defParsed("bitfield_ro", -2, "readonly fast", 1, 1, 1, "bitmap", "Performs arbitrary read-only bitfield integer operations on strings.", bitmap.ParseBitfield, cmdBitField)
}

func cmdGetBit(x *ctx, args [][]byte, off uint64) Reply {
	rec, _, err := getString(x, args[1])
	if err != nil {
		return errReply(err)
	}
	return Int(int64(bitmap.Bit(rec.value, off)))
}

func cmdSetBit(x *ctx, args [][]byte, b bitmap.SetBitArgs) Reply {
	rec, exists, err := getString(x, args[1])
	if err != nil {
		return errReply(err)
	}
	old := bitmap.Bit(rec.value, b.Off)
	need := b.Off>>3 + 1
	if exists && old == b.On && uint64(len(rec.value)) >= need {
		return Int(int64(old)) // nothing changes: the key is not touched, as in Redis
	}
	v := bitmap.Grow(rec.value, need)
	bitmap.SetBit(v, b.Off, b.On)
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

// cmdBitField: BITFIELD key [GET type offset | SET type offset value |
// INCRBY type offset increment | OVERFLOW WRAP|SAT|FAIL ...], and
// BITFIELD_RO key [GET type offset ...]. Writes first grow the string to
// hold the farthest field written (even if an OVERFLOW FAIL then writes
// nothing, as in Redis), keeping its TTL.
func cmdBitField(x *ctx, args [][]byte, bf bitmap.Bitfield) Reply {
	if bf.Write && x.w == nil {
		return Error("ERR internal: write command sent to Read")
	}
	rec, exists, err := getString(x, args[1])
	if err != nil {
		return errReply(err)
	}
	v := rec.value
	dirty := false
	if bf.Write {
		var need uint64
		for _, o := range bf.Ops {
			if o.Op != bitmap.FieldGet {
				need = max(need, (o.Offset+uint64(o.Type.Width)-1)>>3+1)
			}
		}
		dirty = !exists || uint64(len(v)) < need
		v = bitmap.Grow(v, need)
	}
	out := make([]Reply, len(bf.Ops))
	for i, o := range bf.Ops {
		old := bitmap.Field(v, o.Offset, o.Type.Width)
		if o.Op == bitmap.FieldGet {
			out[i] = Int(o.Type.Value(old))
			continue
		}
		bits, ret, ok := o.Type.Update(old, o.Op == bitmap.FieldIncrBy, o.Arg, o.Overflow)
		if !ok {
			out[i] = Nil
			continue
		}
		out[i] = Int(ret)
		if bits != old {
			bitmap.SetField(v, o.Offset, o.Type.Width, bits)
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
