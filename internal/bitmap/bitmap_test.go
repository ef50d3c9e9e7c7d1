package bitmap

import (
	"bytes"
	"testing"
	"testing/quick"
)

// bitsOf spells out the bits of s, most significant first: the reference
// the tests compare with.
func bitsOf(s []byte) []byte {
	out := make([]byte, 0, len(s)*8)
	for _, c := range s {
		for i := 7; i >= 0; i-- {
			out = append(out, c>>i&1)
		}
	}
	return out
}

// span turns two arbitrary numbers into a range from..to inside n bits
// (n > 0).
func span(a, b uint16, n int) (from, to int64) {
	from, to = int64(int(a)%n), int64(int(b)%n)
	return min(from, to), max(from, to)
}

func TestCountAndFind(t *testing.T) {
	count := func(s []byte, a, b uint16) bool {
		if len(s) == 0 {
			return Count(s, 0, -1) == 0
		}
		bs := bitsOf(s)
		from, to := span(a, b, len(bs))
		var want int64
		for _, c := range bs[from : to+1] {
			want += int64(c)
		}
		return Count(s, from, to) == want
	}
	find := func(s []byte, a, b uint16, bit bool) bool {
		if len(s) == 0 {
			return true
		}
		bs := bitsOf(s)
		from, to := span(a, b, len(bs))
		var v byte
		if bit {
			v = 1
		}
		want := int64(-1)
		if i := bytes.IndexByte(bs[from:to+1], v); i >= 0 {
			want = from + int64(i)
		}
		return Find(s, from, to, v) == want
	}
	for name, f := range map[string]any{"Count": count, "Find": find} {
		if err := quick.Check(f, &quick.Config{MaxCount: 2000}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestBitsAndFields(t *testing.T) {
	f := func(s []byte, off uint16, width uint8, v uint64) bool {
		width = width%64 + 1
		o := uint64(off) % 200
		t := Grow(bytes.Clone(s), (o+uint64(width)+7)/8)
		if !bytes.HasPrefix(t, s) || bytes.Count(t[len(s):], []byte{0}) != len(t)-len(s) {
			return false // Grow pads with zeros
		}
		before := bitsOf(t)
		SetField(t, o, uint(width), v)
		after := bitsOf(t)
		mask := ^uint64(0) >> (64 - width)
		if Field(t, o, uint(width)) != v&mask {
			return false
		}
		for i := range after { // the bits outside the field are kept
			if (uint64(i) < o || uint64(i) >= o+uint64(width)) && after[i] != before[i] {
				return false
			}
			if Bit(t, uint64(i)) != after[i] {
				return false
			}
		}
		return Bit(t, uint64(len(after))) == 0
	}
	if err := quick.Check(f, &quick.Config{MaxCount: 2000}); err != nil {
		t.Error(err)
	}
}

func TestCombine(t *testing.T) {
	f := func(srcs [][]byte, op uint8) bool {
		if len(srcs) == 0 {
			return true
		}
		o := Op(op % 4)
		if o == Not {
			srcs = srcs[:1]
		}
		got := Combine(o, srcs)
		n := 0
		for _, s := range srcs {
			n = max(n, len(s))
		}
		if len(got) != n {
			return false
		}
		at := func(s []byte, i int) byte {
			if i < len(s) {
				return s[i]
			}
			return 0
		}
		for i := range got {
			want := at(srcs[0], i)
			for _, s := range srcs[1:] {
				switch o {
				case And:
					want &= at(s, i)
				case Or:
					want |= at(s, i)
				case Xor:
					want ^= at(s, i)
				}
			}
			if o == Not {
				want = ^want
			}
			if got[i] != want {
				return false
			}
		}
		return true
	}
	if err := quick.Check(f, &quick.Config{MaxCount: 2000}); err != nil {
		t.Error(err)
	}
}

// TestUpdate: SET and INCRBY of a field, with each overflow mode.
func TestUpdate(t *testing.T) {
	for _, c := range []struct {
		typ   Type
		old   uint64
		incr  bool
		arg   int64
		mode  Overflow
		bits  uint64
		reply int64
		ok    bool
	}{
		{Type{false, 8}, 200, true, 100, Wrap, 44, 44, true},
		{Type{false, 8}, 200, true, 100, Sat, 255, 255, true},
		{Type{false, 8}, 200, true, 100, Fail, 200, 0, false},
		{Type{false, 8}, 200, false, 300, Wrap, 44, 200, true},
		{Type{false, 8}, 200, false, -1, Sat, 255, 200, true}, // uint64(-1) is above the maximum
		{Type{true, 8}, 0x7f, true, 1, Wrap, 0x80, -128, true},
		{Type{true, 8}, 0x7f, true, 1, Sat, 0x7f, 127, true},
		{Type{true, 8}, 0x80, true, -1, Fail, 0x80, 0, false},
		{Type{true, 8}, 0xff, false, -128, Wrap, 0x80, -1, true},
		{Type{true, 64}, 1<<63 - 1, true, 1, Wrap, 1 << 63, -1 << 63, true},
		{Type{true, 4}, 0x8, true, 0, Wrap, 0x8, -8, true},
	} {
		bits, reply, ok := c.typ.Update(c.old, c.incr, c.arg, c.mode)
		if bits != c.bits || reply != c.reply || ok != c.ok {
			t.Errorf("%+v.Update(%d, %v, %d, %d) = %d, %d, %v; want %d, %d, %v", c.typ, c.old, c.incr, c.arg, c.mode, bits, reply, ok, c.bits, c.reply, c.ok)
		}
	}
}

// TestOverflow checks the overflow arithmetic at its edges
// (64-bit wrap-around of Redis's intermediate values included).
func TestOverflow(t *testing.T) {
	const minI64, maxI64 = -1 << 63, 1<<63 - 1
	for _, c := range []struct {
		value, incr int64
		width       uint
		mode        Overflow
		limit       int64
		over        bool
	}{
		{100, 27, 8, Wrap, 0, false},
		{100, 28, 8, Wrap, -128, true},
		{100, 28, 8, Sat, 127, true},
		{-100, -29, 8, Sat, -128, true},
		{-100, -29, 8, Wrap, 127, true},
		{-123, -128, 8, Wrap, 5, true},
		{minI64, 0, 8, Sat, 127, true}, // Redis's quirk: max-value wraps
		{minI64 + 127, 0, 8, Sat, 127, true},
		{minI64 + 128, 0, 8, Sat, -128, true},
		{maxI64, 1, 64, Wrap, minI64, true},
		{maxI64, 1, 64, Sat, maxI64, true},
		{minI64, -1, 64, Sat, minI64, true},
		{minI64, -1, 64, Wrap, maxI64, true},
		{minI64, maxI64, 64, Wrap, 0, false},
		{0, -1, 1, Wrap, 0, false},
		{-1, -1, 1, Wrap, 0, true},
	} {
		limit, over := SignedOverflow(c.value, c.incr, c.width, c.mode)
		if over != c.over || (over && limit != c.limit) {
			t.Errorf("SignedOverflow(%d, %d, %d, %d) = %d, %v", c.value, c.incr, c.width, c.mode, limit, over)
		}
	}
	for _, c := range []struct {
		value uint64
		incr  int64
		width uint
		mode  Overflow
		limit uint64
		over  bool
	}{
		{250, 5, 8, Wrap, 0, false},
		{250, 6, 8, Wrap, 0, true},
		{250, 6, 8, Sat, 255, true},
		{5, -6, 8, Sat, 0, true},
		{5, -6, 8, Wrap, 255, true},
		{1<<64 - 1, 0, 8, Sat, 255, true}, // SET u8 -1
		{1<<64 - 1, 0, 8, Wrap, 255, true},
		{1<<63 - 1, 1, 63, Wrap, 0, true},
		{0, -1 << 63, 63, Wrap, 0, true},
	} {
		limit, over := UnsignedOverflow(c.value, c.incr, c.width, c.mode)
		if over != c.over || (over && limit != c.limit) {
			t.Errorf("UnsignedOverflow(%d, %d, %d, %d) = %d, %v", c.value, c.incr, c.width, c.mode, limit, over)
		}
	}
}
