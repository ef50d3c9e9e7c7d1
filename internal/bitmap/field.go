package bitmap

import "math"

// Type is the type of a BITFIELD integer: i1..i64 or u1..u63.
type Type struct {
	Signed bool
	Width  uint // bits
}

// Overflow is what BITFIELD does when a SET or INCRBY does not fit.
type Overflow int

// BITFIELD's OVERFLOW behaviours.
const (
	Wrap Overflow = iota
	Sat
	Fail
)

// Field reads width bits at off of s as an unsigned number (bits past the
// end of s are 0).
func Field(s []byte, off uint64, width uint) uint64 {
	var v uint64
	for i := uint64(0); i < uint64(width); i++ {
		v = v<<1 | uint64(Bit(s, off+i))
	}
	return v
}

// SetField writes the low width bits of v at off of s (long enough).
func SetField(s []byte, off uint64, width uint, v uint64) {
	for i := uint64(0); i < uint64(width); i++ {
		SetBit(s, off+i, byte(v>>(uint64(width)-1-i)&1))
	}
}

// Value is the number the field bits (as Field reads them) stand for.
func (t Type) Value(bits uint64) int64 {
	if t.Signed {
		return SignExtend(bits, t.Width)
	}
	return int64(bits)
}

// Update is a BITFIELD SET (incr false: the field becomes arg) or INCRBY
// (incr true: arg is added) of a field of type t whose bits are old, with
// overflow mode. It returns the field's new bits, the number to reply
// (SET: the old value, INCRBY: the new one) and ok=false for an overflow
// under Fail, which changes nothing.
func (t Type) Update(old uint64, incr bool, arg int64, mode Overflow) (bits uint64, reply int64, ok bool) {
	var over bool
	if t.Signed {
		oldS := SignExtend(old, t.Width)
		var v int64
		if incr {
			if v, over = SignedOverflow(oldS, arg, t.Width, mode); !over {
				v = oldS + arg
			}
			reply = v
		} else {
			if v, over = SignedOverflow(arg, 0, t.Width, mode); !over {
				v = arg
			}
			reply = oldS
		}
		bits = uint64(v)
	} else {
		if incr {
			if bits, over = UnsignedOverflow(old, arg, t.Width, mode); !over {
				bits = old + uint64(arg)
			}
			reply = int64(bits)
		} else {
			if bits, over = UnsignedOverflow(uint64(arg), 0, t.Width, mode); !over {
				bits = uint64(arg)
			}
			reply = int64(old)
		}
	}
	if over && mode == Fail {
		return old, 0, false
	}
	return bits & (math.MaxUint64 >> (64 - t.Width)), reply, true
}

// SignExtend interprets the low width bits of v as a two's complement
// number (the higher bits of v are ignored).
func SignExtend(v uint64, width uint) int64 {
	if width < 64 {
		if v&(1<<(width-1)) != 0 {
			v |= math.MaxUint64 << width
		} else {
			v &^= math.MaxUint64 << width
		}
	}
	return int64(v)
}

// SignedOverflow is Redis's checkSignedBitfieldOverflow: whether value+incr
// overflows a signed field of width bits and, if so, the value to store for
// Wrap or Sat. Its comparisons are Redis's own, with the same 64-bit
// wrap-around in the intermediate differences (so that SET i8 -2^63 SAT
// gives 127, as it does in Redis).
func SignedOverflow(value, incr int64, width uint, mode Overflow) (int64, bool) {
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
	if mode == Wrap {
		limit = SignExtend(uint64(value)+uint64(incr), width)
	}
	return limit, true
}

// UnsignedOverflow is Redis's checkUnsignedBitfieldOverflow (width <= 63).
func UnsignedOverflow(value uint64, incr int64, width uint, mode Overflow) (uint64, bool) {
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
	if mode == Wrap {
		limit = (value + uint64(incr)) & maxV
	}
	return limit, true
}
