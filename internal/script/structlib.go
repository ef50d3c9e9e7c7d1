package script

import (
	"encoding/binary"
	"math"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// struct: Roberto Ierusalimschy's struct library as Redis 7.0 ships it
// (lua_struct.c: pack, unpack, size), on a 64-bit little-endian machine
// (short 2, int 4, long and size_t 8 bytes, maximum alignment 8). No Go
// library implements this format; the C code's conversions, including
// those C leaves undefined (a double beyond the range of an unsigned
// long, masks shifted by 64 or more), are reproduced as x86-64 runs them.

const (
	structMaxIntSize = 32 // MAXINTSIZE
	structMaxAlign   = 8  // MAXALIGN
)

type structHeader struct {
	little bool
	align  int
}

func (vm *luaVM) structLib() map[string]lua.LGFunction {
	return map[string]lua.LGFunction{"pack": vm.structPack, "unpack": vm.structUnpack, "size": vm.structSize}
}

// structFmt walks a format string.
type structFmt struct {
	L     *lua.LState
	fname string
	f     string
	i     int
}

// getnum reads a decimal number at the cursor, or returns df.
func (s *structFmt) getnum(df int) int {
	if s.i >= len(s.f) || !isDigit(s.f[s.i]) {
		return df
	}
	a := 0
	for s.i < len(s.f) && isDigit(s.f[s.i]) {
		d := int(s.f[s.i] - '0')
		if a > math.MaxInt32/10 || a*10 > math.MaxInt32-d {
			libError(s.L, "integral size overflow")
		}
		a = a*10 + d
		s.i++
	}
	return a
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isAlnum(c byte) bool {
	return isDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

// optsize returns the size of option opt (reading its count).
func (s *structFmt) optsize(opt byte) int {
	switch opt {
	case 'B', 'b':
		return 1
	case 'H', 'h':
		return 2
	case 'L', 'l', 'T', 'd':
		return 8
	case 'f':
		return 4
	case 'x':
		return 1
	case 'c':
		return s.getnum(1)
	case 'i', 'I':
		sz := s.getnum(4)
		if sz > structMaxIntSize {
			libError(s.L, "integral size "+strconv.Itoa(sz)+" is larger than limit of "+strconv.Itoa(structMaxIntSize))
		}
		return sz
	}
	return 0
}

func structToAlign(n int, h *structHeader, opt byte, size int) int {
	if size == 0 || opt == 'c' {
		return 0
	}
	if size > h.align {
		size = h.align
	}
	return (size - (n & (size - 1))) & (size - 1)
}

// controloptions handles ' ', '>', '<' and '!'; any other option is
// invalid.
func (s *structFmt) controloptions(opt byte, h *structHeader) {
	switch opt {
	case ' ':
	case '>':
		h.little = false
	case '<':
		h.little = true
	case '!':
		a := s.getnum(structMaxAlign)
		if a <= 0 || a&(a-1) != 0 {
			libError(s.L, "alignment "+strconv.Itoa(a)+" is not a power of 2")
		}
		h.align = a
	default:
		libArgError(s.L, 1, s.fname, "invalid format option '"+string([]byte{opt})+"'")
	}
}

// structArgType names argument n for "expected" messages: pack pushes a
// nil right after its arguments.
func structArgType(L *lua.LState, n, top int) string {
	if n == top+1 {
		return "nil"
	}
	return luaTypeName(L, n)
}

// cToUint64 is C's (unsigned long) conversion of a double on x86-64,
// including values it leaves undefined.
func cToUint64(n float64) uint64 {
	const two63 = 9.223372036854775808e18
	switch {
	case n < 0:
		if n < -two63 {
			return 1 << 63
		}
		return uint64(int64(n))
	case n >= two63:
		d := n - two63
		if d >= two63 {
			return 0
		}
		return uint64(int64(d)) ^ 1<<63
	case n != n:
		return 1 << 63
	}
	return uint64(n)
}

func (vm *luaVM) structPack(L *lua.LState) int {
	f := checkStringLib(L, 1, "pack")
	top := L.GetTop()
	s := &structFmt{L: L, fname: "pack", f: f}
	h := structHeader{little: true, align: 1}
	arg := 2
	o := &outBuf{vm: vm, L: L}
	number := func() float64 {
		n, ok := luaToNumber(L.Get(arg))
		if !ok {
			libArgError(L, arg, "pack", "number expected, got "+structArgType(L, arg, top))
		}
		arg++
		return n
	}
	total := 0
	for s.i < len(f) {
		vm.charge(L, 1)
		opt := f[s.i]
		s.i++
		size := s.optsize(opt)
		pad := structToAlign(total, &h, opt, size)
		total += pad
		for ; pad > 0; pad-- {
			o.writeByte(0)
		}
		switch opt {
		case 'b', 'B', 'h', 'H', 'l', 'L', 'T', 'i', 'I':
			v := cToUint64(number())
			buf := make([]byte, size)
			for i := 0; i < size; i++ {
				j := size - 1 - i
				if h.little {
					j = i
				}
				buf[j] = byte(v)
				v >>= 8
			}
			o.writeString(string(buf))
		case 'x':
			o.writeByte(0)
		case 'f':
			o.writeString(string(structOrder(h.little).AppendUint32(nil, math.Float32bits(float32(number())))))
		case 'd':
			o.writeString(string(structOrder(h.little).AppendUint64(nil, math.Float64bits(number()))))
		case 'c', 's':
			var str string
			switch v := L.Get(arg).(type) {
			case lua.LString:
				str = string(v)
			case lua.LNumber:
				str = fmtNum14(float64(v))
			default:
				libArgError(L, arg, "pack", "string expected, got "+structArgType(L, arg, top))
			}
			arg++
			if size == 0 {
				size = len(str)
			}
			if len(str) < size {
				libArgError(L, arg, "pack", "string too short")
			}
			o.writeString(str[:size])
			if opt == 's' {
				o.writeByte(0)
				size++
			}
		default:
			s.controloptions(opt, &h)
		}
		total += size
	}
	L.Push(lua.LString(o.String()))
	return 1
}

func structOrder(little bool) interface {
	binary.AppendByteOrder
	binary.ByteOrder
} {
	if little {
		return binary.LittleEndian
	}
	return binary.BigEndian
}

// checkStringLib is luaL_checklstring with libArgError's naming.
func checkStringLib(L *lua.LState, n int, fname string) string {
	switch v := L.Get(n).(type) {
	case lua.LString:
		return string(v)
	case lua.LNumber:
		return fmtNum14(float64(v))
	}
	libArgError(L, n, fname, "string expected, got "+luaTypeName(L, n))
	return ""
}

func (vm *luaVM) structUnpack(L *lua.LState) int {
	f := checkStringLib(L, 1, "unpack")
	data := checkStringLib(L, 2, "unpack")
	ld := uint64(len(data))
	start := int64(1)
	if L.Get(3) != lua.LNil {
		n, ok := luaToNumber(L.Get(3))
		if !ok {
			libArgError(L, 3, "unpack", "number expected, got "+luaTypeName(L, 3))
		}
		start = luaToInt64(n)
	}
	pos := uint64(start) // size_t
	if pos == 0 {
		libArgError(L, 3, "unpack", "offset must be 1 or greater")
	}
	pos--
	s := &structFmt{L: L, fname: "unpack", f: f}
	h := structHeader{little: true, align: 1}
	var out []lua.LValue
	tooShort := func(size uint64) {
		if !(size <= ld && pos <= ld-size) {
			libArgError(L, 2, "unpack", "data string too short")
		}
	}
	for s.i < len(f) {
		vm.charge(L, 1)
		opt := f[s.i]
		s.i++
		size := uint64(s.optsize(opt))
		pos += uint64(structToAlign(int(pos), &h, opt, int(size)))
		tooShort(size)
		if len(out)+2+3 > luaMaxCStack {
			libError(L, "stack overflow (too many results)")
		}
		switch opt {
		case 'b', 'B', 'h', 'H', 'l', 'L', 'T', 'i', 'I':
			var l uint64
			for i := uint64(0); i < size; i++ {
				j := size - 1 - i
				if !h.little {
					j = i
				}
				l = l<<8 | uint64(data[pos+j])
			}
			if opt >= 'a' && opt <= 'z' { // signed
				mask := ^uint64(0) << ((size*8 - 1) & 63)
				if l&mask != 0 {
					l |= mask
				}
				out = append(out, lua.LNumber(int64(l)))
			} else {
				out = append(out, lua.LNumber(l))
			}
		case 'x':
		case 'f':
			b := []byte(data[pos : pos+4])
			out = append(out, lua.LNumber(math.Float32frombits(structOrder(h.little).Uint32(b))))
		case 'd':
			b := []byte(data[pos : pos+8])
			out = append(out, lua.LNumber(math.Float64frombits(structOrder(h.little).Uint64(b))))
		case 'c':
			if size == 0 {
				var n float64
				ok := len(out) > 0
				if ok {
					n, ok = luaToNumber(out[len(out)-1])
				}
				if !ok {
					libError(L, "format 'c0' needs a previous size")
				}
				size = cToUint64(n)
				out = out[:len(out)-1]
				tooShort(size)
			}
			vm.chargeBytes(L, int(size))
			out = append(out, lua.LString(data[pos:pos+size]))
		case 's':
			e := strings.IndexByte(data[pos:], 0)
			if e < 0 {
				libError(L, "unfinished string in data")
			}
			size = uint64(e) + 1
			vm.chargeBytes(L, e)
			out = append(out, lua.LString(data[pos:pos+uint64(e)]))
		default:
			s.controloptions(opt, &h)
		}
		pos += size
	}
	for _, v := range out {
		L.Push(v)
	}
	L.Push(lua.LNumber(int64(pos + 1)))
	return len(out) + 1
}

func (vm *luaVM) structSize(L *lua.LState) int {
	f := checkStringLib(L, 1, "size")
	s := &structFmt{L: L, fname: "size", f: f}
	h := structHeader{little: true, align: 1}
	pos := 0
	for s.i < len(f) {
		vm.charge(L, 1)
		opt := f[s.i]
		s.i++
		size := s.optsize(opt)
		pos += structToAlign(pos, &h, opt, size)
		if opt == 's' {
			libArgError(L, 1, "size", "option 's' has no fixed size")
		} else if opt == 'c' && size == 0 {
			libArgError(L, 1, "size", "option 'c0' has no fixed size")
		}
		if !isAlnum(opt) {
			s.controloptions(opt, &h)
		}
		pos += size
	}
	L.Push(lua.LNumber(pos))
	return 1
}
